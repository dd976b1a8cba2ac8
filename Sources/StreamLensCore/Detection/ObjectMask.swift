/// An object's outline: a small picture of coverage values (0…255; 255 surely the object, 0
/// surely not, 128 the 0.5 threshold) at its own resolution, stretched over the box of the region
/// (or detection) it belongs to. Pixel (i, j) of the mask covers the box's fraction i/width…
/// (i+1)/width across and j/height…(j+1)/height down.
///
/// One mechanism for every kind of mask: an instance mask (yolov8-seg, a second model's person
/// mask) covers its object's box; a class of a per-pixel map (`segmentation`) becomes a region
/// whose box encloses the class's pixels, its mask the map's part inside that box.
public struct ObjectMask: Sendable, Equatable, Codable {
    public let width: Int
    public let height: Int
    /// Row-major, `width` × `height`.
    public private(set) var values: [UInt8]

    /// The largest side a mask may have (a model's 4096² map is far beyond any here).
    public static let maxSide = 4096

    /// nil when the size is not 1…`maxSide` each way or `values` does not have width × height bytes.
    public init?(width: Int, height: Int, values: [UInt8]) {
        guard width > 0, height > 0, width <= Self.maxSide, height <= Self.maxSide, values.count == width * height else { return nil }
        self.width = width
        self.height = height
        self.values = values
    }

    /// Coverage (0…1) at a point given as fractions of the box (0…1 each way), interpolated
    /// bilinearly between pixel centres (at (i + 0.5) / width); outside the box, the edge's.
    public func coverage(u: Double, v: Double) -> Double {
        let fx = min(max(u * Double(width) - 0.5, 0), Double(width - 1))
        let fy = min(max(v * Double(height) - 0.5, 0), Double(height - 1))
        let x0 = Int(fx), y0 = Int(fy)
        let x1 = min(x0 + 1, width - 1), y1 = min(y0 + 1, height - 1)
        let ax = fx - Double(x0), ay = fy - Double(y0)
        let top = Double(values[y0 * width + x0]) * (1 - ax) + Double(values[y0 * width + x1]) * ax
        let bottom = Double(values[y1 * width + x0]) * (1 - ax) + Double(values[y1 * width + x1]) * ax
        return (top * (1 - ay) + bottom * ay) / 255
    }

    /// This mask, covering `box`, resampled over `part` (a box inside it, as clamping to the
    /// frame leaves) at the same density; nil when `part` is empty or not a number.
    public func cropped(from box: Box, to part: Box) -> ObjectMask? {
        guard box.width > 0, box.height > 0, part.width > 0, part.height > 0, part.xMin.isFinite, part.yMin.isFinite else { return nil }
        if part == box { return self }
        let w = min(Self.maxSide, max(1, Int((Double(width) * part.width / box.width).rounded())))
        let h = min(Self.maxSide, max(1, Int((Double(height) * part.height / box.height).rounded())))
        let sampler = MaskSampler(self, over: box, columns: (0..<w).map { part.xMin + (Double($0) + 0.5) / Double(w) * part.width },
                                  outsideIsZero: false)
        var out = [UInt8](repeating: 0, count: w * h)
        var row = [Float](repeating: 0, count: w), scratch = [Float](repeating: 0, count: width)
        for j in 0..<h {
            sampler.row(part.yMin + (Double(j) + 0.5) / Double(h) * part.height, into: &row, scratch: &scratch)
            for i in 0..<w { out[j * w + i] = UInt8(min(255, max(0, row[i])).rounded()) }
        }
        return ObjectMask(width: w, height: h, values: out)
    }

    /// This mask (over `box`) blended with an earlier frame's (`earlier` over `earlierBox`): at
    /// each point, `weight` of this one's coverage plus the rest of the earlier one's (0 outside
    /// a mask's box), over the union of the two boxes at this mask's density. An exponential
    /// average over frames when each frame's result is blended with the last blend.
    public func blended(over box: Box, with earlier: ObjectMask, over earlierBox: Box, weight: Double) -> (box: Box, mask: ObjectMask) {
        guard box.width > 0, box.height > 0, earlierBox.width > 0, earlierBox.height > 0 else { return (box, self) }
        let union = Box(xMin: min(box.xMin, earlierBox.xMin), yMin: min(box.yMin, earlierBox.yMin),
                        xMax: max(box.xMax, earlierBox.xMax), yMax: max(box.yMax, earlierBox.yMax))
        let w = min(Self.maxSide, max(1, Int((Double(width) * union.width / box.width).rounded())))
        let h = min(Self.maxSide, max(1, Int((Double(height) * union.height / box.height).rounded())))
        let a = Float(min(max(weight, 0), 1))
        let columns = (0..<w).map { union.xMin + (Double($0) + 0.5) / Double(w) * union.width }
        let now = MaskSampler(self, over: box, columns: columns, outsideIsZero: true)
        let before = MaskSampler(earlier, over: earlierBox, columns: columns, outsideIsZero: true)
        var out = [UInt8](repeating: 0, count: w * h)
        var rowNow = [Float](repeating: 0, count: w), rowBefore = rowNow
        var scratch = [Float](repeating: 0, count: max(width, earlier.width))
        for j in 0..<h {
            let y = union.yMin + (Double(j) + 0.5) / Double(h) * union.height
            now.row(y, into: &rowNow, scratch: &scratch)
            before.row(y, into: &rowBefore, scratch: &scratch)
            for i in 0..<w { out[j * w + i] = UInt8(min(255, max(0, a * rowNow[i] + (1 - a) * rowBefore[i])).rounded()) }
        }
        return (union, ObjectMask(width: w, height: h, values: out)!)
    }

    /// This mask (over `box`) cut to the pixels with any coverage above `floor`, one pixel more
    /// each side, and the box of that part: what stays of a blend's union box once the earlier
    /// frames' coverage has faded there (without it the box of an averaged mask only grows).
    /// nil when no pixel is above `floor`.
    public func trimmed(over box: Box, floor: UInt8 = 3) -> (box: Box, mask: ObjectMask)? {
        var x0 = width, y0 = height, x1 = -1, y1 = -1
        for j in 0..<height {
            for i in 0..<width where values[j * width + i] > floor {
                x0 = min(x0, i); x1 = max(x1, i); y0 = min(y0, j); y1 = max(y1, j)
            }
        }
        guard x1 >= 0 else { return nil }
        x0 = max(0, x0 - 1); y0 = max(0, y0 - 1); x1 = min(width - 1, x1 + 1); y1 = min(height - 1, y1 + 1)
        if x0 == 0, y0 == 0, x1 == width - 1, y1 == height - 1 { return (box, self) }
        let w = x1 - x0 + 1, h = y1 - y0 + 1
        var out = [UInt8](repeating: 0, count: w * h)
        for j in 0..<h { for i in 0..<w { out[j * w + i] = values[(y0 + j) * width + x0 + i] } }
        let sx = box.width / Double(width), sy = box.height / Double(height)
        let part = Box(xMin: box.xMin + Double(x0) * sx, yMin: box.yMin + Double(y0) * sy,
                       xMax: box.xMin + Double(x1 + 1) * sx, yMax: box.yMin + Double(y1 + 1) * sy)
        return (part, ObjectMask(width: w, height: h, values: out)!)
    }

    /// Whether pixel (i, j) is the object (coverage at least one half).
    public func contains(_ i: Int, _ j: Int) -> Bool { values[j * width + i] >= 128 }

    /// The mask at the 0.5 threshold as COCO's uncompressed run-length encoding: run lengths
    /// over the pixels in column-major order (down the first column, then the next), alternating
    /// outside, inside, outside…, starting with a (possibly empty) run of outside. What
    /// pycocotools' `frPyObjects`/`decode` read as `{"size": [height, width], "counts": […]}`.
    public var runLengths: [Int] {
        var counts: [Int] = []
        var inside = false, run = 0
        for i in 0..<width {
            for j in 0..<height {
                let here = contains(i, j)
                if here != inside {
                    counts.append(run)
                    run = 0
                    inside = here
                }
                run += 1
            }
        }
        counts.append(run)
        return counts
    }

    /// A binary mask (0 or 255) from COCO's uncompressed run lengths (`runLengths`); nil when
    /// the runs do not add up to width × height or one is negative.
    public init?(width: Int, height: Int, runLengths: [Int]) {
        guard width > 0, height > 0, width <= Self.maxSide, height <= Self.maxSide, runLengths.allSatisfy({ $0 >= 0 }),
              runLengths.reduce(0, { $0 &+ $1 }) == width * height else { return nil }
        var values = [UInt8](repeating: 0, count: width * height)
        var k = 0
        for (n, run) in runLengths.enumerated() {
            for p in k..<(k + run) where n % 2 == 1 {
                values[(p % height) * width + p / height] = 255
            }
            k += run
        }
        self.init(width: width, height: height, values: values)
    }
}

/// Bilinear samples of a mask stretched over its box, on a grid of points in frame coordinates
/// (the pixel centres an effect or a resampling needs): the columns' taps worked out once, and
/// for each row the two mask rows blended once, so a sample costs one lerp. The one resampler
/// behind OutlineRaster.add, ObjectMask.cropped and ObjectMask.blended. Values 0…255 as Float,
/// as `ObjectMask.coverage` × 255 gives them.
struct MaskSampler {
    let mask: ObjectMask
    let box: Box
    /// Points outside the box sample 0 (a mask says nothing beyond its box); otherwise the edge's.
    let outsideIsZero: Bool
    private let x0: [Int], x1: [Int], ax: [Float], outsideColumn: [Bool]

    init(_ mask: ObjectMask, over box: Box, columns: [Double], outsideIsZero: Bool) {
        self.mask = mask
        self.box = box
        self.outsideIsZero = outsideIsZero
        let n = columns.count, mw = mask.width
        var x0 = [Int](repeating: 0, count: n), x1 = x0, ax = [Float](repeating: 0, count: n), out = [Bool](repeating: false, count: n)
        for (i, x) in columns.enumerated() {
            let u = (x - box.xMin) / box.width
            out[i] = outsideIsZero && (u < 0 || u > 1 || !u.isFinite)
            let fx = min(max(u * Double(mw) - 0.5, 0), Double(mw - 1))
            let f = fx.isFinite ? fx : 0
            x0[i] = Int(f); x1[i] = min(x0[i] + 1, mw - 1); ax[i] = Float(f - Double(x0[i]))
        }
        (self.x0, self.x1, self.ax, self.outsideColumn) = (x0, x1, ax, out)
    }

    /// The samples of the grid row at frame y into `out` (one per column); `scratch` has room
    /// for the mask's width.
    func row(_ y: Double, into out: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>) {
        let n = x0.count, mw = mask.width, mh = mask.height
        let v = (y - box.yMin) / box.height
        if outsideIsZero && (v < 0 || v > 1 || !v.isFinite) {
            out.update(repeating: 0, count: n)
            return
        }
        let fy = min(max(v * Double(mh) - 0.5, 0), Double(mh - 1))
        let f = fy.isFinite ? fy : 0
        let r0 = Int(f) * mw, r1 = min(Int(f) + 1, mh - 1) * mw, ay = Float(f - Double(Int(f)))
        mask.values.withUnsafeBufferPointer { m in
            for i in 0..<mw { let a = Float(m[r0 + i]); scratch[i] = a + (Float(m[r1 + i]) - a) * ay }
        }
        x0.withUnsafeBufferPointer { c0 in x1.withUnsafeBufferPointer { c1 in ax.withUnsafeBufferPointer { a in
            outsideColumn.withUnsafeBufferPointer { o in
                for i in 0..<n {
                    let l = scratch[c0[i]]
                    out[i] = o[i] ? 0 : l + (scratch[c1[i]] - l) * a[i]
                }
            }
        } } }
    }
}
