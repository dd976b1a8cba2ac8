import CCairo

// The only Swift file that imports CCairo.

/// Draws boxes and text labels into a frame in place, with cairo (real font rendering through
/// fontconfig/FreeType; set-up installs fonts-dejavu-core).
///
/// Works on packed 32-bit frames whose byte order is B, G, R, x — GStreamer's BGRx and BGRA —
/// which is cairo's RGB24 format on little-endian machines. Colours are (r, g, b) in 0…1.
public final class FrameCanvas {
    private let surface: OpaquePointer
    private let cr: OpaquePointer

    public static let supportedFormats = ["BGRx", "BGRA"]

    /// nil when the format or stride is one cairo cannot draw on.
    public init?(pixels: UnsafeMutableRawBufferPointer, width: Int, height: Int, stride: Int, pixelFormat: String) {
        guard Self.supportedFormats.contains(pixelFormat), let base = pixels.baseAddress,
              stride >= width * 4, stride % 4 == 0, pixels.count >= stride * height else { return nil }
        let format = CAIRO_FORMAT_RGB24
        guard let surface = cairo_image_surface_create_for_data(base.assumingMemoryBound(to: UInt8.self), format,
                                                                Int32(width), Int32(height), Int32(stride)),
              cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS, let cr = cairo_create(surface) else { return nil }
        self.surface = surface
        self.cr = cr
        cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
    }

    deinit {
        cairo_destroy(cr)
        cairo_surface_flush(surface)
        cairo_surface_destroy(surface)
    }

    /// An unfilled rectangle; the line lies inside the box.
    public func rectangle(x: Double, y: Double, width: Double, height: Double,
                          color: (Double, Double, Double), thickness: Double) {
        let t = max(1, thickness)
        cairo_set_source_rgb(cr, color.0, color.1, color.2)
        cairo_set_line_width(cr, t)
        cairo_rectangle(cr, x + t / 2, y + t / 2, max(0, width - t), max(0, height - t))
        cairo_stroke(cr)
    }

    /// Text on a filled background whose top-left corner is at (x, y), kept inside the frame.
    public func label(_ text: String, x: Double, y: Double, size: Double,
                      color: (Double, Double, Double), background: (Double, Double, Double)) {
        cairo_set_font_size(cr, size)
        var extents = cairo_text_extents_t()
        cairo_text_extents(cr, text, &extents)
        let pad = size * 0.2
        let w = extents.x_advance + 2 * pad, h = size * 1.25
        let frameW = Double(cairo_image_surface_get_width(surface)), frameH = Double(cairo_image_surface_get_height(surface))
        let left = min(max(0, x), max(0, frameW - w)), top = min(max(0, y), max(0, frameH - h))
        cairo_set_source_rgb(cr, background.0, background.1, background.2)
        cairo_rectangle(cr, left, top, w, h)
        cairo_fill(cr)
        cairo_set_source_rgb(cr, color.0, color.1, color.2)
        cairo_move_to(cr, left + pad, top + size)
        cairo_show_text(cr, text)
    }
}
