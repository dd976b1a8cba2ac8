import Foundation

/// Steady video from a per-frame image-to-image model (lensstylize `temporal=blend`): each new
/// output is blended with the previous output moved along the input's motion, wherever that
/// motion explains the input. A feed-forward style network paints every frame on its own, so
/// its marks crawl and shimmer when the picture moves; averaging along the motion keeps the
/// marks that belong to the scene's surfaces and lets the rest fade.
///
/// The motion is dense optical flow (pyramidal Lucas–Kanade) between consecutive shrunk input
/// pictures, the ones the model already gets: at the model's resolution and below, so it costs
/// a fraction of the model. Where the previous input, moved by the flow, does not match the new
/// one (an object coming into view, a flow error, a cut), the blend is turned down per pixel in
/// proportion to the mismatch: the new output shows there as it is, so nothing ghosts. A cut
/// thus starts afresh on its own, and a still scene is the case of zero motion.
///
/// The history is the blended output itself (an exponential average along the motion): with
/// weight w, independent per-frame shimmer falls to (1 - w)² / (1 + w) of its power.
public struct MotionBlend: Sendable {
    /// Weight of the previous output where the motion holds (0 turns the blend off).
    public var weight: Float
    /// Grey-level mismatch (0…255) of the moved previous input at which a pixel's blend has
    /// fallen to zero (linearly from zero mismatch). Sensor noise and compression stay well under it; an
    /// object coming into view is far above.
    public var tolerance: Float = 24

    private var previous: GrayPyramid?
    private var history: [Float] = []
    private var historySize = (width: 0, height: 0)
    /// The last flow (for tests and the bench): where each pixel of the newest input was in the one before.
    public private(set) var flow = DenseFlow(width: 0, height: 0)

    public init(weight: Float) { self.weight = weight }

    /// Forget the past (a new model or style: its marks must not be blended with the old ones).
    public mutating func reset() { previous = nil; history = [] }

    /// Blends `output` (packed RGB, `outputWidth`×`outputHeight`, the model's output for `input`)
    /// in place with the previous output moved along the motion from the previous `input` to this one.
    /// `input` is packed 3-byte pixels at `width`×`height` in any channel order (grey is
    /// (R + 2G + B) / 4, the same both ways round).
    public mutating func apply(input: UnsafeRawBufferPointer, width: Int, height: Int,
                               output: UnsafeMutableBufferPointer<UInt8>, outputWidth: Int, outputHeight: Int) {
        let pyramid = GrayPyramid(MotionBlend.gray(input, count: width * height), width: width, height: height)
        defer { previous = pyramid }
        // (Pictures under 2 pixels a side have nothing to interpolate between: each frame on its own.)
        let fresh = weight <= 0 || width < 2 || height < 2 || outputWidth < 2 || outputHeight < 2
            || previous.map { $0.width != width || $0.height != height } ?? true
            || history.count != output.count || historySize != (outputWidth, outputHeight)
        guard !fresh, let previous else {
            history = output.map(Float.init)
            historySize = (outputWidth, outputHeight)
            flow = DenseFlow(width: 0, height: 0)
            return
        }
        // The motion of surfaces, not of single pixels: the flow at half the model's size (a
        // quarter of the cost of the full size; the blend samples it per output pixel).
        let level = min(1, pyramid.levels.count - 1)
        flow = DenseFlow.lucasKanade(from: pyramid, to: previous, finestLevel: level)
        let confidence = flow.confidence(current: pyramid.levels[level].values, previous: previous.levels[level].values,
                                         tolerance: tolerance)
        blend(output, width: outputWidth, height: outputHeight, confidence: confidence)
    }

    /// The new output blended with the history moved by the flow (bilinear), by weight ×
    /// confidence; the result is the new history.
    private mutating func blend(_ output: UnsafeMutableBufferPointer<UInt8>, width ow: Int, height oh: Int, confidence: [Float]) {
        let fw = flow.width, fh = flow.height
        // Output pixels per flow cell: the flow's vectors are in its own cells.
        let sx = Float(ow) / Float(fw), sy = Float(oh) / Float(fh)
        let w = weight
        var next = [Float](repeating: 0, count: output.count)
        history.withUnsafeBufferPointer { h in
            next.withUnsafeMutableBufferPointer { n in
                flow.dx.withUnsafeBufferPointer { fdx in
                    flow.dy.withUnsafeBufferPointer { fdy in
                        confidence.withUnsafeBufferPointer { conf in
                            for y in 0..<oh {
                                // The output pixel's cell of the flow (nearest: the flow is smooth).
                                let fy = min(fh - 1, Int((Float(y) + 0.5) / sy))
                                for x in 0..<ow {
                                    let fx = min(fw - 1, Int((Float(x) + 0.5) / sx))
                                    let f = fy * fw + fx
                                    let px = Float(x) + fdx[f] * sx, py = Float(y) + fdy[f] * sy
                                    let o = (y * ow + x) * 3
                                    var k = w * conf[f]
                                    if !(px >= 0 && py >= 0 && px <= Float(ow - 1) && py <= Float(oh - 1)) { k = 0 }
                                    if k == 0 {
                                        n[o] = Float(output[o]); n[o + 1] = Float(output[o + 1]); n[o + 2] = Float(output[o + 2])
                                        continue
                                    }
                                    let x0 = min(Int(px), ow - 2), y0 = min(Int(py), oh - 2)
                                    let ax = px - Float(x0), ay = py - Float(y0)
                                    let i00 = (y0 * ow + x0) * 3, i01 = i00 + 3, i10 = i00 + ow * 3, i11 = i10 + 3
                                    for c in 0..<3 {
                                        let top = h[i00 + c] + (h[i01 + c] - h[i00 + c]) * ax
                                        let bottom = h[i10 + c] + (h[i11 + c] - h[i10 + c]) * ax
                                        let previous = top + (bottom - top) * ay
                                        let v = previous * k + Float(output[o + c]) * (1 - k)
                                        n[o + c] = v
                                        output[o + c] = UInt8(min(255, max(0, v + 0.5)))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        history = next
    }

    static func gray(_ rgb: UnsafeRawBufferPointer, count: Int) -> [Float] {
        var g = [Float](repeating: 0, count: count)
        let p = rgb.bindMemory(to: UInt8.self)
        for i in 0..<min(count, p.count / 3) {
            g[i] = (Float(p[3 * i]) + 2 * Float(p[3 * i + 1]) + Float(p[3 * i + 2])) * 0.25
        }
        return g
    }
}

/// A grey picture and its halvings, down to ~24–48 pixels on the short side (at most 6 levels).
public struct GrayPyramid: Sendable {
    public var levels: [(values: [Float], width: Int, height: Int)]
    public var width: Int { levels[0].width }
    public var height: Int { levels[0].height }

    public init(_ gray: [Float], width: Int, height: Int) {
        levels = [(gray, width, height)]
        while levels.count < 6, let l = levels.last, l.height >= 48, l.width >= 48 {
            let (h, w2, h2) = DenseFlow.halve(l.values, l.width, l.height)
            levels.append((h, w2, h2))
        }
    }
}

/// Dense optical flow on a grid: for each pixel of one picture, where it was in another
/// (dx, dy in pixels).
public struct DenseFlow: Sendable {
    public var width: Int
    public var height: Int
    public var dx: [Float]
    public var dy: [Float]

    public init(width: Int, height: Int) {
        self.width = width; self.height = height
        dx = [Float](repeating: 0, count: width * height); dy = dx
    }

    /// Pyramidal Lucas–Kanade (Bouguet's coarse-to-fine scheme, dense): at each level of the
    /// pyramids, from the coarsest, the flow from the level below (doubled) is refined by a few
    /// Gauss–Newton steps, each solving the 2×2 normal equations of a (2r+1)² window around
    /// every pixel, with a small ridge so flat windows keep the coarser level's motion instead of
    /// inventing one; then averaged over the same window (each window's answer is noisy, ±0.5 px
    /// on a clean pan, and a surface moves as one). The flow is of `finestLevel`'s size.
    public static func lucasKanade(from current: GrayPyramid, to previous: GrayPyramid, finestLevel: Int = 0,
                                   radius: Int = 6, iterations: Int = 3) -> DenseFlow {
        let top = min(current.levels.count, previous.levels.count) - 1
        var flow = DenseFlow(width: current.levels[top].width, height: current.levels[top].height)
        let window = 1 / Float((2 * radius + 1) * (2 * radius + 1))
        for index in stride(from: top, through: min(finestLevel, top), by: -1) {
            let c = current.levels[index], p = previous.levels[index]
            if flow.width != c.width || flow.height != c.height { flow = flow.resized(width: c.width, height: c.height) }
            flow.refine(current: c.values, previous: p.values, radius: radius, iterations: iterations)
            flow.dx = boxSum(flow.dx, c.width, c.height, radius).map { $0 * window }
            flow.dy = boxSum(flow.dy, c.width, c.height, radius).map { $0 * window }
        }
        return flow
    }

    /// The flow between two grey pictures at their full size.
    public static func lucasKanade(from current: [Float], to previous: [Float], width: Int, height: Int) -> DenseFlow {
        lucasKanade(from: GrayPyramid(current, width: width, height: height), to: GrayPyramid(previous, width: width, height: height))
    }

    /// Halves a grey picture: a binomial low-pass (1 4 6 4 1)/16 each way, then every other
    /// pixel (Burt and Adelson's pyramid: a plain 2×2 mean leaves enough aliasing at the coarse
    /// levels to send their flow the wrong way).
    static func halve(_ g: [Float], _ w: Int, _ h: Int) -> ([Float], Int, Int) {
        let w2 = (w + 1) / 2, h2 = (h + 1) / 2
        var rows = [Float](repeating: 0, count: w2 * h)
        for y in 0..<h {
            let row = y * w
            for x in 0..<w2 {
                let c = 2 * x
                func at(_ i: Int) -> Float { g[row + max(0, min(w - 1, i))] }
                rows[y * w2 + x] = (at(c - 2) + 4 * at(c - 1) + 6 * at(c) + 4 * at(c + 1) + at(c + 2)) * (1 / 16)
            }
        }
        var out = [Float](repeating: 0, count: w2 * h2)
        for y in 0..<h2 {
            let c = 2 * y
            func at(_ i: Int, _ x: Int) -> Float { rows[max(0, min(h - 1, i)) * w2 + x] }
            for x in 0..<w2 {
                out[y * w2 + x] = (at(c - 2, x) + 4 * at(c - 1, x) + 6 * at(c, x) + 4 * at(c + 1, x) + at(c + 2, x)) * (1 / 16)
            }
        }
        return (out, w2, h2)
    }

    /// The flow on another grid (bilinear), its vectors scaled with the grid.
    func resized(width w2: Int, height h2: Int) -> DenseFlow {
        var out = DenseFlow(width: w2, height: h2)
        let sx = Float(width) / Float(w2), sy = Float(height) / Float(h2)
        for y in 0..<h2 {
            let fy = max(0, min(Float(height - 1), (Float(y) + 0.5) * sy - 0.5))
            let y0 = min(Int(fy), max(0, height - 2)), ay = height > 1 ? fy - Float(y0) : 0
            let y1 = min(y0 + 1, height - 1)
            for x in 0..<w2 {
                let fx = max(0, min(Float(width - 1), (Float(x) + 0.5) * sx - 0.5))
                let x0 = min(Int(fx), max(0, width - 2)), ax = width > 1 ? fx - Float(x0) : 0
                let x1 = min(x0 + 1, width - 1)
                func at(_ v: [Float]) -> Float {
                    let top = v[y0 * width + x0] + (v[y0 * width + x1] - v[y0 * width + x0]) * ax
                    let bottom = v[y1 * width + x0] + (v[y1 * width + x1] - v[y1 * width + x0]) * ax
                    return top + (bottom - top) * ay
                }
                out.dx[y * w2 + x] = at(dx) / sx
                out.dy[y * w2 + x] = at(dy) / sy
            }
        }
        return out
    }

    /// Gauss–Newton steps of Lucas–Kanade at one level. The gradients are the current picture's
    /// (fixed, so the windows' 2×2 matrices are summed once); each step samples the previous
    /// picture where the flow points and solves for the correction.
    mutating func refine(current: [Float], previous: [Float], radius: Int, iterations: Int) {
        let w = width, h = height, n = w * h
        var gx = [Float](repeating: 0, count: n), gy = gx
        current.withUnsafeBufferPointer { c in
            gx.withUnsafeMutableBufferPointer { gx in
                gy.withUnsafeMutableBufferPointer { gy in
                    for y in 0..<h {
                        let ym = max(0, y - 1) * w, yp = min(h - 1, y + 1) * w, row = y * w
                        for x in 0..<w {
                            gx[row + x] = (c[row + min(w - 1, x + 1)] - c[row + max(0, x - 1)]) * 0.5
                            gy[row + x] = (c[yp + x] - c[ym + x]) * 0.5
                        }
                    }
                }
            }
        }
        var products = [Float](repeating: 0, count: n)
        func windowSums(_ f: (Int) -> Float) -> [Float] {
            products.withUnsafeMutableBufferPointer { p in for i in 0..<n { p[i] = f(i) } }
            return Self.boxSum(products, w, h, radius)
        }
        let sxx = gx.withUnsafeBufferPointer { g in windowSums { g[$0] * g[$0] } }
        let syy = gy.withUnsafeBufferPointer { g in windowSums { g[$0] * g[$0] } }
        let sxy = gx.withUnsafeBufferPointer { a in gy.withUnsafeBufferPointer { b in windowSums { a[$0] * b[$0] } } }
        // The ridge: a window whose gradients are weaker than ~half a grey level a pixel is flat.
        let area = Float((2 * radius + 1) * (2 * radius + 1)), ridge = 0.25 * area
        var diff = [Float](repeating: 0, count: n)
        for _ in 0..<iterations {
            let moved = warped(previous)
            for i in 0..<n { diff[i] = moved[i] - current[i] }
            let bx = gx.withUnsafeBufferPointer { g in diff.withUnsafeBufferPointer { d in windowSums { g[$0] * d[$0] } } }
            let by = gy.withUnsafeBufferPointer { g in diff.withUnsafeBufferPointer { d in windowSums { g[$0] * d[$0] } } }
            dx.withUnsafeMutableBufferPointer { dx in
                dy.withUnsafeMutableBufferPointer { dy in
                    for i in 0..<n {
                        let a = sxx[i] + ridge, b = sxy[i], d = syy[i] + ridge
                        let det = a * d - b * b
                        // previous(x + u + du) ≈ previous(x + u) + ∇·du = current: du = -M⁻¹ (Σ ∇ diff)
                        let ux = -(d * bx[i] - b * by[i]) / det, uy = -(a * by[i] - b * bx[i]) / det
                        dx[i] += max(-2, min(2, ux))
                        dy[i] += max(-2, min(2, uy))
                    }
                }
            }
        }
    }

    /// Per pixel, 1 where the previous picture moved by the flow matches the current one, falling
    /// linearly to 0 at a grey-level mismatch of `tolerance` (and 0 where the flow points outside).
    public func confidence(current: [Float], previous: [Float], tolerance: Float) -> [Float] {
        let moved = warped(previous)
        var out = [Float](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                let i = y * width + x
                let px = Float(x) + dx[i], py = Float(y) + dy[i]
                guard px >= 0, py >= 0, px <= Float(width - 1), py <= Float(height - 1) else { continue }
                out[i] = max(0, 1 - abs(moved[i] - current[i]) / tolerance)
            }
        }
        return out
    }

    /// `picture` (of this grid's size) read where the flow points from each pixel: bilinear,
    /// clamped at the edges.
    func warped(_ picture: [Float]) -> [Float] {
        let w = width, h = height
        var out = [Float](repeating: 0, count: w * h)
        picture.withUnsafeBufferPointer { p in
            out.withUnsafeMutableBufferPointer { out in
                for y in 0..<h {
                    for x in 0..<w {
                        let i = y * w + x
                        out[i] = Self.sample(p, w, h, Float(x) + dx[i], Float(y) + dy[i])
                    }
                }
            }
        }
        return out
    }

    @inline(__always)
    static func sample(_ g: UnsafeBufferPointer<Float>, _ w: Int, _ h: Int, _ x: Float, _ y: Float) -> Float {
        let cx = max(0, min(Float(w - 1), x)), cy = max(0, min(Float(h - 1), y))
        let x0 = min(Int(cx), max(0, w - 2)), y0 = min(Int(cy), max(0, h - 2))
        let x1 = min(x0 + 1, w - 1), y1 = min(y0 + 1, h - 1)
        let ax = cx - Float(x0), ay = cy - Float(y0)
        let top = g[y0 * w + x0] + (g[y0 * w + x1] - g[y0 * w + x0]) * ax
        let bottom = g[y1 * w + x0] + (g[y1 * w + x1] - g[y1 * w + x0]) * ax
        return top + (bottom - top) * ay
    }

    /// Sums over (2r+1)² windows (clamped at the edges), separable running sums.
    static func boxSum(_ v: [Float], _ w: Int, _ h: Int, _ r: Int) -> [Float] {
        var rows = [Float](repeating: 0, count: w * h)
        var out = [Float](repeating: 0, count: w * h)
        v.withUnsafeBufferPointer { v in
            rows.withUnsafeMutableBufferPointer { rows in
                for y in 0..<h {
                    let row = y * w
                    var acc: Float = 0
                    for x in -r...r { acc += v[row + max(0, min(w - 1, x))] }
                    for x in 0..<w {
                        rows[row + x] = acc
                        acc += v[row + min(w - 1, x + r + 1)] - v[row + max(0, x - r)]
                    }
                }
            }
        }
        rows.withUnsafeBufferPointer { rows in
            out.withUnsafeMutableBufferPointer { out in
                var acc = [Float](repeating: 0, count: w)
                for y in -r...r { for x in 0..<w { acc[x] += rows[max(0, min(h - 1, y)) * w + x] } }
                for y in 0..<h {
                    let add = min(h - 1, y + r + 1) * w, drop = max(0, y - r) * w, row = y * w
                    for x in 0..<w {
                        out[row + x] = acc[x]
                        acc[x] += rows[add + x] - rows[drop + x]
                    }
                }
            }
        }
        return out
    }
}
