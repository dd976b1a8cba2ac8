import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lenssnapshot on in-memory frames (regions and events set here, as a detector, tracker and
/// lenszone upstream would set them); the pictures are real JPEGs from GStreamer's jpegenc.
@Suite(.serialized) struct SnapshotStageTests {
    static let (w, h) = (64, 48)
    /// A frame whose every pixel says its column (R), row (G): a crop's picture can be checked by size.
    static let frame: [UInt8] = (0..<(w * h)).flatMap { i in [UInt8(i % w), UInt8(i / w), 0, 255] }

    static func face(_ x: Double, _ y: Double, size: Double = 10, id: Int = -1, label: String = "face", confidence: Double = 0.9) -> RegionOfInterest {
        RegionOfInterest(label: label, labelId: 0, x: x, y: y, width: size, height: size, confidence: confidence, objectId: id)
    }

    /// Width and height from a JPEG's start-of-frame marker.
    static func jpegSize(_ data: Data) -> (Int, Int)? {
        let b = [UInt8](data)
        guard b.count > 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1], length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if (0xC0...0xC3).contains(marker) { return (Int(b[i + 7]) << 8 | Int(b[i + 8]), Int(b[i + 5]) << 8 | Int(b[i + 6])) }
            i += 2 + length
        }
        return nil
    }

    /// The JSON files in a folder, decoded, by file name.
    static func records(_ dir: URL) throws -> [String: [String: Any]] {
        var out: [String: [String: Any]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".json") {
            out[name] = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent(name))) as? [String: Any])
        }
        return out
    }

    static func run(_ settings: [String: PropertyValue], frames: [[RegionOfInterest]], events: [Int: [FrameEvent]] = [:], format: String = "BGRx") throws -> StageDriver<SnapshotStage> {
        let driver = try StageDriver(SnapshotStage.self, settings: settings)
        try driver.start(.packed(format, width: w, height: h))
        let bytes = format.count == 3 ? stride(from: 0, to: frame.count, by: 4).flatMap { Array(frame[$0..<($0 + 3)]) } : frame
        for (n, regions) in frames.enumerated() {
            let records = events[n].map { [FrameRecords.events: FrameRecords.encode($0)] } ?? [:]
            let out = driver.push(bytes, regions: regions, records: records)
            #expect(out.count == 1 && out[0].outcome == .forward && out[0].pixels.bytes == bytes, "frames go on unchanged")
        }
        _ = driver.finish()
        return driver
    }

    /// on=label: a label the previous frame did not have; its most confident region is cropped,
    /// grown by the margin and clamped to the frame (RGB: rows of a crop are 3 × width bytes).
    @Test func aLabelAppearingIsCroppedWithItsMarginWithinTheFrame() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let frames: [[RegionOfInterest]] = [
            [],
            [Self.face(2, 30, confidence: 0.6), Self.face(40, 10, confidence: 0.95)],   // face appears: the 0.95 one
            [Self.face(40, 10)],                                                        // still there: nothing
            [Self.face(40, 10), Self.face(50, 38, label: "cat")],                         // cat appears, at the corner
            [],
            [Self.face(1, 1)],                                                          // face again
        ]
        let driver = try Self.run(["on": .string("label"), "what": .string("crop"), "margin": .double(0.5),
                                   "path": .string(dir.path + "/{frame}-{label}.jpg")], frames: frames, format: "RGB")
        #expect(driver.stage.summary?.hasPrefix("3 snapshots written (") == true, "\(driver.stage.summary ?? "")")
        #expect(driver.stage.readings["snapshots"] == "3")
        let records = try Self.records(dir)
        #expect(Set(records.keys) == ["1-face.json", "3-cat.json", "5-face.json"], "\(records.keys)")
        let expected: [String: [String: Int]] = [
            "1-face": ["x": 35, "y": 5, "width": 20, "height": 20],
            "3-cat": ["x": 45, "y": 33, "width": 19, "height": 15],    // clamped at 64 × 48
            "5-face": ["x": 0, "y": 0, "width": 16, "height": 16],     // clamped at 0
        ]
        for (name, crop) in expected {
            let record = try #require(records[name + ".json"])
            #expect(record["crop"] as? [String: Int] == crop && record["trigger"] as? [String] == ["label"] && record["image"] as? String == name + ".jpg", "\(record)")
            let jpeg = try Data(contentsOf: dir.appendingPathComponent(name + ".jpg"))
            let size = try #require(Self.jpegSize(jpeg), "\(name).jpg is no JPEG")
            #expect(size == (crop["width"]!, crop["height"]!), "\(name): \(size)")
        }
    }

    /// on=zone: each event (zone-events chooses the types) snaps the object's crop; an event whose
    /// object is not on the frame snaps the whole frame. The JSON carries the event.
    @Test func zoneEventsSnapTheirObjectOrTheFrame() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let frames = (0..<4).map { _ in [Self.face(20, 20, id: 7)] }
        let events: [Int: [FrameEvent]] = [
            1: [FrameEvent(type: "entered", zone: "shop", objectId: 7, label: "face")],
            2: [FrameEvent(type: "crossed", zone: "door", objectId: 7, label: "face", direction: "in")],
            3: [FrameEvent(type: "left", zone: "shop", objectId: 3, label: "face")],   // object 3 is gone
        ]
        let driver = try Self.run(["on": .string("zone"), "zone-events": .string("entered,left"), "what": .string("crop"),
                                   "path": .string(dir.path + "/{event}-{id}.jpg")], frames: frames, events: events)
        #expect(driver.stage.summary?.hasPrefix("2 snapshots written (") == true, "\(driver.stage.summary ?? "")")
        let records = try Self.records(dir)
        #expect(Set(records.keys) == ["entered-7.json", "left-frame.json"], "\(records.keys)")
        let entered = try #require(records["entered-7.json"])
        #expect(entered["object_id"] as? Int == 7 && entered["crop"] != nil)
        #expect((entered["events"] as? [[String: Any]])?.first?["zone"] as? String == "shop")
        let left = try #require(records["left-frame.json"])
        #expect(left["crop"] == nil && left["object_id"] == nil && left["width"] as? Int == Self.w, "\(left)")
        let jpeg = try Data(contentsOf: dir.appendingPathComponent("left-frame.jpg"))
        #expect(Self.jpegSize(jpeg).map { $0 == (Self.w, Self.h) } == true)
    }

    /// on=track: each id once; several triggers on one frame make one frame picture (what=frame).
    @Test func newIdsAreSnappedOnceAndOneFramePictureTakesThemAll() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let frames: [[RegionOfInterest]] = [
            [Self.face(5, 5)],                                      // untracked: no trigger
            [Self.face(5, 5, id: 1), Self.face(30, 5, id: 2)],      // two new ids: one frame picture
            [Self.face(6, 5, id: 1), Self.face(31, 5, id: 2)],
            [Self.face(7, 5, id: 1), Self.face(30, 30, id: 3, label: "cat")],   // a new id
        ]
        let driver = try Self.run(["on": .string("track,label"), "path": .string(dir.path + "/{frame}-{id}-{label}-{event}.jpg")], frames: frames)
        #expect(driver.stage.summary?.hasPrefix("3 snapshots written (") == true, "\(driver.stage.summary ?? "")")
        let records = try Self.records(dir)
        // Frame 0: face appears (label). Frame 1: ids 1 and 2 (track). Frame 3: id 3, a cat (both).
        #expect(Set(records.keys) == ["0-frame-face-label.json", "1-frame-face-track.json", "3-frame-cat-track+label.json"], "\(records.keys)")
        #expect(records["3-frame-cat-track+label.json"]?["trigger"] as? [String] == ["track", "label"])
        #expect((records["1-frame-face-track.json"]?["detections"] as? [[String: Any]])?.compactMap { $0["object_id"] as? Int } == [1, 2])
    }

    /// A name already taken is never overwritten: -2, -3… are added (the JSON's name too).
    @Test func existingFilesAreNeverOverwritten() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let mine = Data("not a picture\n".utf8)
        try mine.write(to: dir.appendingPathComponent("same.jpg"))
        // 10 frames at 30 fps (StageDriver: 33 333 333 ns apart), interval 0.09 s: frames 0, 3, 6, 9.
        let driver = try Self.run(["on": .string("interval"), "interval": .double(0.09), "path": .string(dir.path + "/same.jpg")],
                                  frames: Array(repeating: [], count: 10))
        #expect(driver.stage.summary?.hasPrefix("4 snapshots written (") == true, "\(driver.stage.summary ?? "")")
        #expect(try Data(contentsOf: dir.appendingPathComponent("same.jpg")) == mine)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(names == ["same-2.jpg", "same-2.json", "same-3.jpg", "same-3.json", "same-4.jpg", "same-4.json", "same-5.jpg", "same-5.json", "same.jpg"], "\(names)")
        #expect(try Self.records(dir).values.compactMap { $0["frame"] as? Int }.sorted() == [0, 3, 6, 9])
    }

    /// Sizes with a unit (powers of 1000) and beyond GObject's 2^31 are accepted.
    @Test func folderLimitsAreAcceptedWithTheirUnit() throws {
        for text in ["0", "20000", "500K", "1.5g", "5G"] {
            #expect(throws: Never.self) { _ = try StageDriver(SnapshotStage.self, settings: ["max-folder-bytes": .string(text), "path": .string(NSTemporaryDirectory() + "{n}.jpg")]) }
        }
    }

    @Test func badSettingsNameTheProperty() throws {
        let cases: [([String: PropertyValue], String)] = [
            (["on": .string("track,motion")], "property on=track,motion: 'motion' is not a trigger; the triggers are track, zone, label, interval"),
            (["on": .string(" , ")], "property on is empty: name one or more of track, zone, label, interval"),
            (["path": .string("/tmp/x/{when}.jpg")], "property path=/tmp/x/{when}.jpg: unknown field {when}"),
            (["path": .string("/tmp/x/shot.png")], "property path=/tmp/x/shot.png must name a .jpg (or .jpeg) file"),
            (["zone-events": .string("crossed")], "property zone-events is for on=zone (on=track)"),
            (["max-folder-bytes": .string("lots")], "property max-folder-bytes=lots is not a size: write bytes, or a number with K, M or G"),
        ]
        for (settings, message) in cases {
            #expect {
                _ = try StageDriver(SnapshotStage.self, settings: settings)
            } throws: { error in
                (error as? StageError)?.message.hasPrefix(message) == true
            }
        }
    }
}

extension SnapshotStageTests {
    /// Live frames (with an age) never wait for the writer: a burst of 50 snapshots, far faster
    /// than jpegenc, is written or skipped — each counted once, and the first four (the places
    /// of the queue) always written.
    @Test func liveFramesNeverWaitAndEverySnapshotIsCounted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-unit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var settings = SnapshotStage.Settings()
        settings.on = "interval"
        settings.interval = 0.01
        settings.path = dir.path + "/{n}.jpg"
        let stage = try SnapshotStage(settings: settings)
        let format = VideoFormat.packed("BGRx", width: Self.w, height: Self.h)
        try stage.formatChanged(format)
        for n in 0..<50 {
            let frame = Frame(format: format, pts: UInt64(n) * 100_000_000, duration: nil, index: n,
                              pixels: MemoryPixels(bytes: Self.frame), ageOnArrival: 1_000_000)
            #expect(stage.process(frame) == .forward)
        }
        stage.streamEnded()
        let summary = try #require(stage.summary)
        let numbers = summary.split(separator: " ").compactMap { Int($0) }
        // "W snapshots written (…), 0 suppressed by min-gap, S skipped (busy), 0 deleted …"
        try #require(numbers.count == 4, "\(summary)")
        #expect(numbers[0] >= 4 && numbers[0] + numbers[2] == 50 && numbers[1] == 0, "\(summary)")
        #expect(try Self.records(dir).count == numbers[0])
    }
}
