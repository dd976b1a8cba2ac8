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
                  strides: strides, offsets: offsets, size: Int(info.size), caps: capsString(caps))
    }
}

extension VideoFormat {
    /// Encoded video's caps (any media type but video/x-raw): its size and rate as the caps
    /// give them (0 when they don't).
    init?(encodedCaps caps: UnsafeMutablePointer<GstCaps>) {
        guard gst_caps_get_size(caps) > 0, let structure = gst_caps_get_structure(caps, 0),
              let name = gst_structure_get_name(structure).map({ String(cString: $0) }), name != "video/x-raw" else { return nil }
        var width: gint = 0, height: gint = 0, n: gint = 0, d: gint = 1
        _ = gst_structure_get_int(structure, "width", &width)
        _ = gst_structure_get_int(structure, "height", &height)
        if gst_structure_get_fraction(structure, "framerate", &n, &d) == 0 { n = 0; d = 1 }
        self.init(encoded: name, width: Int(width), height: Int(height), framerate: (Int(n), Int(d)), caps: capsString(caps))
    }
}

func capsString(_ caps: UnsafeMutablePointer<GstCaps>) -> String {
    takeString(gst_caps_to_string(caps)) ?? "?"
}
