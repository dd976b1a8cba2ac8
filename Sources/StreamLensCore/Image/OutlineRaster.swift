/// Regions' outlines drawn onto a frame: one weight a pixel (0…255: 255 the region, 0 not),
/// for effects that follow a person's outline (lensblur `shape=mask`, lensstylize's regions
/// with masks). A region with a mask (`ObjectMask`) is drawn as its mask at the 0.5 threshold,
/// stretched over its box; one without, as its box.
///
/// Softened (`feather`: a ramp that wide, centred on the outline) by running sums, so the cost
/// is a few passes over the regions' bounding rectangle whatever the width.
public struct OutlineRaster: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// Row-major, width × height.
    public private(set) var weights: [UInt8]
    /// The rectangle holding every non-zero weight (x0..<x1, y0..<y1); empty when none.
    public private(set) var x0: Int, y0: Int, x1: Int, y1: Int

    public init(width: Int, height: Int) {
        self.width = max(1, width)
        self.height = max(1, height)
        weights = [UInt8](repeating: 0, count: self.width * self.height)
        (x0, y0, x1, y1) = (self.width, self.height, 0, 0)
    }

    public var isEmpty: Bool { x1 <= x0 || y1 <= y0 }

    /// Nothing drawn again, at the cost of the rectangle that was (one raster for many regions).
    public mutating func clear() {
        if !isEmpty { for y in y0..<y1 { weights.withUnsafeMutableBufferPointer { $0.baseAddress!.advanced(by: y * width + x0).update(repeating: 0, count: x1 - x0) } } }
        (x0, y0, x1, y1) = (width, height, 0, 0)
    }

    /// Draws a region: its mask over `box` (frame pixels), else the box itself.
    public mutating func add(box: Box, mask: ObjectMask?) {
        guard box.xMin.isFinite, box.yMin.isFinite, box.xMax.isFinite, box.yMax.isFinite, box.width > 0, box.height > 0 else { return }
        // Pixels whose centres lie in the box.
        let bx0 = max(0, Int((box.xMin - 0.5).rounded(.up))), by0 = max(0, Int((box.yMin - 0.5).rounded(.up)))
        let bx1 = min(width, Int((box.xMax - 0.5).rounded(.up))), by1 = min(height, Int((box.yMax - 0.5).rounded(.up)))
        guard bx1 > bx0, by1 > by0 else { return }
        (x0, y0, x1, y1) = (min(x0, bx0), min(y0, by0), max(x1, bx1), max(y1, by1))
        guard let mask else {
            for y in by0..<by1 { for x in bx0..<bx1 { weights[y * width + x] = 255 } }
            return
        }
        // Bilinear samples at each pixel centre, at the mask's 0.5 threshold.
        let n = bx1 - bx0
        let sampler = MaskSampler(mask, over: box, columns: (bx0..<bx1).map { Double($0) + 0.5 }, outsideIsZero: false)
        var row = [Float](repeating: 0, count: n), scratch = [Float](repeating: 0, count: mask.width)
        weights.withUnsafeMutableBufferPointer { w in
            row.withUnsafeMutableBufferPointer { r in
                scratch.withUnsafeMutableBufferPointer { sc in
                    for y in by0..<by1 {
                        sampler.row(Double(y) + 0.5, into: r.baseAddress!, scratch: sc.baseAddress!)
                        let line = w.baseAddress! + y * width + bx0
                        for i in 0..<n where r[i] >= 127.5 { line[i] = 255 }
                    }
                }
            }
        }
    }

    /// A soft edge `pixels` wide, centred on the outline: a box filter of half that width,
    /// twice (a ramp reaching `pixels` / 2 either side of the outline, smooth at both ends).
    /// 0, 1: the hard edge as drawn.
    public mutating func feather(_ pixels: Int) {
        guard pixels > 1, !isEmpty else { return }
        let r = max(1, min(pixels / 4, max(width, height)))
        for _ in 0..<2 {
            (x0, y0, x1, y1) = (max(0, x0 - r), max(0, y0 - r), min(width, x1 + r), min(height, y1 + r))
            boxSum(radius: r) { sum, count in UInt8((sum + count / 2) / count) }
        }
    }

    /// Replaces each weight in the bounding rectangle by `value(sum, count)` of the (2r+1)²
    /// square around it (weights outside the frame count as 0), by running sums each way.
    private mutating func boxSum(radius r: Int, _ value: (Int, Int) -> UInt8) {
        let w = x1 - x0, h = y1 - y0
        guard w > 0, h > 0 else { return }
        let count = (2 * r + 1) * (2 * r + 1)
        var rows = [Int](repeating: 0, count: w * h)  // horizontal sums
        let (fw, bx, by) = (width, x0, y0)
        weights.withUnsafeMutableBufferPointer { p in
            rows.withUnsafeMutableBufferPointer { s in
                for j in 0..<h {
                    let row = (by + j) * fw
                    var acc = 0
                    for x in max(0, bx - r)..<min(fw, bx + r) { acc += Int(p[row + x]) }
                    for i in 0..<w {
                        let x = bx + i
                        if x + r < fw { acc += Int(p[row + x + r]) }
                        s[j * w + i] = acc
                        if x - r >= 0 { acc -= Int(p[row + x - r]) }
                    }
                }
                // Vertical sums of the horizontal ones; rows outside the rectangle hold only
                // zeros (the rectangle was grown by r around every non-zero weight).
                var column = [Int](repeating: 0, count: h)
                for i in 0..<w {
                    var acc = 0
                    for j in 0..<min(h, r) { acc += s[j * w + i] }
                    for j in 0..<h {
                        if j + r < h { acc += s[(j + r) * w + i] }
                        column[j] = acc
                        if j - r >= 0 { acc -= s[(j - r) * w + i] }
                    }
                    for j in 0..<h { p[(by + j) * fw + bx + i] = value(column[j], count) }
                }
            }
        }
    }
}
