import Foundation

/// Pixel work an image-to-image stage does around its model, in plain Swift on 8-bit pixels:
/// shrink a frame to the inference size, turn the model's float output into pixels, smooth it
/// over time, and scale it back up onto the frame blended with the original.
///
/// Why not OpenVINO's pre-processing: it is compiled for one frame size (the C API has no
/// dynamic spatial shape), so every frame size would need its own compiled model; shrinking
/// here lets one compiled model (per inference size) serve every frame size. And the way back
/// (upscaling, blending) has no OpenVINO counterpart at all.

/// Where R, G and B sit in one pixel of a packed 8-bit RGB-family format.
public struct PackedRGBLayout: Sendable, Equatable {
    public var bytesPerPixel: Int
    public var red: Int
    public var green: Int
    public var blue: Int

    /// The six formats the stages accept (GStreamer names); nil for anything else.
    public init?(pixelFormat: String) {
        switch pixelFormat {
        case "RGB": self.init(bytesPerPixel: 3, red: 0, green: 1, blue: 2)
        case "BGR": self.init(bytesPerPixel: 3, red: 2, green: 1, blue: 0)
        case "RGBx", "RGBA": self.init(bytesPerPixel: 4, red: 0, green: 1, blue: 2)
        case "BGRx", "BGRA": self.init(bytesPerPixel: 4, red: 2, green: 1, blue: 0)
        default: return nil
        }
    }

    public init(bytesPerPixel: Int, red: Int, green: Int, blue: Int) {
        self.bytesPerPixel = bytesPerPixel; self.red = red; self.green = green; self.blue = blue
    }

    /// Packed RGB, the layout of the images these functions produce.
    public static let rgb = PackedRGBLayout(bytesPerPixel: 3, red: 0, green: 1, blue: 2)
    public static let bgr = PackedRGBLayout(bytesPerPixel: 3, red: 2, green: 1, blue: 0)
}

/// An 8-bit packed image in memory owned by the caller (a frame, or a buffer of ours).
///
/// @unchecked Sendable: a plane is only a pointer and sizes, valid for one call of the functions
/// below; when they split the rows among threads, each thread writes rows no other touches.
public struct PixelPlane: @unchecked Sendable {
    public var base: UnsafeMutableRawPointer
    public var width: Int
    public var height: Int
    /// Bytes per row.
    public var stride: Int
    public var layout: PackedRGBLayout

    public init(base: UnsafeMutableRawPointer, width: Int, height: Int, stride: Int, layout: PackedRGBLayout) {
        self.base = base; self.width = width; self.height = height; self.stride = stride; self.layout = layout
    }
}

public enum Resampling {
    /// Shrinks `source` into `destination` by averaging each destination pixel's footprint (a box
    /// filter: no aliasing however large the factor, every source byte read once). Growing
    /// falls back to nearest neighbour. Channels are reordered to `destination.layout`.
    public static func areaResize(_ source: PixelPlane, into destination: PixelPlane) {
        let sw = source.width, sh = source.height, dw = destination.width, dh = destination.height
        guard sw > 0, sh > 0, dw > 0, dh > 0 else { return }
        // Column spans [x0, x1) of each destination column.
        var spans = [Int](repeating: 0, count: dw + 1)
        for x in 0...dw { spans[x] = x * sw / dw }
        let sp = source.layout, dp = destination.layout
        let srcChannels = [sp.red, sp.green, sp.blue], dstChannels = [dp.red, dp.green, dp.blue]
        let sBpp = sp.bytesPerPixel, dBpp = dp.bytesPerPixel
        let chunks = Self.chunks(rows: dh)
        let columnSpans = spans
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            // Column sums of the rows in the current row span, three channels per source column.
            let sums = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: sw * 3)
            defer { sums.deallocate() }
            columnSpans.withUnsafeBufferPointer { spans in
                for dy in (dh * chunk / chunks)..<(dh * (chunk + 1) / chunks) {
                    let y0 = dy * sh / dh, y1 = max(y0 + 1, (dy + 1) * sh / dh)
                    sums.update(repeating: 0)
                    for y in y0..<min(y1, sh) {
                        let row = source.base.advanced(by: y * source.stride).assumingMemoryBound(to: UInt8.self)
                        let (r, g, b) = (srcChannels[0], srcChannels[1], srcChannels[2])
                        var p = row
                        var i = 0
                        for _ in 0..<sw {
                            sums[i] &+= UInt32(p[r])
                            sums[i + 1] &+= UInt32(p[g])
                            sums[i + 2] &+= UInt32(p[b])
                            p += sBpp
                            i += 3
                        }
                    }
                    let rows = UInt32(min(y1, sh) - y0)
                    let out = destination.base.advanced(by: dy * destination.stride).assumingMemoryBound(to: UInt8.self)
                    for dx in 0..<dw {
                        let x0 = min(spans[dx], sw - 1), x1 = max(x0 + 1, min(spans[dx + 1], sw))
                        let count = rows * UInt32(x1 - x0)
                        var tr: UInt32 = 0, tg: UInt32 = 0, tb: UInt32 = 0
                        var i = x0 * 3
                        for _ in x0..<x1 {
                            tr &+= sums[i]; tg &+= sums[i + 1]; tb &+= sums[i + 2]
                            i += 3
                        }
                        let o = out + dx * dBpp
                        o[dstChannels[0]] = UInt8((tr + count / 2) / count)
                        o[dstChannels[1]] = UInt8((tg + count / 2) / count)
                        o[dstChannels[2]] = UInt8((tb + count / 2) / count)
                    }
                }
            }
        }
    }

    /// Scales `source` (packed RGB or BGR) up or down to `destination`'s size by bilinear
    /// interpolation (pixel centres aligned, as GStreamer's videoscale and OpenCV do) and
    /// writes `destination = original + strength × (scaled − original)`: strength 1 writes the
    /// scaled image exactly, 0 leaves the destination untouched. Bytes other than R, G and B
    /// (the x or A of RGBx, BGRA…) are left as they are.
    public static func bilinearBlend(_ source: PixelPlane, onto destination: PixelPlane, strength: Double) {
        let sw = source.width, sh = source.height, dw = destination.width, dh = destination.height
        guard sw > 0, sh > 0, dw > 0, dh > 0, strength > 0 else { return }
        // 8-bit fixed point: weights 0…256.
        let s256 = Int32((min(1, strength) * 256).rounded())
        var x0s = [Int](repeating: 0, count: dw), x1s = [Int](repeating: 0, count: dw), wxs = [UInt32](repeating: 0, count: dw)
        for x in 0..<dw {
            let (i0, i1, w) = tap(x, dst: dw, src: sw)
            x0s[x] = i0 * 3; x1s[x] = i1 * 3; wxs[x] = w
        }
        let sp = source.layout, dp = destination.layout
        // Source channel → destination channel offsets.
        let map = [(sp.red, dp.red), (sp.green, dp.green), (sp.blue, dp.blue)]
        let dBpp = dp.bytesPerPixel, sBpp = sp.bytesPerPixel
        precondition(sBpp == 3, "bilinearBlend reads packed 3-byte pixels")
        // Rows are split among a few threads: OpenVINO's threads are idle meanwhile.
        let chunks = Self.chunks(rows: dh)
        let (xa, xb, xw) = (x0s, x1s, wxs)
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            xa.withUnsafeBufferPointer { x0s in xb.withUnsafeBufferPointer { x1s in xw.withUnsafeBufferPointer { wxs in
                // One vertically interpolated source row, ×256, in destination channel order (R,G,B).
                let row = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: sw * 3)
                defer { row.deallocate() }
                for dy in (dh * chunk / chunks)..<(dh * (chunk + 1) / chunks) {
                    let (y0, y1, wy) = tap(dy, dst: dh, src: sh)
                    let r0 = source.base.advanced(by: y0 * source.stride).assumingMemoryBound(to: UInt8.self)
                    let r1 = source.base.advanced(by: y1 * source.stride).assumingMemoryBound(to: UInt8.self)
                    let (m0, m1, m2) = (map[0].0, map[1].0, map[2].0), vy = 256 &- wy
                    for x in 0..<sw {
                        let o = x * 3
                        row[o] = UInt32(r0[o + m0]) &* vy &+ UInt32(r1[o + m0]) &* wy
                        row[o + 1] = UInt32(r0[o + m1]) &* vy &+ UInt32(r1[o + m1]) &* wy
                        row[o + 2] = UInt32(r0[o + m2]) &* vy &+ UInt32(r1[o + m2]) &* wy
                    }
                    let out = destination.base.advanced(by: dy * destination.stride).assumingMemoryBound(to: UInt8.self)
                    let d0 = map[0].1, d1 = map[1].1, d2 = map[2].1
                    if s256 == 256 {
                        for x in 0..<dw {
                            let a = x0s[x], b = x1s[x], w = wxs[x], v = 256 &- w
                            let p = out + x * dBpp
                            p[d0] = UInt8(truncatingIfNeeded: (row[a] &* v &+ row[b] &* w &+ 32768) >> 16)
                            p[d1] = UInt8(truncatingIfNeeded: (row[a + 1] &* v &+ row[b + 1] &* w &+ 32768) >> 16)
                            p[d2] = UInt8(truncatingIfNeeded: (row[a + 2] &* v &+ row[b + 2] &* w &+ 32768) >> 16)
                        }
                    } else {
                        @inline(__always) func blend(_ p: UnsafeMutablePointer<UInt8>, _ scaled: UInt32) {
                            let original = Int32(p.pointee)
                            p.pointee = UInt8(truncatingIfNeeded: original + (((Int32(truncatingIfNeeded: scaled) - original) * s256 + 128) >> 8))
                        }
                        for x in 0..<dw {
                            let a = x0s[x], b = x1s[x], w = wxs[x], v = 256 &- w
                            let p = out + x * dBpp
                            blend(p + d0, (row[a] &* v &+ row[b] &* w &+ 32768) >> 16)
                            blend(p + d1, (row[a + 1] &* v &+ row[b + 1] &* w &+ 32768) >> 16)
                            blend(p + d2, (row[a + 2] &* v &+ row[b + 2] &* w &+ 32768) >> 16)
                        }
                    }
                }
            }
        } } }
    }

    /// How many threads share a picture's rows: one per processor up to four, and only for
    /// pictures large enough to be worth it.
    static func chunks(rows: Int) -> Int {
        rows < 64 ? 1 : max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// Source taps and the second tap's weight (0…256) for destination index `i`, pixel centres
    /// aligned: source position (i + 0.5) × src / dst − 0.5, clamped to the edges.
    @inline(__always)
    static func tap(_ i: Int, dst: Int, src: Int) -> (Int, Int, UInt32) {
        // In 1/256 source pixels.
        let pos = ((2 * i + 1) * src * 256) / (2 * dst) - 128
        if pos <= 0 { return (0, 0, 0) }
        let i0 = pos >> 8
        if i0 >= src - 1 { return (src - 1, src - 1, 0) }
        return (i0, i0 + 1, UInt32(pos & 255))
    }

    /// Mean absolute difference of two equally sized byte buffers (0…255), sampling every
    /// `step`-th byte: a cheap "did the picture change" measure.
    public static func meanAbsoluteDifference(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, step: Int = 1) -> Double {
        let n = min(a.count, b.count)
        guard n > 0 else { return 0 }
        var total = 0, count = 0, i = 0
        while i < n {
            total += abs(Int(a[i]) - Int(b[i]))
            count += 1
            i += step
        }
        return Double(total) / Double(count)
    }
}

/// The model's output picture as floats, and how to read it.
public struct FloatImage {
    public var values: UnsafeBufferPointer<Float>
    public var width: Int
    public var height: Int
    /// NCHW (planes) or NHWC (interleaved).
    public var planar: Bool
    /// Output channel 0 is blue (BGR models).
    public var bgr: Bool
    /// The values meaning 0 and 255.
    public var low: Float
    public var high: Float

    public init(values: UnsafeBufferPointer<Float>, width: Int, height: Int, planar: Bool, bgr: Bool, low: Float, high: Float) {
        self.values = values; self.width = width; self.height = height; self.planar = planar; self.bgr = bgr
        self.low = low; self.high = high
    }

    /// Width and height of an image tensor's shape ([1,3,H,W] or [1,H,W,3]); nil when the shape
    /// is not a 3-channel image in that layout.
    public static func size(ofShape shape: [Int], planar: Bool) -> (width: Int, height: Int)? {
        guard shape.count == 4, shape[0] == 1 else { return nil }
        if planar { return shape[1] == 3 ? (shape[3], shape[2]) : nil }
        return shape[3] == 3 ? (shape[2], shape[1]) : nil
    }

    /// Writes the picture as packed 8-bit RGB (`count` = width × height × 3), each value
    /// clamped and rounded: u8 = round((v − low) × 255 / (high − low)).
    public func writeRGB(into out: UnsafeMutableBufferPointer<UInt8>) {
        let n = width * height
        precondition(out.count >= n * 3 && values.count >= n * 3)
        let k = 255 / (high - low), offset = 0.5 - low * k
        let order = bgr ? [2, 1, 0] : [0, 1, 2]
        let dst = out.baseAddress!, base = values.baseAddress!
        // max(0, v) is v >= 0 ? v : 0, so NaN becomes 0; +0.5 then truncation rounds.
        for c in 0..<3 {
            let src = order[c]
            if planar {
                let plane = base + src * n
                for i in 0..<n { dst[i * 3 + c] = UInt8(min(255.49, max(0, plane[i] * k + offset))) }
            } else {
                for i in 0..<n { dst[i * 3 + c] = UInt8(min(255.49, max(0, base[i * 3 + src] * k + offset))) }
            }
        }
    }

}
