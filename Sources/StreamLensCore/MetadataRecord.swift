import Foundation

/// One frame's regions, events and zones as the JSON Lines record lensmetadata writes
/// (docs/metadata.md): the one encoding behind lensmetadata's lines, lenssnapshot's files and the
/// HTTP API's regions (`GET /api/sources/{name}/regions`).
public enum MetadataRecord {
    /// Version 1 had no `schema_version` key and only label, score, x, y, width, height and
    /// keypoints per detection; version 2 adds the frame's size, label_id, object_id and
    /// attributes (and omits score when the producer gave none).
    /// Version 3 adds each region's `estimate` (held, predicted), `classifications` and
    /// `landmarks` and the frame's `events` and `zones`.
    /// Version 4 adds a region's `mask` (its outline over the region's box, as COCO's
    /// uncompressed run-length encoding: `size` [height, width], `counts`), when it has one.
    public static let schemaVersion = 4

    public struct Line: Encodable, Sendable {
        var schemaVersion: Int
        var time: Double?
        var frame: Int
        var width: Int
        var height: Int
        var detections: [Region]
        var events: [FrameEvent]?
        var zones: [ZoneReading]?
        enum CodingKeys: String, CodingKey {
            case schemaVersion = "schema_version"
            case time, frame, width, height, detections, events, zones
        }
    }

    public struct Region: Encodable, Sendable {
        var label: String
        var labelId: Int
        var score: Double?
        var x, y, width, height: Double   // frame pixels
        var keypoints: [[Double]]         // [x, y] in frame pixels
        var objectId: Int
        var attributes: [String: String]?
        var estimate: String?
        var classifications: [RegionOfInterest.Classification]?
        var landmarks: RegionOfInterest.Landmarks?
        var mask: Mask?
        enum CodingKeys: String, CodingKey {
            case label, score, x, y, width, height, keypoints, attributes, estimate, classifications, landmarks, mask
            case labelId = "label_id"
            case objectId = "object_id"
        }

        /// A region's mask at its 0.5 threshold as COCO's uncompressed RLE (pycocotools reads
        /// it): `size` [height, width] of the mask, which is stretched over the region's box;
        /// `counts` the run lengths, column-major, starting with the pixels outside.
        public struct Mask: Encodable, Sendable {
            var size: [Int]
            var counts: [Int]
            public init(_ m: ObjectMask) { size = [m.height, m.width]; counts = m.runLengths }
        }

        /// A region as the records write it (pixels to 0.1, scores to 1e-4): lensmetadata's
        /// lines and lenssnapshot's files beside each picture.
        public init(_ r: RegionOfInterest) {
            func r1(_ v: Double) -> Double { (v * 10).rounded() / 10 }
            self.init(label: r.label, labelId: r.labelId, score: r.confidence.map { ($0 * 1e4).rounded() / 1e4 },
                      x: r1(r.x), y: r1(r.y), width: r1(r.width), height: r1(r.height),
                      keypoints: r.keypoints.map { [r1($0.x), r1($0.y)] }, objectId: r.objectId,
                      attributes: r.attributes.isEmpty ? nil : r.attributes, estimate: r.estimate?.rawValue,
                      classifications: r.classifications.isEmpty ? nil : r.classifications.map { c in
                          var c = c
                          c.confidence = (c.confidence * 1e4).rounded() / 1e4
                          return c
                      },
                      landmarks: r.landmarks.map { l in
                          var l = l
                          l.points = l.points.map { $0.map(r1) }
                          l.presence = l.presence.map { ($0 * 1e4).rounded() / 1e4 }
                          return l
                      })
            mask = r.mask.map(Mask.init)
        }

        init(label: String, labelId: Int, score: Double?, x: Double, y: Double, width: Double, height: Double, keypoints: [[Double]],
             objectId: Int, attributes: [String: String]?, estimate: String?, classifications: [RegionOfInterest.Classification]?,
             landmarks: RegionOfInterest.Landmarks?) {
            self.label = label; self.labelId = labelId; self.score = score
            self.x = x; self.y = y; self.width = width; self.height = height
            self.keypoints = keypoints; self.objectId = objectId; self.attributes = attributes; self.estimate = estimate
            self.classifications = classifications; self.landmarks = landmarks
        }
    }

    /// The record of `frame` (its regions given, its events and zones read from it), a newline
    /// at its end; nil if it cannot be encoded.
    public static func line(_ regions: [RegionOfInterest], frame: Frame, encoder: JSONEncoder) -> Data? {
        var line = Line(schemaVersion: schemaVersion, time: frame.pts.map { Double($0) / 1e9 }, frame: frame.index,
                        width: frame.format.width, height: frame.format.height, detections: regions.map(Region.init))
        let events = frame.pixels.events(), zones = frame.pixels.zones()
        line.events = events.isEmpty ? nil : events
        line.zones = zones.isEmpty ? nil : zones
        guard var data = try? encoder.encode(line) else { return nil }
        data.append(0x0A)
        return data
    }
}
