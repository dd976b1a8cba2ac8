import Foundation

/// A rectangle turned by any angle, by its four corners: top-left, top-right, bottom-right,
/// bottom-left as a reader of the text along it sees them (PaddleOCR's `get_mini_boxes` order:
/// of the two left-most corners the upper is first, of the two right-most the upper is second).
public struct RotatedRectangle: Sendable, Equatable {
    public var corners: [Point]

    /// Its two sides: along the first edge (top) and along the last (left).
    public var width: Double { hypot(corners[1].x - corners[0].x, corners[1].y - corners[0].y) }
    public var height: Double { hypot(corners[3].x - corners[0].x, corners[3].y - corners[0].y) }
    public var shorterSide: Double { min(width, height) }
    public var area: Double { width * height }
    public var center: Point {
        Point(x: corners.map(\.x).reduce(0, +) / 4, y: corners.map(\.y).reduce(0, +) / 4)
    }

    /// The rectangle from its corners in any order around it, put in reading order.
    init(around points: [Point]) {
        let byX = points.sorted { ($0.x, $0.y) < ($1.x, $1.y) }
        let (topLeft, bottomLeft) = byX[1].y < byX[0].y ? (byX[1], byX[0]) : (byX[0], byX[1])
        let (topRight, bottomRight) = byX[3].y < byX[2].y ? (byX[3], byX[2]) : (byX[2], byX[3])
        corners = [topLeft, topRight, bottomRight, bottomLeft]
    }

    /// The smallest-area rectangle holding `points` (OpenCV's `minAreaRect`): one of its sides
    /// lies on an edge of their convex hull, so each edge is tried (rotating calipers, in
    /// O(hull²), hulls of text regions having tens of points). Nil for no points.
    public static func enclosing(_ points: [Point]) -> RotatedRectangle? {
        let hull = convexHull(points)
        guard let first = hull.first else { return nil }
        guard hull.count > 2 else {
            // A point or a segment: a rectangle of no width along it.
            let last = hull.last ?? first
            return RotatedRectangle(around: [first, last, last, first])
        }
        var best: (area: Double, corners: [Point])?
        for i in hull.indices {
            let a = hull[i], b = hull[(i + 1) % hull.count]
            let length = hypot(b.x - a.x, b.y - a.y)
            guard length > 0 else { continue }
            let u = (x: (b.x - a.x) / length, y: (b.y - a.y) / length), v = (x: -u.y, y: u.x)
            var (minU, maxU, minV, maxV) = (Double.infinity, -Double.infinity, Double.infinity, -Double.infinity)
            for p in hull {
                let pu = (p.x - a.x) * u.x + (p.y - a.y) * u.y, pv = (p.x - a.x) * v.x + (p.y - a.y) * v.y
                minU = min(minU, pu); maxU = max(maxU, pu); minV = min(minV, pv); maxV = max(maxV, pv)
            }
            let area = (maxU - minU) * (maxV - minV)
            if best == nil || area < best!.area - 1e-9 {
                func at(_ s: Double, _ t: Double) -> Point { Point(x: a.x + s * u.x + t * v.x, y: a.y + s * u.y + t * v.y) }
                best = (area, [at(minU, minV), at(maxU, minV), at(maxU, maxV), at(minU, maxV)])
            }
        }
        return best.map { RotatedRectangle(around: $0.corners) }
    }

    /// Grown by `distance` on every side, around the same centre and at the same angle: what
    /// offsetting a rectangle by `distance` with round joins (Clipper's, DB's "unclip") and
    /// taking the smallest rectangle around the result gives.
    public func grown(by distance: Double) -> RotatedRectangle {
        let c = center, w = width, h = height
        guard w > 0, h > 0 else { return self }
        let u = (x: (corners[1].x - corners[0].x) / w, y: (corners[1].y - corners[0].y) / w)
        let v = (x: (corners[3].x - corners[0].x) / h, y: (corners[3].y - corners[0].y) / h)
        let (hw, hh) = (w / 2 + distance, h / 2 + distance)
        func at(_ s: Double, _ t: Double) -> Point { Point(x: c.x + s * hw * u.x + t * hh * v.x, y: c.y + s * hw * u.y + t * hh * v.y) }
        return RotatedRectangle(around: [at(-1, -1), at(1, -1), at(1, 1), at(-1, 1)])
    }

    /// Whether `p` lies inside or on the rectangle (within `tolerance`).
    public func contains(_ p: Point, tolerance: Double = 1e-6) -> Bool {
        var sign = 0.0
        for i in 0..<4 {
            let a = corners[i], b = corners[(i + 1) % 4]
            let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
            if abs(cross) <= tolerance * max(1, hypot(b.x - a.x, b.y - a.y)) { continue }
            if sign == 0 { sign = cross } else if (sign > 0) != (cross > 0) { return false }
        }
        return true
    }
}

/// Andrew's monotone chain: the convex hull of `points`, counter-clockwise in y-up terms, no
/// point repeated, collinear points dropped.
func convexHull(_ points: [Point]) -> [Point] {
    let sorted = points.sorted { ($0.x, $0.y) < ($1.x, $1.y) }
    guard sorted.count > 2 else { return sorted.count == 2 && sorted[0] == sorted[1] ? [sorted[0]] : sorted }
    func cross(_ o: Point, _ a: Point, _ b: Point) -> Double { (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x) }
    var lower: [Point] = [], upper: [Point] = []
    for p in sorted {
        while lower.count >= 2, cross(lower[lower.count - 2], lower[lower.count - 1], p) <= 0 { lower.removeLast() }
        lower.append(p)
    }
    for p in sorted.reversed() {
        while upper.count >= 2, cross(upper[upper.count - 2], upper[upper.count - 1], p) <= 0 { upper.removeLast() }
        upper.append(p)
    }
    return Array(lower.dropLast() + upper.dropLast())
}

/// The 8-connected groups of set cells in a `width` × `height` grid (row-major), each as the
/// end cells of its runs in every row (the cells its convex hull can be made of), at most
/// `limit` groups, largest-first order not promised. Cells are (column, row) points.
func connectedRegions(_ set: [Bool], width: Int, height: Int, limit: Int) -> [[Point]] {
    guard width > 0, height > 0, set.count == width * height else { return [] }
    var label = [Int32](repeating: -1, count: set.count)
    var regions: [[Point]] = []
    var stack: [Int] = []
    for start in set.indices where set[start] && label[start] < 0 {
        guard regions.count < limit else { break }
        let id = Int32(regions.count)
        label[start] = id
        stack.append(start)
        // Per row: the leftmost and rightmost cell reached.
        var rows: [Int: (Int, Int)] = [:]
        while let i = stack.popLast() {
            let (x, y) = (i % width, i / width)
            if let r = rows[y] { rows[y] = (min(r.0, x), max(r.1, x)) } else { rows[y] = (x, x) }
            for dy in -1...1 {
                let ny = y + dy
                guard ny >= 0, ny < height else { continue }
                for dx in -1...1 where dx != 0 || dy != 0 {
                    let nx = x + dx
                    guard nx >= 0, nx < width else { continue }
                    let n = ny * width + nx
                    if set[n], label[n] < 0 { label[n] = id; stack.append(n) }
                }
            }
        }
        regions.append(rows.flatMap { y, r in
            r.0 == r.1 ? [Point(x: Double(r.0), y: Double(y))] : [Point(x: Double(r.0), y: Double(y)), Point(x: Double(r.1), y: Double(y))]
        })
    }
    return regions
}
