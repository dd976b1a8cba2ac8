import Foundation
import Testing

/// lensstylize limited to regions of interest (`regions=inside|outside`, `labels`, `feather`)
/// after a detector that only attaches them (`lensdetect draw=false`), through the built binary
/// on the astronaut photo; the boxes read back from lensmetadata in the same pipeline.
@Suite(.serialized) struct StylizeRegionsTests {
    static let side = 512
    static let source = "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze num-buffers=2 ! videoconvert ! video/x-raw,format=RGB"
    static let detect = "lensdetect model=Models/face-short-range.json precision=f32 draw=false"
    static let stylize = "lensstylize model=Models/mosaic.json precision=f32"

    struct Output {
        var frames: [[UInt8]]
        var boxes: [[(x0: Double, y0: Double, x1: Double, y1: Double)]]
        var stderr: String
    }

    /// `source ! middle ! filesink` (raw RGB); with `detector`, lensdetect and lensmetadata
    /// before `middle`, their boxes per frame.
    static func run(_ middle: String?, detector: Bool = true) throws -> Output {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.rgb").path, jsonl = dir.appendingPathComponent("m.jsonl").path
        let spec = [source, detector ? "\(detect) ! lensmetadata location=\(jsonl)" : nil, middle, "filesink location=\(out)"]
            .compactMap { $0 }.joined(separator: " ! ")
        let r = try CLI.run(["run", spec], timeout: 120)
        #expect(r.status == 0, "\(spec): \(r.stderr)")
        let data = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
        let size = side * side * 3
        let frames = stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<$0 + size]) }
        var boxes: [[(x0: Double, y0: Double, x1: Double, y1: Double)]] = []
        if detector {
            for line in try RegionStagesTests.lines(jsonl) {
                let detections = try #require(line["detections"] as? [[String: Any]])
                boxes.append(try detections.map { d in
                    let x = try #require(d["x"] as? Double), y = try #require(d["y"] as? Double)
                    let w = try #require(d["width"] as? Double), h = try #require(d["height"] as? Double)
                    return (x, y, x + w, y + h)
                })
            }
        }
        return Output(frames: frames, boxes: boxes, stderr: r.stderr)
    }

    /// Where a pixel lies against the boxes (JSON Lines round to 0.1 px: a pixel's margin).
    enum Place { case outside, deepInside, between }
    static func place(_ x: Int, _ y: Int, _ boxes: [(x0: Double, y0: Double, x1: Double, y1: Double)], feather: Int) -> Place {
        let cx = Double(x) + 0.5, cy = Double(y) + 0.5
        var place = Place.outside
        for b in boxes {
            let d = min(cx - b.x0, b.x1 - cx, cy - b.y0, b.y1 - cy)
            if d > Double(feather) + 1 { return .deepInside }
            if d > -1 { place = .between }
        }
        return place
    }

    /// Per frame: whether every `outside` pixel is identical, and the mean absolute difference
    /// over the pixels deep inside (and over the rest).
    static func compare(_ a: [UInt8], _ b: [UInt8], boxes: [(x0: Double, y0: Double, x1: Double, y1: Double)], feather: Int)
        -> (outsideChanged: Int, insideChanged: Int, outside: Double, inside: Double) {
        var changed = (outside: 0, inside: 0), total = (outside: 0, inside: 0), count = (outside: 0, inside: 0)
        for y in 0..<side { for x in 0..<side {
            let p = place(x, y, boxes, feather: feather)
            guard p != .between else { continue }
            let i = (y * side + x) * 3
            let d = abs(Int(a[i]) - Int(b[i])) + abs(Int(a[i + 1]) - Int(b[i + 1])) + abs(Int(a[i + 2]) - Int(b[i + 2]))
            if p == .outside { total.outside += d; count.outside += 3; changed.outside += d > 0 ? 1 : 0 }
            else { total.inside += d; count.inside += 3; changed.inside += d > 0 ? 1 : 0 }
        } }
        return (changed.outside, changed.inside, Double(total.outside) / Double(max(1, count.outside)), Double(total.inside) / Double(max(1, count.inside)))
    }

    /// regions=inside: only the face is painted, the rest of the frame is the original bit for
    /// bit; regions=outside: the reverse.
    @Test func insideAndOutsideTheDetectedFace() throws {
        let original = try Self.run(nil)
        try #require(original.frames.count == 2 && original.boxes.count == 2, "\(original.stderr)")
        for frameBoxes in original.boxes { try #require(frameBoxes.count == 1, "one face: \(original.boxes)") }
        for (regions, feather) in [("inside", 8), ("outside", 8), ("inside", 0)] {
            let styled = try Self.run("\(Self.stylize) regions=\(regions) feather=\(feather)")
            try #require(styled.frames.count == 2, "\(styled.stderr)")
            #expect(styled.boxes.map { $0.map { [$0.x0, $0.y0, $0.x1, $0.y1] } } == original.boxes.map { $0.map { [$0.x0, $0.y0, $0.x1, $0.y1] } })
            for (i, frame) in styled.frames.enumerated() {
                let c = Self.compare(original.frames[i], frame, boxes: styled.boxes[i], feather: feather)
                if regions == "inside" {
                    #expect(c.outsideChanged == 0 && c.inside > 10, "regions=inside feather=\(feather), frame \(i): \(c)")
                } else {
                    #expect(c.insideChanged == 0 && c.outside > 10, "regions=outside feather=\(feather), frame \(i): \(c)")
                }
            }
        }
    }

    /// `labels` keeps only regions of those labels: none of the face model's `face` is a
    /// `person`, so inside nothing is painted (the model not run) and outside everything is,
    /// as with regions=all; `labels=face` is every region here.
    @Test func labelsChooseTheRegions() throws {
        let original = try Self.run(nil)
        let all = try Self.run(Self.stylize)
        let insidePerson = try Self.run("\(Self.stylize) regions=inside labels=person")
        let outsidePerson = try Self.run("\(Self.stylize) regions=outside labels=\"person, cat\"")
        let insideFace = try Self.run("\(Self.stylize) regions=inside labels=face")
        let inside = try Self.run("\(Self.stylize) regions=inside")
        for o in [all, insidePerson, outsidePerson, insideFace, inside] { try #require(o.frames.count == 2, "\(o.stderr)") }
        #expect(insidePerson.frames == original.frames, "no person: the frames go on untouched")
        #expect(insidePerson.stderr.contains("2 frames without a region to stylize passed untouched"), "\(insidePerson.stderr)")
        #expect(outsidePerson.frames == all.frames, "outside no region: the whole frame")
        #expect(insideFace.frames == inside.frames)
        #expect(inside.frames != original.frames)
    }

    /// Without a detector before it there is no region: inside passes the frames on untouched.
    @Test func noRegionsNoChange() throws {
        let original = try Self.run(nil, detector: false)
        let inside = try Self.run("\(Self.stylize) regions=inside", detector: false)
        try #require(original.frames.count == 2 && inside.frames.count == 2, "\(inside.stderr)")
        #expect(inside.frames == original.frames)
    }

    @Test func badSettingsAreNamed() throws {
        let cases = [
            ("lensstylize regions=sideways", "property regions=sideways is not one of all, inside, outside"),
            ("lensstylize regions=inside feather=-2", "property feather=-2 is out of range 0…1000"),
        ]
        for (stage, message) in cases {
            let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=2 ! video/x-raw,format=RGB ! \(stage) ! fakesink"], timeout: 30)
            #expect(r.status == 1 && r.stderr.contains(message), "\(stage): \(r.stderr)")
        }
    }
}
