import Foundation

/// Pixel work an image-to-image stage does around its model, in plain Swift on 8-bit pixels:
/// shrink a frame to the inference size, turn the model's float output into pixels, and scale
/// it back up onto the frame blended with the original.
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
            // Sums of the rows in the current row span, byte by byte across the whole row (a loop
            // the compiler vectorizes), channels picked out afterwards.
            let rowBytes = sw * sBpp
            let sums = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: rowBytes)
            defer { sums.deallocate() }
            columnSpans.withUnsafeBufferPointer { spans in
                for dy in (dh * chunk / chunks)..<(dh * (chunk + 1) / chunks) {
                    let y0 = dy * sh / dh, y1 = min(sh, max(y0 + 1, (dy + 1) * sh / dh))
                    let first = source.base.advanced(by: y0 * source.stride).assumingMemoryBound(to: UInt8.self)
                    for i in 0..<rowBytes { sums[i] = UInt32(first[i]) }
                    for y in (y0 + 1)..<max(y0 + 1, y1) {
                        let row = source.base.advanced(by: y * source.stride).assumingMemoryBound(to: UInt8.self)
                        for i in 0..<rowBytes { sums[i] &+= UInt32(row[i]) }
                    }
                    let rows = UInt32(y1 - y0)
                    let out = destination.base.advanced(by: dy * destination.stride).assumingMemoryBound(to: UInt8.self)
                    let (r, g, b) = (srcChannels[0], srcChannels[1], srcChannels[2])
                    let (dr, dg, db) = (dstChannels[0], dstChannels[1], dstChannels[2])
                    for dx in 0..<dw {
                        let x0 = min(spans[dx], sw - 1), x1 = max(x0 + 1, min(spans[dx + 1], sw))
                        let count = rows * UInt32(x1 - x0)
                        var tr: UInt32 = 0, tg: UInt32 = 0, tb: UInt32 = 0
                        var i = x0 * sBpp
                        for _ in x0..<x1 {
                            tr &+= sums[i + r]; tg &+= sums[i + g]; tb &+= sums[i + b]
                            i += sBpp
                        }
                        let o = out + dx * dBpp
                        o[dr] = UInt8((tr + count / 2) / count)
                        o[dg] = UInt8((tg + count / 2) / count)
                        o[db] = UInt8((tb + count / 2) / count)
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
    ///
    /// With a `mask`, each pixel's strength is also multiplied by its weight there (effects
    /// limited to regions of interest): rows and columns of weight 0 are not written at all, so
    /// they stay bit-identical; the mask is worked out row by row, for the columns its boxes
    /// cover.
    ///
    /// Horizontal pass first, on the (small) source rows, straight into the destination's pixel
    /// layout; then each destination row is one interpolation between two such rows with the same
    /// weights all along it, a loop over contiguous bytes the compiler vectorizes. That halves
    /// the per-pixel work of the usual vertical-first order.
    public static func bilinearBlend(_ source: PixelPlane, onto destination: PixelPlane, strength: Double, mask: RegionMask? = nil) {
        let sw = source.width, sh = source.height, dw = destination.width, dh = destination.height
        guard sw > 0, sh > 0, dw > 0, dh > 0, strength > 0 else { return }
        precondition(source.layout.bytesPerPixel == 3, "bilinearBlend reads packed 3-byte pixels")
        // 8-bit fixed point: weights 0…256.
        // Strength in 1/128 steps keeps (scaled − original) × strength within Int16.
        let s128 = Int16((min(1, strength) * 128).rounded())
        var taps = [(Int, Int, UInt16)](repeating: (0, 0, 0), count: dw)
        for x in 0..<dw {
            let (i0, i1, w) = tap(x, dst: dw, src: sw)
            taps[x] = (i0 * 3, i1 * 3, UInt16(w))
        }
        let sp = source.layout, dp = destination.layout, dBpp = dp.bytesPerPixel
        let rowBytes = dw * dBpp
        // The bytes that are R, G or B in one destination pixel (the others are kept).
        var keepMask: UInt32 = 0
        if dBpp == 4 {
            let colour = Set([dp.red, dp.green, dp.blue])
            for b in 0..<4 where !colour.contains(b) { keepMask |= 0xFF << (8 * UInt32(b)) }
        }
        let keep = keepMask
        // Rows are split among a few threads: OpenVINO's threads are idle meanwhile.
        let chunks = Self.chunks(rows: dh)
        let allTaps = taps
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            allTaps.withUnsafeBufferPointer { taps in
                // Horizontally scaled source rows (in destination layout), the two last used.
                let scaled = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 2 * rowBytes)
                let mixed = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: rowBytes)
                // The mask's row: weights (0…s128) per pixel, then per byte.
                let pixelWeights = UnsafeMutableBufferPointer<Int16>.allocate(capacity: mask == nil ? 0 : dw)
                let byteWeights = UnsafeMutableBufferPointer<Int16>.allocate(capacity: mask == nil ? 0 : rowBytes)
                scaled.initialize(repeating: 0)
                mixed.initialize(repeating: 0)
                defer { scaled.deallocate(); mixed.deallocate(); pixelWeights.deallocate(); byteWeights.deallocate() }
                var held = (-1, -1) // source rows in slots 0 and 1
                func row(_ y: Int) -> UnsafeMutablePointer<UInt8> {
                    if held.0 == y { return scaled.baseAddress! }
                    if held.1 == y { return scaled.baseAddress! + rowBytes }
                    // Replace the slot not holding the other row this output row needs (rows only grow).
                    let slot = held.0 < held.1 ? 0 : 1
                    if slot == 0 { held.0 = y } else { held.1 = y }
                    let out = scaled.baseAddress! + slot * rowBytes
                    let src = source.base.advanced(by: y * source.stride).assumingMemoryBound(to: UInt8.self)
                    let (sr, sg, sb, dr, dg, db) = (sp.red, sp.green, sp.blue, dp.red, dp.green, dp.blue)
                    for x in 0..<dw {
                        let (a, b, w) = taps[x], v = 256 &- w
                        let p = out + x * dBpp
                        p[dr] = UInt8(truncatingIfNeeded: (UInt16(src[a + sr]) &* v &+ UInt16(src[b + sr]) &* w &+ 128) >> 8)
                        p[dg] = UInt8(truncatingIfNeeded: (UInt16(src[a + sg]) &* v &+ UInt16(src[b + sg]) &* w &+ 128) >> 8)
                        p[db] = UInt8(truncatingIfNeeded: (UInt16(src[a + sb]) &* v &+ UInt16(src[b + sb]) &* w &+ 128) >> 8)
                    }
                    return out
                }
                for dy in (dh * chunk / chunks)..<(dh * (chunk + 1) / chunks) {
                    // Columns `span` have the mask's own weights; the others the row's background.
                    let span: Range<Int>, background: Int16
                    if let mask {
                        span = mask.fillRow(dy, width: dw, scale: s128, into: pixelWeights.baseAddress!)
                        background = mask.background(scale: s128)
                        if span.isEmpty && background == 0 { continue } // untouched row
                    } else {
                        (span, background) = (0..<0, s128)
                    }
                    let (y0, y1, wy) = tap(dy, dst: dh, src: sh)
                    let r0 = row(y0), r1 = row(y1)
                    let out = destination.base.advanced(by: dy * destination.stride).assumingMemoryBound(to: UInt8.self)
                    // 4-byte pixels: mix into a scratch row, then merge keeping the 4th byte.
                    let target = keep == 0 ? out : mixed.baseAddress!
                    let w = UInt16(wy), v = 256 &- w
                    func uniform(_ bytes: Range<Int>) {
                        if background == 128 {
                            for i in bytes {
                                target[i] = UInt8(truncatingIfNeeded: (UInt16(r0[i]) &* v &+ UInt16(r1[i]) &* w &+ 128) >> 8)
                            }
                        } else {
                            for i in bytes {
                                let scaledValue = Int16(truncatingIfNeeded: (UInt16(r0[i]) &* v &+ UInt16(r1[i]) &* w &+ 128) >> 8)
                                let original = Int16(out[i])
                                target[i] = UInt8(truncatingIfNeeded: original &+ (((scaledValue &- original) &* background &+ 64) >> 7))
                            }
                        }
                    }
                    if background > 0 {
                        uniform(0..<(span.lowerBound * dBpp))
                        uniform((span.isEmpty ? 0 : span.upperBound * dBpp)..<rowBytes)
                    }
                    if !span.isEmpty {
                        let bytes = (span.lowerBound * dBpp)..<(span.upperBound * dBpp)
                        for x in span { for c in 0..<dBpp { byteWeights[x * dBpp + c] = pixelWeights[x] } }
                        for i in bytes {
                            let scaledValue = Int16(truncatingIfNeeded: (UInt16(r0[i]) &* v &+ UInt16(r1[i]) &* w &+ 128) >> 8)
                            let original = Int16(out[i])
                            // Weight 0: (0 + 64) >> 7 adds nothing, the byte stays as it was.
                            target[i] = UInt8(truncatingIfNeeded: original &+ (((scaledValue &- original) &* byteWeights[i] &+ 64) >> 7))
                        }
                    }
                    if keep != 0 {
                        let words = UnsafeMutableRawPointer(out).assumingMemoryBound(to: UInt32.self)
                        let mixedWords = UnsafeMutableRawPointer(target).assumingMemoryBound(to: UInt32.self)
                        for i in (background > 0 ? 0..<dw : span) { words[i] = (mixedWords[i] & ~keep) | (words[i] & keep) }
                    }
                }
            }
        }
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
        let k = 255 / (high - low), offset = -low * k
        let dst = out.baseAddress!, base = values.baseAddress!
        if !planar && !bgr { // already packed RGB: one contiguous loop
            for i in 0..<(n * 3) { dst[i] = Self.byte(base[i] * k + offset) }
            return
        }
        let order = bgr ? [2, 1, 0] : [0, 1, 2]
        for c in 0..<3 {
            let src = order[c]
            if planar {
                let plane = base + src * n
                for i in 0..<n { dst[i * 3 + c] = Self.byte(plane[i] * k + offset) }
            } else {
                for i in 0..<n { dst[i * 3 + c] = Self.byte(base[i * 3 + src] * k + offset) }
            }
        }
    }

    /// 0…255 rounded to the nearest byte, without a trapping conversion (so the loops above
    /// vectorize): max(0, v) is `v >= 0 ? v : 0`, so NaN becomes 0; adding 2^23 leaves the
    /// rounded value in the low mantissa bits.
    @inline(__always)
    static func byte(_ v: Float) -> UInt8 {
        UInt8(truncatingIfNeeded: (min(255, max(0, v)) + 8_388_608).bitPattern)
    }

}
