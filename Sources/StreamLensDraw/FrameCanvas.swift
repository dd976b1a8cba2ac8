import CCairo

// The only Swift file that imports CCairo.

/// Draws boxes and text labels into a frame in place, with cairo (real font rendering through
/// fontconfig/FreeType; set-up installs fonts-dejavu-core). Colours are (r, g, b) in 0…1.
///
/// BGRx and BGRA frames are cairo's own RGB24 layout on little-endian machines and are drawn on
/// directly. Other packed RGB-family frames (RGB, BGR, RGBx, RGBA, xRGB, …) are drawn through a
/// patch: only the rectangle a box or label covers is copied into a scratch RGB24 surface,
/// drawn on, and copied back — a few kilobytes per face, not the whole frame.
public final class FrameCanvas {
    private let pixels: UnsafeMutableRawBufferPointer
    private let width: Int, height: Int, stride: Int
    private let bytesPerPixel: Int
    private let channel: (r: Int, g: Int, b: Int)
    private let native: Bool
    private var frameSurface: (surface: OpaquePointer, cr: OpaquePointer)?
    private let measure: (surface: OpaquePointer, cr: OpaquePointer)

    /// Formats (GStreamer names) the canvas can draw on.
    public static let supportedFormats = ["BGRx", "BGRA", "RGBx", "RGBA", "xRGB", "ARGB", "xBGR", "ABGR", "RGB", "BGR"]

    /// nil for a format or buffer the canvas cannot draw on.
    public init?(pixels: UnsafeMutableRawBufferPointer, width: Int, height: Int, stride: Int, pixelFormat: String) {
        guard Self.supportedFormats.contains(pixelFormat), pixels.baseAddress != nil, width > 0, height > 0,
              stride >= width * pixelFormat.count, pixels.count >= stride * (height - 1) + width * pixelFormat.count
        else { return nil }
        let letters = Array(pixelFormat)
        guard let r = letters.firstIndex(of: "R"), let g = letters.firstIndex(of: "G"), let b = letters.firstIndex(of: "B") else { return nil }
        self.pixels = pixels
        self.width = width
        self.height = height
        self.stride = stride
        bytesPerPixel = letters.count
        channel = (r, g, b)
        native = (pixelFormat == "BGRx" || pixelFormat == "BGRA") && stride % 4 == 0
        let s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1)!
        measure = (s, cairo_create(s)!)
        cairo_select_font_face(measure.cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
    }

    deinit {
        if let f = frameSurface {
            cairo_destroy(f.cr)
            cairo_surface_flush(f.surface)
            cairo_surface_destroy(f.surface)
        }
        cairo_destroy(measure.cr)
        cairo_surface_destroy(measure.surface)
    }

    /// An unfilled rectangle; the line lies inside the box.
    public func rectangle(x: Double, y: Double, width w: Double, height h: Double,
                          color: (Double, Double, Double), thickness: Double) {
        let t = max(1, thickness)
        draw(x: x - 1, y: y - 1, width: w + 2, height: h + 2) { cr in
            cairo_set_source_rgb(cr, color.0, color.1, color.2)
            cairo_set_line_width(cr, t)
            cairo_rectangle(cr, x + t / 2, y + t / 2, max(0, w - t), max(0, h - t))
            cairo_stroke(cr)
        }
    }

    /// Straight lines through `points` (x, y), joined to the first again when `closed` (a
    /// polygon's outline); nothing for fewer than two points.
    public func polyline(_ points: [(x: Double, y: Double)], closed: Bool, color: (Double, Double, Double), thickness: Double) {
        guard points.count >= 2 else { return }
        let t = max(1, thickness)
        let xs = points.map(\.x), ys = points.map(\.y)
        let x0 = xs.min()! - t, y0 = ys.min()! - t
        draw(x: x0, y: y0, width: xs.max()! + t - x0, height: ys.max()! + t - y0) { cr in
            cairo_set_source_rgb(cr, color.0, color.1, color.2)
            cairo_set_line_width(cr, t)
            cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
            cairo_move_to(cr, points[0].x, points[0].y)
            for p in points.dropFirst() { cairo_line_to(cr, p.x, p.y) }
            if closed { cairo_close_path(cr) }
            cairo_stroke(cr)
        }
    }

    /// A filled disc (a keypoint).
    public func dot(x: Double, y: Double, radius: Double, color: (Double, Double, Double)) {
        let r = max(1, radius)
        draw(x: x - r - 1, y: y - r - 1, width: 2 * r + 2, height: 2 * r + 2) { cr in
            cairo_set_source_rgb(cr, color.0, color.1, color.2)
            cairo_arc(cr, x, y, r, 0, 2 * Double.pi)
            cairo_fill(cr)
        }
    }

    /// Text on a filled background whose top-left corner is at (x, y), kept inside the frame.
    public func label(_ text: String, x: Double, y: Double, size: Double,
                      color: (Double, Double, Double), background: (Double, Double, Double)) {
        cairo_set_font_size(measure.cr, size)
        var extents = cairo_text_extents_t()
        cairo_text_extents(measure.cr, text, &extents)
        let pad = size * 0.2
        let w = extents.x_advance + 2 * pad, h = size * 1.25
        let left = min(max(0, x), max(0, Double(width) - w)), top = min(max(0, y), max(0, Double(height) - h))
        draw(x: left, y: top, width: w, height: h) { cr in
            cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
            cairo_set_font_size(cr, size)
            cairo_set_source_rgb(cr, background.0, background.1, background.2)
            cairo_rectangle(cr, left, top, w, h)
            cairo_fill(cr)
            cairo_set_source_rgb(cr, color.0, color.1, color.2)
            cairo_move_to(cr, left + pad, top + size)
            cairo_show_text(cr, text)
        }
    }

    /// Runs `body` with a context in frame coordinates whose drawing lands in the frame.
    /// Coordinates reach here bounded (`FrameBounds`); a value that is not, or is not a number,
    /// draws nothing rather than meeting a conversion that traps.
    private func draw(x: Double, y: Double, width w: Double, height h: Double, _ body: (OpaquePointer) -> Void) {
        guard x.isFinite, y.isFinite, w.isFinite, h.isFinite else { return }
        if native {
            if frameSurface == nil {
                let s = cairo_image_surface_create_for_data(pixels.baseAddress!.assumingMemoryBound(to: UInt8.self), CAIRO_FORMAT_RGB24,
                                                            Int32(width), Int32(height), Int32(stride))!
                frameSurface = (s, cairo_create(s)!)
            }
            body(frameSurface!.cr)
            return
        }
        // The patch: the covered rectangle, clipped to the frame.
        func column(_ v: Double) -> Int { Int(min(max(v, 0), Double(width))) }
        func row(_ v: Double) -> Int { Int(min(max(v, 0), Double(height))) }
        let x0 = column(x.rounded(.down)), y0 = row(y.rounded(.down))
        let x1 = min(width, column((x + w).rounded(.up)) + 1), y1 = min(height, row((y + h).rounded(.up)) + 1)
        guard x1 > x0, y1 > y0 else { return }
        let pw = x1 - x0, ph = y1 - y0
        guard let patch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(pw), Int32(ph)) else { return }
        defer { cairo_surface_destroy(patch) }
        cairo_surface_flush(patch)
        let pStride = Int(cairo_image_surface_get_stride(patch))
        let p = UnsafeMutableRawPointer(cairo_image_surface_get_data(patch)!)
        let f = pixels.baseAddress!
        for row in 0..<ph {
            for col in 0..<pw {
                let src = (y0 + row) * stride + (x0 + col) * bytesPerPixel, dst = row * pStride + col * 4
                p.storeBytes(of: f.load(fromByteOffset: src + channel.b, as: UInt8.self), toByteOffset: dst, as: UInt8.self)
                p.storeBytes(of: f.load(fromByteOffset: src + channel.g, as: UInt8.self), toByteOffset: dst + 1, as: UInt8.self)
                p.storeBytes(of: f.load(fromByteOffset: src + channel.r, as: UInt8.self), toByteOffset: dst + 2, as: UInt8.self)
            }
        }
        cairo_surface_mark_dirty(patch)
        let cr = cairo_create(patch)!
        cairo_translate(cr, -Double(x0), -Double(y0))
        body(cr)
        cairo_destroy(cr)
        cairo_surface_flush(patch)
        for row in 0..<ph {
            for col in 0..<pw {
                let dst = (y0 + row) * stride + (x0 + col) * bytesPerPixel, src = row * pStride + col * 4
                f.storeBytes(of: p.load(fromByteOffset: src, as: UInt8.self), toByteOffset: dst + channel.b, as: UInt8.self)
                f.storeBytes(of: p.load(fromByteOffset: src + 1, as: UInt8.self), toByteOffset: dst + channel.g, as: UInt8.self)
                f.storeBytes(of: p.load(fromByteOffset: src + 2, as: UInt8.self), toByteOffset: dst + channel.r, as: UInt8.self)
            }
        }
    }
}
