/// Numbers from outside — tensor shapes and coordinates from models, inference servers, stage
/// properties, the metas of other elements — are checked where they enter, here, so no
/// arithmetic, drawing, cropping, tracking or zone code after them can meet a value it cannot
/// represent (a Double beyond Int's range traps when converted; a product of dimensions traps
/// when it overflows).

/// A tensor's shape as a model or a server declares it.
public enum TensorShape {
    /// The product of the dimensions; nil when one is negative or the product overflows Int.
    public static func elementCount(_ shape: [Int]) -> Int? {
        var count = 1
        for d in shape {
            guard d >= 0 else { return nil }
            let (product, overflow) = count.multipliedReportingOverflow(by: d)
            guard !overflow else { return nil }
            count = product
        }
        return count
    }

    /// The product of the dimensions when it is at most `limit`; nil otherwise (negative
    /// dimension, overflow, or more elements than any tensor StreamLens takes).
    public static func elementCount(_ shape: [Int], atMost limit: Int) -> Int? {
        guard let count = elementCount(shape), count <= limit else { return nil }
        return count
    }
}

/// Coordinates in frame pixels, bounded to what a frame of a given size can use.
///
/// Boxes are clamped to the frame (a face half out of the picture keeps its visible half).
/// Points (keypoints, landmarks, zone corners) may lie outside the frame — an ear beyond its
/// edge, a line drawn past it — so they are clamped to the frame grown by its own size on every
/// side: far enough that nothing visible moves, near enough that every later sum and product
/// stays small. A value that is not a number has no place to clamp to: the caller drops it.
public struct FrameBounds: Sendable, Equatable {
    public let width: Double
    public let height: Double

    public init(width: Int, height: Int) {
        self.width = Double(max(1, width))
        self.height = Double(max(1, height))
    }

    /// A box clamped to the frame; nil when a corner is not a number.
    public func clamp(_ box: Box) -> Box? {
        guard !box.xMin.isNaN, !box.yMin.isNaN, !box.xMax.isNaN, !box.yMax.isNaN else { return nil }
        return Box(xMin: Self.clamp(box.xMin, 0, width), yMin: Self.clamp(box.yMin, 0, height),
                   xMax: Self.clamp(box.xMax, 0, width), yMax: Self.clamp(box.yMax, 0, height))
    }

    /// A point clamped to the frame grown by its size on every side; nil when it is not a number.
    public func clamp(_ point: Point) -> Point? {
        guard !point.x.isNaN, !point.y.isNaN else { return nil }
        return Point(x: Self.clamp(point.x, -width, 2 * width), y: Self.clamp(point.y, -height, 2 * height))
    }

    /// Keypoints clamped as points, all or none: a keypoint that is not a number drops them all
    /// (their order carries their meaning: a gap would shift it).
    public func clamp(keypoints: [Point]) -> [Point] {
        let clamped = keypoints.compactMap(clamp)
        return clamped.count == keypoints.count ? clamped : []
    }

    /// A region with its box clamped to the frame and its points to the grown frame. A box
    /// corner that is not a number becomes 0 (the region keeps its place in the frame's list:
    /// stages update regions by index). Keypoints or landmarks with a value that is not a number
    /// are dropped as a whole (`clamp(keypoints:)`).
    public func clamp(_ region: RegionOfInterest) -> RegionOfInterest {
        let b = region.box
        func number(_ v: Double) -> Double { v.isNaN ? 0 : v }
        let box = clamp(Box(xMin: number(b.xMin), yMin: number(b.yMin), xMax: number(b.xMax), yMax: number(b.yMax)))!
        var r = region
        r.box = box
        if box != b { r.mask = region.mask?.cropped(from: b, to: box) }
        r.keypoints = clamp(keypoints: region.keypoints)
        if let landmarks = region.landmarks {
            let points = landmarks.points.compactMap { p -> [Double]? in
                guard p.count >= 2, let xy = clamp(Point(x: p[0], y: p[1])) else { return nil }
                // z is in x's pixel scale: bounded like x.
                let rest = p.dropFirst(2).map { $0.isNaN ? Double.nan : Self.clamp($0, -2 * width, 2 * width) }
                return rest.contains(where: \.isNaN) ? nil : [xy.x, xy.y] + rest
            }
            r.landmarks = points.count == landmarks.points.count ? landmarks : nil
            r.landmarks?.points = points
        }
        if let c = region.confidence, c.isNaN { r.confidence = nil }
        return r
    }

    private static func clamp(_ v: Double, _ low: Double, _ high: Double) -> Double { min(max(v, low), high) }
}

/// Coordinates a user writes in a stage property (zone corners): any finite number within a
/// bound no frame comes near, so the arithmetic on them stays exact and small.
public enum PropertyCoordinates {
    /// ±1,000,000 pixels: a 1000x wider frame than 8K still fits.
    public static let limit = 1_000_000.0
}
