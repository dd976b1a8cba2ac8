/// Hides a rectangle of a packed RGB frame (3 or 4 bytes a pixel, any channel order): the
/// pixel work behind lensblur.
public enum RegionMasking {
    public enum Method: String, Sendable, CaseIterable {
        /// Blocks of one colour (their mean).
        case pixelate
        /// A Gaussian-like blur (three box blurs, each way).
        case gaussian
        /// One solid colour.
        case fill
    }

    /// A rectangle in whole pixels, clipped to the frame; nil when nothing of it is inside.
    public struct Rect: Sendable, Equatable {
        public var x0: Int, y0: Int, x1: Int, y1: Int
        public init?(_ box: Box, margin: Double, width: Int, height: Int) {
            guard box.xMin.isFinite, box.yMin.isFinite, box.xMax.isFinite, box.yMax.isFinite else { return nil }
            let grow = max(box.width, box.height) * margin
            x0 = max(0, Int((box.xMin - grow).rounded(.down))); y0 = max(0, Int((box.yMin - grow).rounded(.down)))
            x1 = min(width, Int((box.xMax + grow).rounded(.up))); y1 = min(height, Int((box.yMax + grow).rounded(.up)))
            guard x1 > x0, y1 > y0 else { return nil }
        }
        public var width: Int { x1 - x0 }
        public var height: Int { y1 - y0 }
    }

    /// `strength`: the pixelate block or the blur radius, in pixels (0: a sixth of the
    /// rectangle's shorter side — a face becomes about 6 × 6 blocks; at 8 × 8 a face's
    /// horizontal detail kept a third of its strength on the crossing clip, at 6 × 6 a fifth);
    /// `color`: the fill's bytes, in the frame's channel order.
    public static func apply(_ method: Method, to rect: Rect, pixels: UnsafeMutableRawBufferPointer, stride: Int,
                             bytesPerPixel bpp: Int, strength: Int = 0, color: [UInt8] = [0, 0, 0, 255]) {
        guard let base = pixels.baseAddress?.assumingMemoryBound(to: UInt8.self),
              rect.y1 > 0, (rect.y1 - 1) * stride + rect.x1 * bpp <= pixels.count else { return }
        let size = strength > 0 ? strength : max(2, min(rect.width, rect.height) / 6)
        switch method {
        case .fill:
            for y in rect.y0..<rect.y1 {
                var p = base + y * stride + rect.x0 * bpp
                let (c0, c1, c2) = (color[0], color[1], color[2])
                for _ in rect.x0..<rect.x1 { p[0] = c0; p[1] = c1; p[2] = c2; p += bpp }
            }
        case .pixelate:
            // Colour channels only (the fourth byte of x/A formats is left as it is).
            for by in Swift.stride(from: rect.y0, to: rect.y1, by: size) {
                let ey = min(by + size, rect.y1)
                for bx in Swift.stride(from: rect.x0, to: rect.x1, by: size) {
                    let ex = min(bx + size, rect.x1)
                    var s0 = 0, s1 = 0, s2 = 0
                    for y in by..<ey {
                        var p = base + y * stride + bx * bpp
                        for _ in bx..<ex { s0 += Int(p[0]); s1 += Int(p[1]); s2 += Int(p[2]); p += bpp }
                    }
                    let n = (ex - bx) * (ey - by)
                    let (c0, c1, c2) = (UInt8(s0 / n), UInt8(s1 / n), UInt8(s2 / n))
                    for y in by..<ey {
                        var p = base + y * stride + bx * bpp
                        for _ in bx..<ex { p[0] = c0; p[1] = c1; p[2] = c2; p += bpp }
                    }
                }
            }
        case .gaussian:
            // Three box blurs of radius r approach a Gaussian of sigma ≈ r (central limit);
            // edges clamp to the rectangle, so pixels outside it are never read into it.
            let radius = max(1, size)
            var line = [Int](repeating: 0, count: max(rect.width, rect.height) * bpp)
            var out = line
            func blurLine(_ count: Int) {
                for c in 0..<min(bpp, 3) {
                    var acc = 0
                    for k in -radius...radius { acc += line[min(max(k, 0), count - 1) * bpp + c] }
                    for i in 0..<count {
                        out[i * bpp + c] = acc / (2 * radius + 1)
                        acc += line[min(i + radius + 1, count - 1) * bpp + c] - line[max(i - radius, 0) * bpp + c]
                    }
                }
            }
            for _ in 0..<3 {
                for y in rect.y0..<rect.y1 {
                    let row = base + y * stride + rect.x0 * bpp
                    for i in 0..<(rect.width * bpp) { line[i] = Int(row[i]) }
                    blurLine(rect.width)
                    for i in 0..<rect.width { for c in 0..<min(bpp, 3) { row[i * bpp + c] = UInt8(out[i * bpp + c]) } }
                }
                for x in rect.x0..<rect.x1 {
                    for j in 0..<rect.height { for c in 0..<bpp { line[j * bpp + c] = Int(base[(rect.y0 + j) * stride + x * bpp + c]) } }
                    blurLine(rect.height)
                    for j in 0..<rect.height { for c in 0..<min(bpp, 3) { base[(rect.y0 + j) * stride + x * bpp + c] = UInt8(out[j * bpp + c]) } }
                }
            }
        }
    }
}
