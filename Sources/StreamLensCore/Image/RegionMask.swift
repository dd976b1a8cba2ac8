/// Where an effect applies on a frame: inside a set of boxes (regions of interest), or
/// everywhere but inside them, with a soft edge. The weight of a pixel is 1 where the effect is
/// full and 0 where the frame stays as it is; it ramps linearly over `feather` pixels, always on
/// the inner side of a box's edge, so a pixel outside every box has weight exactly 0 (`inside`)
/// or exactly 1 (`outside`).
///
/// Worked out one row at a time (`fillRow`): no full-frame mask is ever made.
public struct RegionMask: Sendable, Equatable {
    /// Which side of the boxes the effect is on.
    public enum Side: String, Sendable, CaseIterable {
        case inside, outside
    }

    public let side: Side
    /// Width of the ramp in pixels (0: a hard edge).
    public let feather: Int
    /// The boxes clipped to the frame, in frame pixels; non-finite or empty boxes left out.
    public let boxes: [Box]
    /// When a region has a mask (`ObjectMask`): every region drawn (masks by their outline,
    /// the others as boxes), the edge feathered over `feather` pixels centred on the outline
    /// (`OutlineRaster`); the weights come from it instead of the boxes.
    public private(set) var outline: OutlineRaster?

    /// Regions as boxes, with their masks where they have one.
    public init(regions: [(box: Box, mask: ObjectMask?)], side: Side, feather: Int, width: Int, height: Int) {
        self.init(boxes: regions.map(\.box), side: side, feather: feather, width: width, height: height)
        guard regions.contains(where: { $0.mask != nil }) else { return }
        var raster = OutlineRaster(width: width, height: height)
        for r in regions { raster.add(box: r.box, mask: r.mask) }
        raster.feather(feather)
        outline = raster
    }

    public init(boxes: [Box], side: Side, feather: Int, width: Int, height: Int) {
        outline = nil
        self.side = side
        self.feather = max(0, feather)
        let (w, h) = (Double(width), Double(height))
        self.boxes = boxes.compactMap { b in
            guard b.xMin.isFinite, b.yMin.isFinite, b.xMax.isFinite, b.yMax.isFinite else { return nil }
            let c = Box(xMin: max(0, b.xMin), yMin: max(0, b.yMin), xMax: min(w, b.xMax), yMax: min(h, b.yMax))
            return c.xMax > c.xMin && c.yMax > c.yMin ? c : nil
        }
    }

    /// The weight of a pixel whose centre lies `d` pixels inside a box's nearest edge (negative:
    /// outside it), for the `inside` side: 0 outside, rising linearly to 1 at `feather` pixels
    /// in, 1 beyond (a hard edge: 1 for any centre inside).
    public static func weight(distanceInside d: Double, feather: Int) -> Double {
        guard d > 0 else { return 0 }
        return feather <= 0 ? 1 : min(1, d / Double(feather))
    }

    /// The weight (0…1) of pixel (x, y), its centre at (x + 0.5, y + 0.5): the largest of the
    /// boxes' (`inside`), or one minus that (`outside`). Per-pixel reference of `fillRow`.
    public func weight(x: Int, y: Int) -> Double {
        if let o = outline {
            let w = x >= 0 && y >= 0 && x < o.width && y < o.height ? Double(o.weights[y * o.width + x]) / 255 : 0
            return side == .inside ? w : 1 - w
        }
        let cx = Double(x) + 0.5, cy = Double(y) + 0.5
        var best = 0.0
        for b in boxes {
            let d = min(cx - b.xMin, b.xMax - cx, cy - b.yMin, b.yMax - cy)
            best = max(best, Self.weight(distanceInside: d, feather: feather))
        }
        return side == .inside ? best : 1 - best
    }

    /// Row `y`'s weights scaled to 0…`scale` (rounded), for the columns where they can differ
    /// from the row's `background` (0 for `inside`, `scale` for `outside`): those columns are
    /// returned and only they are written in `weights` (indexed by column, room for the row's
    /// width). An empty range: the whole row is the background.
    public func fillRow(_ y: Int, width: Int, scale: Int16, into weights: UnsafeMutablePointer<Int16>) -> Range<Int> {
        if let o = outline {
            guard y >= o.y0, y < o.y1, y < o.height else { return 0..<0 }
            let lo = o.x0, hi = min(o.x1, width)
            guard lo < hi else { return 0..<0 }
            let s = Int(scale)
            for x in lo..<hi {
                let w = Int16((Int(o.weights[y * o.width + x]) * s + 127) / 255)
                weights[x] = side == .inside ? w : scale - w
            }
            return lo..<hi
        }
        let cy = Double(y) + 0.5
        var lo = width, hi = 0
        for b in boxes where cy > b.yMin && cy < b.yMax {
            lo = min(lo, max(0, Int(b.xMin.rounded(.down))))
            hi = max(hi, min(width, Int(b.xMax.rounded(.up))))
        }
        guard lo < hi else { return 0..<0 }
        for x in lo..<hi { weights[x] = 0 }
        let s = Double(scale)
        for b in boxes where cy > b.yMin && cy < b.yMax {
            let rowWeight = Self.weight(distanceInside: min(cy - b.yMin, b.yMax - cy), feather: feather)
            let x0 = max(0, Int(b.xMin.rounded(.down))), x1 = min(width, Int(b.xMax.rounded(.up)))
            for x in x0..<x1 {
                let cx = Double(x) + 0.5
                let w = min(rowWeight, Self.weight(distanceInside: min(cx - b.xMin, b.xMax - cx), feather: feather))
                weights[x] = max(weights[x], Int16((w * s).rounded()))
            }
        }
        if side == .outside {
            for x in lo..<hi { weights[x] = scale - weights[x] }
        }
        return lo..<hi
    }

    /// The weight, scaled to 0…`scale`, of the columns `fillRow` leaves out.
    public func background(scale: Int16) -> Int16 { side == .inside ? 0 : scale }
}
