import Foundation
import Testing

/// lenssnapshot through the built binary: real faces found by lensdetect and tracked by
/// lenstrack, pictures decoded by ffprobe, the folder limit on real files, and its bad inputs
/// (docs/bad-inputs.md rows naming lenssnapshot, run as BadInputTests runs them).
@Suite(.serialized) struct SnapshotTests {
    /// The pairs in a folder: each JSON (decoded) by its picture's file name.
    static func pairs(_ dir: URL) throws -> [String: [String: Any]] {
        var out: [String: [String: Any]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".json") {
            let data = try Data(contentsOf: dir.appendingPathComponent(name))
            guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any], json["stage"] as? String == "lenssnapshot" else { continue }
            out[try #require(json["image"] as? String)] = json
        }
        return out
    }

    /// Width and height of a picture as ffprobe decodes it (nil: not a picture it can decode).
    static func pictureSize(_ path: String) -> (Int, Int)? {
        guard let r = ffprobe(["-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path]) else { return nil }
        let fields = r.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        guard r.status == 0, fields.count == 3, fields[0] == "mjpeg", let w = Int(fields[1]), let h = Int(fields[2]) else { return nil }
        return (w, h)
    }

    static func box(_ region: [String: Any]) -> (x0: Double, y0: Double, x1: Double, y1: Double) {
        let x = region["x"] as? Double ?? .nan, y = region["y"] as? Double ?? .nan
        return (x, y, x + (region["width"] as? Double ?? .nan), y + (region["height"] as? Double ?? .nan))
    }

    static func iou(_ a: (x0: Double, y0: Double, x1: Double, y1: Double), _ b: (x0: Double, y0: Double, x1: Double, y1: Double)) -> Double {
        let w = max(0, min(a.x1, b.x1) - max(a.x0, b.x0)), h = max(0, min(a.y1, b.y1) - max(a.y0, b.y0))
        let union = (a.x1 - a.x0) * (a.y1 - a.y0) + (b.x1 - b.x0) * (b.y1 - b.y0) - w * h
        return union > 0 ? w * h / union : 0
    }

    /// Checks one crop pair: the picture decodes at the crop's size, the crop holds the object's
    /// box (grown by the margin, within the frame); returns the object's id and its box.
    static func checkCrop(_ dir: URL, image: String, json: [String: Any]) throws -> (id: Int, frame: Int, box: (x0: Double, y0: Double, x1: Double, y1: Double)) {
        let crop = try #require(json["crop"] as? [String: Int], "\(json)")
        let id = try #require(json["object_id"] as? Int), frame = try #require(json["frame"] as? Int)
        let size = try #require(pictureSize(dir.appendingPathComponent(image).path), "\(image) does not decode as a JPEG")
        #expect(size.0 == crop["width"] && size.1 == crop["height"], "\(image): \(size), crop \(crop)")
        #expect(json["trigger"] as? [String] == ["track"] && json["width"] as? Int == 640 && json["height"] as? Int == 360, "\(json)")
        let regions = try #require(json["detections"] as? [[String: Any]])
        let region = try #require(regions.first { $0["object_id"] as? Int == id }, "no region #\(id) in \(regions)")
        let b = box(region)
        let (cx, cy, cw, ch) = (Double(crop["x"]!), Double(crop["y"]!), Double(crop["width"]!), Double(crop["height"]!))
        #expect(cx <= b.x0 && cy <= b.y0 && cx + cw >= b.x1 && cy + ch >= b.y1, "crop \(crop) does not hold the box \(b)")
        #expect(cx >= 0 && cy >= 0 && cx + cw <= 640 && cy + ch <= 360, "crop \(crop) leaves the frame")
        return (id, frame, b)
    }

    /// One face moving through the frame, tracked: one new id, so exactly one crop, of that face.
    @Test func aTrackedFaceIsSnappedOnceAsACrop() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try ZoneStagesTests.crossingFaceClip(in: dir), out = dir.appendingPathComponent("faces")
        let spec = "filesrc location=\(clip) ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false " +
            "! lenstrack ! lenssnapshot name=s on=track what=crop path=\(out.path)/%Y%m%d/{id}-{frame}.jpg ! fakesink"
        let r = try CLI.run(["run", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("s: 90 frames in, 90 out") && r.stderr.contains("1 snapshots written ("), "\(r.stderr)")
        // The strftime folder (today's date) was made.
        let days = try FileManager.default.contentsOfDirectory(atPath: out.path)
        try #require(days.count == 1 && days[0].count == 8, "\(days)")
        let folder = out.appendingPathComponent(days[0])
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.count == 2 && files.filter { $0.hasSuffix(".jpg") }.count == 1, "\(files)")
        let pairs = try Self.pairs(folder)
        try #require(pairs.count == 1, "\(files)")
        let (image, json) = pairs.first!
        let shot = try Self.checkCrop(folder, image: image, json: json)
        #expect(image == "\(shot.id)-\(shot.frame).jpg")
        // The clip draws the face's photo at x = -20 + 500 t / 3, y = 100 (frame n at t = n / 30;
        // the face in it about x + 42 … x + 118, y + 40 … y + 120).
        let px = -20 + 500 * Double(shot.frame) / 90
        let drawn = (x0: px + 42, y0: 140.0, x1: px + 118, y1: 220.0)
        #expect(Self.iou(shot.box, drawn) > 0.4, "box \(shot.box) at frame \(shot.frame), the face is at \(drawn)")
    }

    /// Two faces whose paths cross (TrackBlurTests' clip, RGB: a crop's rows are not 4-byte
    /// aligned): two ids, two crops, each of its own face.
    @Test func twoTrackedFacesGiveTwoCropsWithTheirIds() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clip = try TrackBlurTests.crossingClip(in: dir), out = dir.appendingPathComponent("faces")
        let spec = "\(TrackBlurTests.source(clip)) ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false " +
            "! lenstrack ! lenssnapshot name=s on=track what=crop margin=0.1 path=\(out.path)/{label}-{id}.jpg ! fakesink"
        let r = try CLI.run(["run", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("2 snapshots written ("), "\(r.stderr)")
        let pairs = try Self.pairs(out)
        try #require(pairs.count == 2, "\((try? FileManager.default.contentsOfDirectory(atPath: out.path)) ?? [])")
        var ids: [Int] = []
        for (image, json) in pairs {
            let shot = try Self.checkCrop(out, image: image, json: json)
            #expect(image == "face-\(shot.id).jpg")
            ids.append(shot.id)
            // Face A is drawn at y 40 (face ≈ 80…160), face B at y 110 (≈ 150…230): each crop is one of them.
            let a = (x0: TrackBlurTests.xA(shot.frame) + 42, y0: 80.0, x1: TrackBlurTests.xA(shot.frame) + 118, y1: 160.0)
            let b = (x0: TrackBlurTests.xB(shot.frame) + 42, y0: 150.0, x1: TrackBlurTests.xB(shot.frame) + 118, y1: 230.0)
            #expect(max(Self.iou(shot.box, a), Self.iou(shot.box, b)) > 0.4, "box \(shot.box) at frame \(shot.frame)")
        }
        #expect(Set(ids).count == 2, "\(ids)")
    }

    static let testSource = "videotestsrc num-buffers=30 pattern=smpte ! video/x-raw,width=160,height=120,framerate=10/1 ! videoconvert ! video/x-raw,format=BGRx"

    /// 30 frames at 10 fps (3 s) with interval=1: frames 0, 10 and 20 (the first frame, then the
    /// first at or after each further second), full frames. The path is relative (to the run's
    /// folder), its folder one letter (NSString's path methods trapped on that).
    @Test func anIntervalSnapsTheWholeFrameEverySecondOfStreamTime() throws {
        let root = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let dir = root.appendingPathComponent("s")
        let r = try CLI.spawn(CLI.binary, ["run", "\(Self.testSource) ! lenssnapshot name=s on=interval interval=1 path=s/%H%M%S-{frame}.jpg ! fakesink"], in: root)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("3 snapshots written (") && r.stderr.contains("0 suppressed by min-gap, 0 skipped (busy), 0 deleted for max-folder-bytes"), "\(r.stderr)")
        let pairs = try Self.pairs(dir)
        #expect(pairs.values.compactMap { $0["frame"] as? Int }.sorted() == [0, 10, 20], "\(pairs.keys)")
        #expect(pairs.values.compactMap { $0["time"] as? Double }.sorted() == [0, 1, 2])
        for (image, json) in pairs {
            #expect(json["crop"] == nil && json["trigger"] as? [String] == ["interval"], "\(json)")
            let size = try #require(Self.pictureSize(dir.appendingPathComponent(image).path), "\(image)")
            #expect(size == (160, 120), "\(image): \(size)")
        }
    }

    /// interval=0.2 triggers 15 times in 3 s; min-gap=1 lets through the ones a second apart
    /// (0, 1, 2 s) and counts the other 12.
    @Test func minGapSuppressesAndCounts() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try CLI.run(["run", "\(Self.testSource) ! lenssnapshot name=s on=interval interval=0.2 min-gap=1 path=\(dir.path)/{n}.jpg ! fakesink"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("3 snapshots written (") && r.stderr.contains("12 suppressed by min-gap, 0 skipped (busy)"), "\(r.stderr)")
        let pairs = try Self.pairs(dir)
        #expect(Set(pairs.keys) == ["1.jpg", "2.jpg", "3.jpg"] && pairs.values.compactMap { $0["frame"] as? Int }.sorted() == [0, 10, 20], "\(pairs.keys)")
    }

    /// Every frame snapped into a folder limited to about three pairs: the oldest are deleted, the
    /// folder's snapshots stay under the limit, the newest survive; files lenssnapshot did not
    /// write (one named like its pictures, one whose JSON another program wrote) are untouched;
    /// a second run with the same pattern deletes the first run's pairs before its own.
    @Test func maxFolderBytesDeletesTheOldestOwnPairsOnly() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let keep: [String: Data] = [
            "notes.txt": Data("the user's notes\n".utf8),
            "shot-0.jpg": Data(repeating: 0xFF, count: 50_000),
            "shot-99.jpg": Data(repeating: 0xFF, count: 1000),
            "shot-99.json": Data("{\"stage\": \"another-program\", \"pattern\": \"shot-{n}.jpg\", \"image\": \"shot-99.jpg\"}\n".utf8),
        ]
        for (name, data) in keep { try data.write(to: dir.appendingPathComponent(name)) }
        let limit = 20_000
        func ownBytes() throws -> (count: Int, bytes: Int) {
            let pairs = try Self.pairs(dir)
            let bytes = try pairs.keys.reduce(0) { total, image in
                let json = String(image.dropLast(4)) + ".json"
                let a = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(image).path)[.size] as? Int ?? 0
                let b = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(json).path)[.size] as? Int ?? 0
                return total + a + b
            }
            return (pairs.count, bytes)
        }
        let spec = "\(Self.testSource) ! lenssnapshot name=s on=interval interval=0.1 path=\(dir.path)/shot-{n}.jpg max-folder-bytes=20K ! fakesink"
        let first = try CLI.run(["run", spec])
        #expect(first.status == 0, "\(first.stderr)")
        let afterFirst = try ownBytes()
        #expect(afterFirst.count >= 1 && afterFirst.bytes <= limit, "\(afterFirst)")
        #expect(first.stderr.contains("30 snapshots written (") && first.stderr.contains("\(30 - afterFirst.count) deleted for max-folder-bytes"), "\(first.stderr)")
        // The newest survive.
        let names = try Self.pairs(dir).keys.sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
        #expect(names == (30 - afterFirst.count + 1...30).map { "shot-\($0).jpg" }, "\(names)")
        for (name, data) in keep { #expect(FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) == data, "\(name) was changed or deleted") }

        // A pair by its frame and wall time (two runs never share both).
        func moments() throws -> Set<String> { Set(try Self.pairs(dir).values.map { "\($0["frame"] ?? "?") \($0["wall_time"] ?? "?")" }) }
        let firstTimes = try moments()
        let second = try CLI.run(["run", spec])
        #expect(second.status == 0, "\(second.stderr)")
        let afterSecond = try ownBytes()
        #expect(afterSecond.bytes <= limit && afterSecond.count == afterFirst.count, "\(afterSecond)")
        #expect(second.stderr.contains("\(30 - afterSecond.count + afterFirst.count) deleted for max-folder-bytes"), "\(second.stderr)")
        // Only the second run's pairs are left: the first run's were the oldest.
        let secondTimes = try moments()
        #expect(firstTimes.count == afterFirst.count && secondTimes.count == afterSecond.count && firstTimes.isDisjoint(with: secondTimes),
                "\(firstTimes) \(secondTimes)")
        for (name, data) in keep { #expect(FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) == data, "\(name) was changed or deleted") }
    }

    /// The catalogue's lenssnapshot rows (docs/bad-inputs.md), run as BadInputTests runs every row.
    @Test(arguments: BadInputTests.rows.filter { $0.arguments.joined(separator: " ").contains("lenssnapshot") })
    func snapshotBadInputs(_ row: CatalogueRow) throws {
        try BadInputTests().badInput(row)
    }
}
