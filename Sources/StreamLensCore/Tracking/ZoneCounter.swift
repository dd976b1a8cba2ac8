import Foundation

/// One tracked object on one frame, as the zone counter sees it: its id, its label and the one
/// point of its box that counts (lenszone's `anchor`).
public struct ZoneObservation: Sendable, Equatable {
    public var objectId: Int
    public var label: String
    public var point: Point

    public init(objectId: Int, label: String, point: Point) {
        self.objectId = objectId; self.label = label; self.point = point
    }
}

/// Counts line crossings and area visits of tracked objects, frame after frame (lenszone's
/// logic, without GStreamer). Zones are in frame pixels.
///
/// - Lines: an object's point moving from one side of the line to the other, meeting it within
///   the segment, is one crossing ("in" or "out", `ZoneGeometry.Direction`). A point exactly on
///   the line belongs to neither side: the object's last point that was on a side is what the
///   next one is compared with, so hovering on the line never counts twice.
/// - Areas: "entered" when the point is inside and was not (an object first seen inside counts
///   as entered, so inside = entered − left), "left" when it is outside again or when the
///   object has not been seen for more than `forget` frames; the dwell is the time from entering
///   to the last frame it was seen inside.
/// - An object unseen for up to `forget` frames keeps its place (a detector missing a frame or
///   two does not make it leave and enter again).
public struct ZoneCounter: Sendable {
    /// The zones, in frame pixels. Replacing them (a new frame size) keeps the counts, by position.
    public var zones: [Zone]
    public let forget: Int

    private var counts: [[String: Int]]
    private var objects: [Int: Tracked] = [:]

    private struct Tracked: Sendable {
        var label: String
        var lastSeenFrame: Int
        var lastSeenTime: Double
        /// Per line (zone index): the sign of the last side the point was on, and that point.
        var sides: [Int: (sign: Bool, point: Point)] = [:]
        /// Per area (zone index) the object is in: when it entered, seconds.
        var insideSince: [Int: Double] = [:]
    }

    public init(zones: [Zone], forget: Int) {
        self.zones = zones
        self.forget = forget
        counts = zones.map { $0.isLine ? ["in": 0, "out": 0] : ["entered": 0, "left": 0, "inside": 0] }
    }

    /// One frame's objects (ids ≥ 0; the first of two observations with one id is used): the
    /// events they make, in the order of the observations, then the objects forgotten.
    public mutating func update(_ observations: [ZoneObservation], frame: Int, time: Double) -> [FrameEvent] {
        var events: [FrameEvent] = []
        var seen = Set<Int>()
        for o in observations where o.objectId >= 0 && seen.insert(o.objectId).inserted {
            var object = objects[o.objectId] ?? Tracked(label: o.label, lastSeenFrame: frame, lastSeenTime: time)
            object.label = o.label
            for (i, zone) in zones.enumerated() {
                switch zone.shape {
                case .line(let a, let b):
                    let side = ZoneGeometry.side(of: o.point, a: a, b: b)
                    guard side != 0 else { continue }
                    if let last = object.sides[i], last.sign != (side > 0),
                       let direction = ZoneGeometry.crossing(from: last.point, to: o.point, a: a, b: b) {
                        counts[i][direction.rawValue, default: 0] += 1
                        events.append(FrameEvent(type: "crossed", zone: zone.name, objectId: o.objectId, label: o.label,
                                                 direction: direction.rawValue, time: time))
                    }
                    object.sides[i] = (side > 0, o.point)
                case .polygon(let polygon):
                    let inside = ZoneGeometry.contains(polygon, o.point)
                    if inside, object.insideSince[i] == nil {
                        object.insideSince[i] = time
                        counts[i]["entered", default: 0] += 1
                        counts[i]["inside", default: 0] += 1
                        events.append(FrameEvent(type: "entered", zone: zone.name, objectId: o.objectId, label: o.label, time: time))
                    } else if !inside, let since = object.insideSince.removeValue(forKey: i) {
                        // The dwell ends at the last frame it was seen inside, this frame's predecessor
                        // for a continuously seen object.
                        events.append(left(i, o.objectId, o.label, time: time, dwell: object.lastSeenTime - since))
                    }
                }
            }
            object.lastSeenFrame = frame
            object.lastSeenTime = time
            objects[o.objectId] = object
        }
        for (id, object) in objects.sorted(by: { $0.key < $1.key }) where frame - object.lastSeenFrame > forget {
            for (i, since) in object.insideSince.sorted(by: { $0.key < $1.key }) {
                events.append(left(i, id, object.label, time: time, dwell: object.lastSeenTime - since))
            }
            objects[id] = nil
        }
        return events
    }

    private mutating func left(_ zone: Int, _ id: Int, _ label: String, time: Double, dwell: Double) -> FrameEvent {
        counts[zone]["left", default: 0] += 1
        counts[zone]["inside", default: 0] -= 1
        return FrameEvent(type: "left", zone: zones[zone].name, objectId: id, label: label, time: time, dwell: Self.round(dwell))
    }

    /// Every zone's shape (frame pixels) and counts; areas with the dwell of each object inside
    /// now (to the last frame it was seen), by id.
    public var readings: [ZoneReading] {
        zones.enumerated().map { i, zone in
            var dwell: [String: Double]?
            if !zone.isLine {
                dwell = [:]
                for (id, object) in objects { if let since = object.insideSince[i] { dwell?[String(id)] = Self.round(object.lastSeenTime - since) } }
            }
            return ZoneReading(name: zone.name, kind: zone.isLine ? "line" : "polygon", points: zone.points.map { [$0.x, $0.y] },
                               counts: counts[i], dwell: dwell)
        }
    }

    /// Counts by zone name: lines "in", "out"; areas "entered", "left", "inside".
    public var countsByZone: [String: [String: Int]] {
        Dictionary(zones.indices.map { (zones[$0].name, counts[$0]) }, uniquingKeysWith: { a, _ in a })
    }

    /// `countsByZone` as one line of JSON, keys sorted: lenszone's `counts` reading.
    public var countsJSON: String { FrameRecords.encode(countsByZone) }

    /// "door in 1 out 0, shop entered 2 left 1 inside 1": the end-of-stream summary's words.
    public var countsText: String { readings.map(\.countsText).joined(separator: ", ") }

    /// Milliseconds are plenty for seconds spent in a zone (and keep the JSON short).
    private static func round(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
}

extension ZoneReading {
    /// "door in 1 out 0", "shop entered 2 left 1 inside 1": a zone's name and counts in words
    /// (lensoverlay's label, lenszone's summary).
    public var countsText: String {
        let keys = kind == "line" ? ["in", "out"] : ["entered", "left", "inside"]
        return ([name] + keys.map { "\($0) \(counts[$0] ?? 0)" }).joined(separator: " ")
    }
}
