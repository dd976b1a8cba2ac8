import Foundation

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
            flow.dx = boxSum(flow.dx, c.width, c.height, radius, scale: window)
            flow.dy = boxSum(flow.dy, c.width, c.height, radius, scale: window)
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
        let w = width, h = height
        dx.withUnsafeBufferPointer { dx in dy.withUnsafeBufferPointer { dy in
            out.dx.withUnsafeMutableBufferPointer { ox in out.dy.withUnsafeMutableBufferPointer { oy in
                for y in 0..<h2 {
                    let fy = max(0, min(Float(h - 1), (Float(y) + 0.5) * sy - 0.5))
                    let y0 = min(Int(fy), max(0, h - 2)), ay = h > 1 ? fy - Float(y0) : 0
                    let r0 = y0 * w, r1 = min(y0 + 1, h - 1) * w
                    for x in 0..<w2 {
                        let fx = max(0, min(Float(w - 1), (Float(x) + 0.5) * sx - 0.5))
                        let x0 = min(Int(fx), max(0, w - 2)), ax = w > 1 ? fx - Float(x0) : 0
                        let x1 = min(x0 + 1, w - 1)
                        let topX = dx[r0 + x0] + (dx[r0 + x1] - dx[r0 + x0]) * ax
                        let bottomX = dx[r1 + x0] + (dx[r1 + x1] - dx[r1 + x0]) * ax
                        let topY = dy[r0 + x0] + (dy[r0 + x1] - dy[r0 + x0]) * ax
                        let bottomY = dy[r1 + x0] + (dy[r1 + x1] - dy[r1 + x0]) * ax
                        ox[y * w2 + x] = (topX + (bottomX - topX) * ay) / sx
                        oy[y * w2 + x] = (topY + (bottomY - topY) * ay) / sy
                    }
                }
            } }
        } }
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
        // Window sums of products of two pictures (each product a vectorized loop, then the
        // separable running sums).
        func windowSums(_ a: [Float], _ b: [Float]) -> [Float] {
            var p = [Float](repeating: 0, count: n)
            a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in p.withUnsafeMutableBufferPointer { p in
                for i in 0..<n { p[i] = a[i] * b[i] }
            } } }
            return Self.boxSum(p, w, h, radius)
        }
        // Each window's 2×2 normal matrix (with the ridge: a window whose gradients are weaker
        // than ~half a grey level a pixel is flat), inverted once for the level's iterations.
        let area = Float((2 * radius + 1) * (2 * radius + 1)), ridge = 0.25 * area
        var sxx = windowSums(gx, gx), syy = windowSums(gy, gy), sxy = windowSums(gx, gy)
        sxx.withUnsafeMutableBufferPointer { a in syy.withUnsafeMutableBufferPointer { d in sxy.withUnsafeMutableBufferPointer { b in
            for i in 0..<n {
                let ai = a[i] + ridge, di = d[i] + ridge, bi = b[i], scale = 1 / (ai * di - bi * bi)
                a[i] = di * scale; d[i] = ai * scale; b[i] = -bi * scale
            }
        } } }
        for _ in 0..<iterations {
            var diff = warped(previous)
            diff.withUnsafeMutableBufferPointer { d in current.withUnsafeBufferPointer { c in for i in 0..<n { d[i] -= c[i] } } }
            let bx = windowSums(gx, diff), by = windowSums(gy, diff)
            sxx.withUnsafeBufferPointer { ixx in syy.withUnsafeBufferPointer { iyy in sxy.withUnsafeBufferPointer { ixy in
                bx.withUnsafeBufferPointer { bx in by.withUnsafeBufferPointer { by in
                    dx.withUnsafeMutableBufferPointer { dx in
                        dy.withUnsafeMutableBufferPointer { dy in
                            for i in 0..<n {
                                // previous(x + u + du) ≈ previous(x + u) + ∇·du = current: du = -M⁻¹ (Σ ∇ diff)
                                let ux = -(ixx[i] * bx[i] + ixy[i] * by[i]), uy = -(ixy[i] * bx[i] + iyy[i] * by[i])
                                dx[i] += max(-2, min(2, ux))
                                dy[i] += max(-2, min(2, uy))
                            }
                        }
                    }
                } }
            } } }
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
                dx.withUnsafeBufferPointer { dx in
                    dy.withUnsafeBufferPointer { dy in
                        for y in 0..<h {
                            for x in 0..<w {
                                let i = y * w + x
                                out[i] = Self.sample(p, w, h, Float(x) + dx[i], Float(y) + dy[i])
                            }
                        }
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

    /// Sums over (2r+1)² windows (clamped at the edges), separable running sums, times `scale`.
    static func boxSum(_ v: [Float], _ w: Int, _ h: Int, _ r: Int, scale: Float = 1) -> [Float] {
        var rows = [Float](repeating: 0, count: w * h)
        var out = rows
        var acc = [Float](repeating: 0, count: w)
        v.withUnsafeBufferPointer { v in
            rows.withUnsafeMutableBufferPointer { rows in
                for y in 0..<h {
                    let row = y * w
                    var sum: Float = 0
                    for x in -r...r { sum += v[row + max(0, min(w - 1, x))] }
                    for x in 0..<w {
                        rows[row + x] = sum
                        sum += v[row + min(w - 1, x + r + 1)] - v[row + max(0, x - r)]
                    }
                }
            }
        }
        rows.withUnsafeBufferPointer { rows in
            out.withUnsafeMutableBufferPointer { out in
                acc.withUnsafeMutableBufferPointer { acc in
                    for y in -r...r { for x in 0..<w { acc[x] += rows[max(0, min(h - 1, y)) * w + x] } }
                    for y in 0..<h {
                        let add = min(h - 1, y + r + 1) * w, drop = max(0, y - r) * w, row = y * w
                        for x in 0..<w {
                            out[row + x] = acc[x] * scale
                            acc[x] += rows[add + x] - rows[drop + x]
                        }
                    }
                }
            }
        }
        return out
    }
}
