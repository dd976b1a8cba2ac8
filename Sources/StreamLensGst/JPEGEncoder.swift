import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// Packed pixels to a JPEG file's bytes, encoded by GStreamer itself (videoconvert ! jpegenc from
/// gst-plugins-good): how lenssnapshot writes pictures without another image library.
///
/// Why a small pipeline of its own and not `gst_video_convert_sample(sample, "image/jpeg")`:
/// that builds the same videoconvert ! jpegenc inside but gives no way to set jpegenc's
/// `quality`. One pipeline per picture costs a few milliseconds (elements made and dropped);
/// snapshots are rare and encoded off the stage's worker, so that is not worth a cache.
public enum JPEGEncoder {
    /// `pixels`: `height` rows of `width` pixels in `pixelFormat` (GStreamer's name of a packed
    /// format: RGB, BGR, RGBx, BGRx, RGBA, BGRA…), rows back to back with no padding.
    /// `quality`: jpegenc's 1…100. Throws a `StageError` saying what failed.
    public static func encode(pixels: [UInt8], pixelFormat: String, width: Int, height: Int, quality: Int) throws -> Data {
        gst_init(nil, nil)
        let format = gst_video_format_from_string(pixelFormat)
        var info = GstVideoInfo()
        guard width > 0, height > 0, format != GST_VIDEO_FORMAT_UNKNOWN,
              gst_video_info_set_format(&info, format, guint(width), guint(height)) != 0 else {
            throw StageError("cannot encode a \(width)x\(height) \(pixelFormat) picture as JPEG")
        }
        let rowBytes = pixels.count / height, stride = Int(info.stride.0)
        guard rowBytes * height == pixels.count, rowBytes <= stride, Int(info.size) >= stride * height else {
            throw StageError("JPEG: \(pixels.count) bytes are not \(height) rows of a \(width)x\(height) \(pixelFormat) picture")
        }
        let caps = "video/x-raw,format=\(pixelFormat),width=\(width),height=\(height),framerate=0/1,pixel-aspect-ratio=1/1"
        let description = "appsrc name=src format=time caps=\"\(caps)\" ! videoconvert ! jpegenc quality=\(quality) ! appsink name=sink sync=false"
        return try withHelperPipeline(description, cannotBuild: { "JPEG: cannot build the encoder (\($0); is gst-plugins-good's jpegenc installed?)" },
                                      incomplete: "JPEG: encoder pipeline incomplete") { pipeline, src, sink in
            // GStreamer's layout of the format (RGB rows are padded to 4 bytes): copy row by row.
            guard let buffer = gst_buffer_new_allocate(nil, gsize(info.size), nil) else { throw StageError("JPEG: out of memory") }
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0 else {
                gst_buffer_unref(buffer)
                throw StageError("JPEG: cannot fill a buffer")
            }
            pixels.withUnsafeBytes { src in
                for y in 0..<height {
                    map.data.advanced(by: y * stride).update(from: src.baseAddress!.advanced(by: y * rowBytes).assumingMemoryBound(to: UInt8.self),
                                                             count: rowBytes)
                }
            }
            gst_buffer_unmap(buffer, &map)
            sl_buffer_set_pts(buffer, 0)

            let appsrc = UnsafeMutableRawPointer(src).assumingMemoryBound(to: GstAppSrc.self)
            let appsink = UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstAppSink.self)
            gst_element_set_state(pipeline, GST_STATE_PLAYING)
            sl_handoff_release(buffer)
            _ = gst_app_src_push_buffer(appsrc, buffer)   // takes the buffer
            _ = gst_app_src_end_of_stream(appsrc)
            guard let sample = gst_app_sink_try_pull_sample(appsink, GstClockTime(10_000_000_000)) else {
                throw StageError("JPEG: the encoder gave no picture (\(firstBusError(pipeline) ?? "timed out after 10 s"))")
            }
            defer { gst_sample_unref(sample) }
            guard let out = gst_sample_get_buffer(sample) else { throw StageError("JPEG: the encoder gave an empty sample") }
            sl_handoff_acquire(out)
            var outMap = GstMapInfo()
            guard gst_buffer_map(out, &outMap, GST_MAP_READ) != 0 else { throw StageError("JPEG: cannot read the encoded picture") }
            defer { gst_buffer_unmap(out, &outMap) }
            return Data(bytes: outMap.data, count: Int(outMap.size))
        }
    }
}
