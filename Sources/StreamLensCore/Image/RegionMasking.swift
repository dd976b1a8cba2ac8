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
            if radius >= 6 {
                blurDownscaled(rect, base: base, stride: stride, bpp: bpp, radius: radius)
                return
            }
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

    /// A wide blur at a fraction of the cost: the rectangle averaged down by f (blocks of f × f),
    /// three box blurs of radius r / f there, then scaled back up bilinearly. What is lost is
    /// detail finer than the blur removes anyway; a whole 720p frame at radius 30 (a background
    /// blur) costs a few milliseconds instead of a hundred.
    static func blurDownscaled(_ rect: Rect, base: UnsafeMutablePointer<UInt8>, stride: Int, bpp: Int, radius: Int) {
        let f = max(2, radius / 3)
        let sw = (rect.width + f - 1) / f, sh = (rect.height + f - 1) / f
        let r = max(1, (radius + f / 2) / f)
        var small = [Float](repeating: 0, count: sw * sh * 3)
        var counts = [Float](repeating: 0, count: sw * sh)
        small.withUnsafeMutableBufferPointer { sp in
            counts.withUnsafeMutableBufferPointer { cp in
                let s = sp.baseAddress!, n = cp.baseAddress!
                // Column → small column, once (no division per pixel).
                var column = [Int](repeating: 0, count: rect.width)
                for x in 0..<rect.width { column[x] = x / f }
                column.withUnsafeBufferPointer { col in
                    for y in 0..<rect.height {
                        let row = base + (rect.y0 + y) * stride + rect.x0 * bpp
                        let srow = (y / f) * sw
                        var p = row
                        for x in 0..<rect.width {
                            let k = srow + col[x]
                            s[3 * k] += Float(p[0]); s[3 * k + 1] += Float(p[1]); s[3 * k + 2] += Float(p[2])
                            n[k] += 1
                            p += bpp
                        }
                    }
                }
                for k in 0..<(sw * sh) { let inv = 1 / n[k]; s[3 * k] *= inv; s[3 * k + 1] *= inv; s[3 * k + 2] *= inv }
                // Three box blurs each way, edges clamped.
                var line = [Float](repeating: 0, count: max(sw, sh) * 3)
                line.withUnsafeMutableBufferPointer { lp in
                    let l = lp.baseAddress!
                    func blur(count: Int, at index: (Int) -> Int) {
                        for i in 0..<count { let k = index(i); l[3 * i] = s[3 * k]; l[3 * i + 1] = s[3 * k + 1]; l[3 * i + 2] = s[3 * k + 2] }
                        let norm = 1 / Float(2 * r + 1)
                        for c in 0..<3 {
                            var acc: Float = 0
                            for t in -r...r { acc += l[3 * min(max(t, 0), count - 1) + c] }
                            for i in 0..<count {
                                s[3 * index(i) + c] = acc * norm
                                acc += l[3 * min(i + r + 1, count - 1) + c] - l[3 * max(i - r, 0) + c]
                            }
                        }
                    }
                    for _ in 0..<3 {
                        for y in 0..<sh { blur(count: sw) { y * sw + $0 } }
                        for x in 0..<sw { blur(count: sh) { $0 * sw + x } }
                    }
                }
                // Back up, bilinear between the small pixels' centres: each small row widened
                // once, then every output row a blend of two widened rows.
                let invF = 1 / Float(f), w = rect.width
                var wide = [Float](repeating: 0, count: sh * w * 3)
                wide.withUnsafeMutableBufferPointer { wp in
                    let wd = wp.baseAddress!
                    for x in 0..<w {
                        let fx = min(max((Float(x) + 0.5) * invF - 0.5, 0), Float(sw - 1))
                        let x0 = Int(fx), x1 = min(x0 + 1, sw - 1), ax = fx - Float(x0)
                        for y in 0..<sh {
                            let a = 3 * (y * sw + x0), b = 3 * (y * sw + x1), o = 3 * (y * w + x)
                            wd[o] = s[a] + (s[b] - s[a]) * ax
                            wd[o + 1] = s[a + 1] + (s[b + 1] - s[a + 1]) * ax
                            wd[o + 2] = s[a + 2] + (s[b + 2] - s[a + 2]) * ax
                        }
                    }
                    for y in 0..<rect.height {
                        let fy = min(max((Float(y) + 0.5) * invF - 0.5, 0), Float(sh - 1))
                        let y0 = Int(fy), ay = fy - Float(y0)
                        let top = wd + 3 * y0 * w, bottom = wd + 3 * min(y0 + 1, sh - 1) * w
                        var p = base + (rect.y0 + y) * stride + rect.x0 * bpp
                        for i in 0..<w {
                            let k = 3 * i
                            p[0] = UInt8(top[k] + (bottom[k] - top[k]) * ay + 0.5)
                            p[1] = UInt8(top[k + 1] + (bottom[k + 1] - top[k + 1]) * ay + 0.5)
                            p[2] = UInt8(top[k + 2] + (bottom[k + 2] - top[k + 2]) * ay + 0.5)
                            p += bpp
                        }
                    }
                }
            }
        }
    }
}
