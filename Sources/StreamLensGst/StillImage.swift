import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// A picture file (PNG, JPEG, anything decodebin reads) decoded by GStreamer itself, as packed
/// 8-bit RGB: how a stage reads a style image without another image library.
public enum StillImage {
    /// Decodes the first frame of `path` scaled to `width`×`height` (its aspect ratio kept with
    /// black borders; `cover`: cut, centred, to that size's aspect ratio first, so it fills the
    /// size as a background does). Throws a `StageError` naming the file when it is missing or
    /// cannot be decoded.
    public static func loadRGB(path: String, width: Int, height: Int, cover: Bool = false) throws -> [UInt8] {
        guard FileManager.default.fileExists(atPath: path) else { throw StageError("image \(path) not found") }
        try InputFile.check(path, what: "image")
        gst_init(nil, nil)
        let crop = cover ? "aspectratiocrop aspect-ratio=\(width)/\(height) ! " : ""
        let description = "filesrc name=src ! decodebin ! videoconvert ! \(crop)videoscale ! video/x-raw,format=RGB,width=\(width),height=\(height),pixel-aspect-ratio=1/1 ! appsink name=sink sync=false max-buffers=1"
        return try withHelperPipeline(description, cannotBuild: { "image \(path): cannot build a decoder (\($0))" },
                                      incomplete: "image \(path): decoder pipeline incomplete") { pipeline, src, sink in
            _ = sl_object_set_from_string(src, "location", path)
            gst_element_set_state(pipeline, GST_STATE_PAUSED)
            // Preroll or fail: the bus says which.
            let bus = gst_element_get_bus(pipeline)!
            defer { gst_object_unref(bus) }
            let mask = GstMessageType(GST_MESSAGE_ERROR.rawValue | GST_MESSAGE_ASYNC_DONE.rawValue | GST_MESSAGE_EOS.rawValue)
            guard let message = gst_bus_timed_pop_filtered(bus, GstClockTime(10_000_000_000), mask) else {
                throw StageError("image \(path): timed out decoding it")
            }
            defer { gst_message_unref(message) }
            switch sl_message_type(message) {
            case GST_MESSAGE_ERROR:
                throw StageError("image \(path) cannot be decoded as a picture (\(errorMessageText(message)))")
            case GST_MESSAGE_EOS:
                throw StageError("image \(path) holds no picture")
            default:
                break
            }
            let appsink = UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstAppSink.self)
            guard let sample = gst_app_sink_pull_preroll(appsink) else { throw StageError("image \(path) holds no picture") }
            defer { gst_sample_unref(sample) }
            guard let buffer = gst_sample_get_buffer(sample), let caps = gst_sample_get_caps(sample),
                  let format = VideoFormat(caps: caps) else {
                throw StageError("image \(path): decoder gave no picture")
            }
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { throw StageError("image \(path): cannot read the decoded picture") }
            defer { gst_buffer_unmap(buffer, &map) }
            var rgb = [UInt8](repeating: 0, count: width * height * 3)
            let stride = format.strides[0]
            rgb.withUnsafeMutableBytes { out in
                for y in 0..<height {
                    out.baseAddress!.advanced(by: y * width * 3).copyMemory(from: map.data.advanced(by: y * stride), byteCount: width * 3)
                }
            }
            return rgb
        }
    }
}
