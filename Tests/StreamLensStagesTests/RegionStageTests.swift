import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lensoverlay and lensmetadata on in-memory frames carrying regions an application put there.
@Suite(.serialized) struct RegionStageTests {
    static let (w, h) = (64, 48)
    static let region = RegionOfInterest(label: "car", labelId: 2, x: 10, y: 12, width: 30, height: 20, confidence: 0.5, objectId: 7,
                                         keypoints: [Point(x: 20, y: 20)], attributes: ["colour": "red"])

    @Test func overlayDrawsTheRegionsBoxAndNothingElse() throws {
        let driver = try StageDriver(OverlayStage.self, settings: ["labels": .bool(false), "attributes": .bool(false), "keypoints": .bool(false)])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        let black = [UInt8](repeating: 0, count: Self.w * Self.h * 3)
        let out = try #require(driver.push(black, regions: [Self.region]).first)
        func pixel(_ x: Int, _ y: Int) -> [UInt8] { Array(out.pixels.bytes[(y * Self.w + x) * 3..<(y * Self.w + x) * 3 + 3]) }
        #expect(pixel(10, 20) != [0, 0, 0] && pixel(39, 20) != [0, 0, 0] && pixel(25, 12) != [0, 0, 0], "no box edge")
        #expect(pixel(25, 22) == [0, 0, 0] && pixel(60, 40) == [0, 0, 0], "drew inside or outside the box")
        #expect(out.pixels.regions == [Self.region], "the regions changed")
        // colour=class: label id 2 is the palette's third colour (blue-ish), not green.
        let edge = pixel(10, 20)
        #expect(edge[2] > edge[1], "\(edge)")
    }

    @Test func metadataWritesEveryFieldOfTheRegions() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-meta-\(getpid()).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let driver = try StageDriver(MetadataStage.self, settings: ["location": .string(path)])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        let frame = [UInt8](repeating: 1, count: Self.w * Self.h * 3)
        _ = driver.push(frame, regions: [Self.region])
        _ = driver.push(frame)
        _ = driver.finish()   // the records are written from the writer's own queue: all there at the end
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0] == #"{"detections":[{"attributes":{"colour":"red"},"height":20,"keypoints":[[20,20]],"label":"car","label_id":2,"object_id":7,"score":0.5,"width":30,"x":10,"y":12}],"frame":0,"height":48,"schema_version":4,"time":0,"width":64}"#, "\(lines[0])")
        #expect(lines[1].contains(#""detections":[]"#) && lines[1].contains(#""frame":1"#))
    }

    /// Version 3: a region's estimate, and the frame's events and zones (lenszone's) when it has any.
    @Test func metadataWritesEstimatesEventsAndZones() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-meta3-\(getpid()).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let driver = try StageDriver(MetadataStage.self, settings: ["location": .string(path)])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        let carrier = MemoryPixels(bytes: [])
        carrier.addEvents([FrameEvent(type: "crossed", zone: "door", objectId: 7, label: "car", direction: "in", time: 0)])
        carrier.addZones([ZoneReading(name: "door", kind: "line", points: [[1, 2], [3, 4]], counts: ["in": 1, "out": 0])])
        var predicted = Self.region
        predicted.estimate = .predicted
        _ = driver.push([UInt8](repeating: 1, count: Self.w * Self.h * 3), regions: [predicted], records: carrier.records)
        _ = driver.finish()
        let line = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").first.map(String.init) ?? ""
        #expect(line.contains(#""estimate":"predicted""#), "\(line)")
        #expect(line.contains(#""events":[{"direction":"in","label":"car","object_id":7,"time":0,"type":"crossed","zone":"door"}]"#), "\(line)")
        #expect(line.contains(#""zones":[{"counts":{"in":1,"out":0},"kind":"line","name":"door","points":[[1,2],[3,4]]}]"#), "\(line)")
    }
}
