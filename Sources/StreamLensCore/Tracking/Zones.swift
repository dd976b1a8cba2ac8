import Foundation

/// A named place lenszone counts at: a directional line segment (objects cross it) or a polygon
/// (objects enter it, stay, leave). Coordinates are whatever the zone was written in (frame
/// pixels, or 0…1 of the frame until `scaled` turns them into pixels).
public struct Zone: Sendable, Equatable {
    public enum Shape: Sendable, Equatable {
        /// From the first point to the second; the order decides which way is "in" (`ZoneGeometry`).
        case line(Point, Point)
        /// Three points or more; the last joins the first.
        case polygon([Point])
    }

    public var name: String
    public var shape: Shape

    public init(name: String, shape: Shape) {
        self.name = name
        self.shape = shape
    }

    public var points: [Point] {
        switch shape {
        case .line(let a, let b): return [a, b]
        case .polygon(let p): return p
        }
    }

    public var isLine: Bool {
        if case .line = shape { return true }
        return false
    }

    /// The zone with every x multiplied by `x` and every y by `y` (normalized → frame pixels).
    public func scaled(x sx: Double, y sy: Double) -> Zone {
        func s(_ p: Point) -> Point { Point(x: p.x * sx, y: p.y * sy) }
        switch shape {
        case .line(let a, let b): return Zone(name: name, shape: .line(s(a), s(b)))
        case .polygon(let p): return Zone(name: name, shape: .polygon(p.map(s)))
        }
    }
}

/// The geometry lenszone counts with, in image coordinates: x to the right, y **down**.
public enum ZoneGeometry {
    /// Which way an object crossed a line.
    public enum Direction: String, Sendable, Equatable {
        /// From the line's left to its right, as someone standing on its first point looking at
        /// its second sees it (on the screen, y down). A line drawn upwards (x,360 → x,0): moving
        /// right is in. A line drawn rightwards (0,y → 640,y): moving down is in.
        case `in`
        /// From its right to its left.
        case out
    }

    /// The side of the line through `a` and `b` that `p` lies on: negative on its left (seen from
    /// `a` towards `b`, y down), positive on its right, 0 on the line. (The z of the cross
    /// product (b − a) × (p − a); with y down its sign is the mirror of the textbook y-up one.)
    public static func side(of p: Point, a: Point, b: Point) -> Double {
        (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
    }

    /// The direction in which a move from `p0` to `p1` crosses the segment from `a` to `b`; nil
    /// when it does not: both points on one side, one of them on the line itself (the caller
    /// keeps the last point that was on a side), or the move passes the line beyond an end.
    public static func crossing(from p0: Point, to p1: Point, a: Point, b: Point) -> Direction? {
        let s0 = side(of: p0, a: a, b: b), s1 = side(of: p1, a: a, b: b)
        guard (s0 < 0 && s1 > 0) || (s0 > 0 && s1 < 0) else { return nil }
        let dx = b.x - a.x, dy = b.y - a.y, length2 = dx * dx + dy * dy
        guard length2 > 0 else { return nil }
        // Where the move meets the line (a fraction u of the way from p0 to p1), then where that
        // point lies along the segment (t: 0 at a, 1 at b).
        let u = s0 / (s0 - s1)
        let x = p0.x + u * (p1.x - p0.x), y = p0.y + u * (p1.y - p0.y)
        let t = ((x - a.x) * dx + (y - a.y) * dy) / length2
        guard t >= 0, t <= 1 else { return nil }
        return s0 < 0 ? .in : .out
    }

    /// Whether `p` is inside the polygon (even-odd rule; a point exactly on an edge may go
    /// either way).
    public static func contains(_ polygon: [Point], _ p: Point) -> Bool {
        guard polygon.count >= 3 else { return false }
        var inside = false
        var j = polygon.count - 1
        for i in polygon.indices {
            let pi = polygon[i], pj = polygon[j]
            // The edge straddles the horizontal through p, and meets it right of p.
            if (pi.y > p.y) != (pj.y > p.y), p.x < (pj.x - pi.x) * (p.y - pi.y) / (pj.y - pi.y) + pi.x {
                inside.toggle()
            }
            j = i
        }
        return inside
    }
}

/// lenszone's `lines` and `areas` property syntax: `name:x1,y1,x2,y2;name2:…` (lines) and
/// `name:x1,y1,x2,y2,x3,y3,…;…` (polygons of three points or more). Spaces around names and
/// numbers are ignored, an empty entry (a trailing `;`) is skipped. Each error is one message
/// naming the property and the entry.
public enum ZoneSyntax {
    public static func lines(_ text: String, property: String = "lines") throws -> [Zone] {
        try entries(text, property: property).map { name, entry, numbers in
            guard numbers.count == 4 else { throw StageError("property \(property): '\(entry)' needs name:x1,y1,x2,y2") }
            let a = Point(x: numbers[0], y: numbers[1]), b = Point(x: numbers[2], y: numbers[3])
            guard a != b else { throw StageError("property \(property): '\(entry)' has its two points equal; a line needs two different ones") }
            return Zone(name: name, shape: .line(a, b))
        }
    }

    public static func areas(_ text: String, property: String = "areas") throws -> [Zone] {
        try entries(text, property: property).map { name, entry, numbers in
            guard numbers.count >= 6, numbers.count % 2 == 0 else {
                throw StageError("property \(property): '\(entry)' needs name:x1,y1,x2,y2,x3,y3,… (three points or more, an x and a y each)")
            }
            let points = stride(from: 0, to: numbers.count, by: 2).map { Point(x: numbers[$0], y: numbers[$0 + 1]) }
            return Zone(name: name, shape: .polygon(points))
        }
    }

    /// Every point of every zone within 0…1 (`coordinates=normalized`), or the error naming the first that is not.
    public static func checkNormalized(_ zones: [Zone], property: (Zone) -> String) throws {
        for zone in zones {
            for p in zone.points where !(0...1).contains(p.x) || !(0...1).contains(p.y) {
                throw StageError("property \(property(zone)): zone '\(zone.name)' has the point \(p.x),\(p.y) outside 0…1 (coordinates=normalized: fractions of the frame)")
            }
        }
    }

    /// Names are unique across lines and areas (the counts are keyed by name).
    public static func checkNames(_ zones: [Zone]) throws {
        var seen = Set<String>()
        for zone in zones where !seen.insert(zone.name).inserted {
            throw StageError("zone name '\(zone.name)' is used twice (lines and areas share one set of names: counts are keyed by name)")
        }
    }

    /// (name, the entry as written, its numbers) for each `;`-separated entry.
    private static func entries(_ text: String, property: String) throws -> [(String, String, [Double])] {
        try text.split(separator: ";").compactMap { raw -> (String, String, [Double])? in
            let entry = raw.trimmingCharacters(in: .whitespaces)
            guard !entry.isEmpty else { return nil }
            guard let colon = entry.firstIndex(of: ":") else {
                throw StageError("property \(property): '\(entry)' has no name: write name:x1,y1,…")
            }
            let name = entry[..<colon].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw StageError("property \(property): '\(entry)' has an empty name") }
            let numbers = try entry[entry.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false).map { word in
                let w = word.trimmingCharacters(in: .whitespaces)
                guard let v = Double(w), v.isFinite else { throw StageError("property \(property): '\(entry)': '\(w)' is not a number") }
                guard abs(v) <= PropertyCoordinates.limit else {
                    throw StageError("property \(property): '\(entry)': \(w) is out of range (coordinates are within ±\(Int(PropertyCoordinates.limit)))")
                }
                return v
            }
            return (name, entry, numbers)
        }
    }
}
