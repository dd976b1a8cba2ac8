import CGStreamer
import StreamLensCore

extension VideoFormat {
    /// The format GStreamer negotiated, or nil for caps that are not raw video.
    init?(caps: UnsafeMutablePointer<GstCaps>) {
        var info = GstVideoInfo()
        guard gst_video_info_from_caps(&info, caps) != 0, let finfo = info.finfo else { return nil }
        let planes = Int(finfo.pointee.n_planes)
        let strides = withUnsafeBytes(of: info.stride) { Array($0.bindMemory(to: gint.self).prefix(planes)).map(Int.init) }
        let offsets = withUnsafeBytes(of: info.offset) { Array($0.bindMemory(to: gsize.self).prefix(planes)).map { Int($0) } }
        self.init(pixelFormat: finfo.pointee.name.map { String(cString: $0) } ?? "unknown",
                  width: Int(info.width), height: Int(info.height),
                  framerate: (Int(info.fps_n), Int(info.fps_d)),
                  strides: strides, offsets: offsets, size: Int(info.size))
    }
}

func capsString(_ caps: UnsafeMutablePointer<GstCaps>) -> String {
    takeString(gst_caps_to_string(caps)) ?? "?"
}
