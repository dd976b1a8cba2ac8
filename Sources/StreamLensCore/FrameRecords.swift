import Foundation

/// Something that happened on a frame, found by a stage (lenszone: an object crossed a line,
/// entered or left an area). Stored on the frame (`FramePixels.addEvents`), so lensmetadata
/// writes it, and posted on the bus by the host as an element message `streamlens-event` for
/// applications (docs/metadata.md).
public struct FrameEvent: Sendable, Equatable, Codable {
    /// "crossed", "entered", "left".
    public var type: String
    /// The zone's (line's or area's) name.
    public var zone: String
    /// The object's id (a tracker's), -1 unknown.
    public var objectId: Int
    public var label: String
    /// Lines: the direction crossed ("in": from the line's left to its right, seen from its first
    /// point towards its second; "out": the other way).
    public var direction: String?
    /// Presentation time of the frame, seconds.
    public var time: Double?
    /// "left": how long the object was inside, seconds.
    public var dwell: Double?
    /// "snapshot" (lenssnapshot's, on the bus and the API only): the picture's file.
    public var path: String?
    /// "text" (lensclassify's, once a tracked object's reading is settled): the reading, its
    /// mean score and how many of the object's crops read it.
    public var text: String?
    public var score: Double?
    public var votes: Int?

    public init(type: String, zone: String, objectId: Int, label: String, direction: String? = nil, time: Double? = nil, dwell: Double? = nil,
                path: String? = nil, text: String? = nil, score: Double? = nil, votes: Int? = nil) {
        self.type = type; self.zone = zone; self.objectId = objectId; self.label = label
        self.direction = direction; self.time = time; self.dwell = dwell; self.path = path
        self.text = text; self.score = score; self.votes = votes
    }

    enum CodingKeys: String, CodingKey {
        case type, zone, label, direction, time, dwell, path, text, score, votes
        case objectId = "object_id"
    }
}

/// A zone's shape and its counts so far, carried by every frame after lenszone (lensoverlay
/// draws them, lensmetadata writes them).
public struct ZoneReading: Sendable, Equatable, Codable {
    public var name: String
    /// "line" or "polygon".
    public var kind: String
    /// Frame pixels.
    public var points: [[Double]]
    /// Lines: "in", "out"; polygons: "entered", "left", "inside".
    public var counts: [String: Int]
    /// Polygons: seconds spent inside by the objects inside now, by object id.
    public var dwell: [String: Double]?

    public init(name: String, kind: String, points: [[Double]], counts: [String: Int], dwell: [String: Double]? = nil) {
        self.name = name; self.kind = kind; self.points = points; self.counts = counts; self.dwell = dwell
    }
}

/// The frame records' kinds and their JSON (one place encodes and decodes them).
public enum FrameRecords {
    public static let events = "events"
    public static let zones = "zones"

    static let encoder = JSONEncoder.stable()

    public static func encode<T: Encodable>(_ value: T) -> String {
        (try? encoder.encode(value)).flatMap { String(data: $0, encoding: .utf8) } ?? "[]"
    }

    public static func decode<T: Decodable>(_ type: T.Type, _ json: String?) -> T? {
        guard let json, let data = json.data(using: .utf8) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }
}

extension FramePixels {
    /// The events stages before this one found on the frame (none: empty).
    public func events() -> [FrameEvent] { FrameRecords.decode([FrameEvent].self, frameRecord(FrameRecords.events)) ?? [] }

    /// Appends events to the frame's.
    public func addEvents(_ new: [FrameEvent]) {
        guard !new.isEmpty else { return }
        setFrameRecord(FrameRecords.events, json: FrameRecords.encode(events() + new))
    }

    /// The zones stages before this one carry (lenszone), with their counts.
    public func zones() -> [ZoneReading] { FrameRecords.decode([ZoneReading].self, frameRecord(FrameRecords.zones)) ?? [] }

    /// Appends zones to the frame's (several lenszone stages add up).
    public func addZones(_ new: [ZoneReading]) {
        guard !new.isEmpty else { return }
        setFrameRecord(FrameRecords.zones, json: FrameRecords.encode(zones() + new))
    }
}
