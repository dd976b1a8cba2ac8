import Foundation
import Testing

/// lensoverlay and lensmetadata, the drawing and the JSON Lines as stages of their own after a
/// detector that only attaches regions (`lensdetect draw=false`), through the built binary on
/// the astronaut photo (DetectTests' reference face: x 179.3, y 81.7, 92.1 wide).
@Suite(.serialized) struct RegionStagesTests {
    static let source = "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze num-buffers=3 ! videoconvert ! video/x-raw,format=RGB"
    static let side = 512

    func run(_ spec: String) throws -> CLI.Result {
        let r = try CLI.run(["run", "-q", spec], timeout: 60)
        #expect(r.status == 0, "\(spec): \(r.stderr)")
        return r
    }

    static func lines(_ path: String) throws -> [[String: Any]] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    /// Mean absolute difference of two RGB frames (the first of each file) over a rectangle.
    static func difference(_ a: [UInt8], _ b: [UInt8], x0: Int, y0: Int, x1: Int, y1: Int) -> Double {
        var total = 0, count = 0
        for y in max(0, y0)..<min(side, y1) {
            for x in max(0, x0)..<min(side, x1) {
                for c in 0..<3 {
                    let i = (y * side + x) * 3 + c
                    total += abs(Int(a[i]) - Int(b[i]))
                    count += 1
                }
            }
        }
        return Double(total) / Double(max(1, count))
    }

    @Test func overlayAndMetadataAfterADetectorThatDoesNotDraw() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.rgb").path, output = dir.appendingPathComponent("out.rgb").path
        let jsonl = dir.appendingPathComponent("m.jsonl").path
        _ = try run("\(Self.source) ! filesink location=\(input)")
        _ = try run("\(Self.source) ! lensdetect model=Models/face-short-range.json draw=false ! lensoverlay ! lensmetadata location=\(jsonl) ! filesink location=\(output)")
        let lines = try Self.lines(jsonl)
        #expect(lines.count == 3)
        let f = DetectTests.faceInPhoto
        for (i, line) in lines.enumerated() {
            #expect(line["schema_version"] as? Int == 4 && line["frame"] as? Int == i && line["width"] as? Int == Self.side && line["height"] as? Int == Self.side)
            let detections = try #require(line["detections"] as? [[String: Any]])
            try #require(detections.count == 1, "\(line)")
            let d = detections[0]
            #expect(d["label"] as? String == "face" && d["label_id"] as? Int == 0 && d["object_id"] as? Int == -1 && d["attributes"] == nil, "\(d)")
            let x = try #require(d["x"] as? Double), y = try #require(d["y"] as? Double), w = try #require(d["width"] as? Double)
            #expect(abs(x - f.x) <= 1.5 && abs(y - f.y) <= 1.5 && abs(w - f.size) <= 2, "\(d)")
            #expect((d["keypoints"] as? [[Double]])?.count == 6, "\(d)")
        }
        // The frames go on unchanged but for the drawing: the box's edges changed, the rest not.
        let a = [UInt8](try Data(contentsOf: URL(fileURLWithPath: input))), b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: output)))
        #expect(a.count == 3 * Self.side * Self.side * 3 && b.count == a.count)
        let top = Self.difference(a, b, x0: 174, y0: 76, x1: 277, y1: 86), bottom = Self.difference(a, b, x0: 174, y0: 169, x1: 277, y1: 179)
        let left = Self.difference(a, b, x0: 174, y0: 76, x1: 184, y1: 179), right = Self.difference(a, b, x0: 267, y0: 76, x1: 277, y1: 179)
        let far = Self.difference(a, b, x0: 380, y0: 380, x1: 500, y1: 500)
        #expect(min(top, bottom, left, right) > 4 && far == 0, "edges \(top) \(bottom) \(left) \(right), far \(far)")
    }

    /// lensdetect's `draw` and `metadata` are shortcuts through the same code: the same pixels
    /// as `draw=false ! lensoverlay` (its colour, no keypoints, as lensdetect always drew) and the
    /// same lines as `lensmetadata`.
    @Test func lensdetectShortcutsAreTheStages() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let p = dir.path
        _ = try run("\(Self.source) ! lensdetect model=Models/face-short-range.json metadata=\(p)/a.jsonl ! filesink location=\(p)/a.rgb")
        _ = try run("\(Self.source) ! lensdetect model=Models/face-short-range.json draw=false ! lensoverlay color=#00ff00 keypoints=false ! lensmetadata location=\(p)/b.jsonl ! filesink location=\(p)/b.rgb")
        let a = try Data(contentsOf: URL(fileURLWithPath: "\(p)/a.rgb")), b = try Data(contentsOf: URL(fileURLWithPath: "\(p)/b.rgb"))
        #expect(a.count == 3 * Self.side * Self.side * 3 && a == b, "the shortcut drew other pixels than lensoverlay")
        let ja = try String(contentsOfFile: "\(p)/a.jsonl", encoding: .utf8), jb = try String(contentsOfFile: "\(p)/b.jsonl", encoding: .utf8)
        #expect(ja.split(separator: "\n").count == 3 && ja == jb, "\(ja)\nvs\n\(jb)")
    }

    @Test func badSettingsAreNamed() throws {
        let cases = [
            ("lensoverlay color=blue", "property color=blue is not a #rrggbb colour, class or id"),
            ("lensmetadata location=/nonexistent/dir/m.jsonl", "cannot write metadata file /nonexistent/dir/m.jsonl"),
            ("lensmetadata location=\"\"", "property location is empty"),
        ]
        for (stage, message) in cases {
            let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=2 ! video/x-raw,format=RGB ! \(stage) ! fakesink"], timeout: 30)
            #expect(r.status == 1 && r.stderr.contains(message), "\(stage): \(r.stderr)")
        }
    }
}
