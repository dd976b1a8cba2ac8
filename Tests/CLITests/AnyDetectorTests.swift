import Foundation
import Testing

/// The yolov8, yolov5 and ssd families through real pipelines: models made at test time by
/// tools/make_test_detector.py (constant outputs encoding exactly two boxes, a near-duplicate
/// of each and decoys), run by OpenVINO inside lensdetect on a videotestsrc, read back from
/// the JSON Lines it writes.
@Suite(.serialized) struct AnyDetectorTests {
    /// The two boxes every model encodes, in model-input pixels: IoU 0.8 with each other,
    /// different classes, so per-class suppression keeps both.
    static let boxes = "0:0.9:60,40,200,220;2:0.8:70,50,210,232"

    struct Region: Equatable { var label: String; var labelId: Int; var x, y, width, height: Double }

    /// A model of `family` in a fresh folder (its model.json), made with the pinned onnx.
    static func make(_ family: String, classes: Int = 3, extra: [String] = []) throws -> URL {
        let dir = try scratchDirectory()
        let r = try ImportTests.spawn("python3", ["tools/make_test_detector.py", "--family", family, "--input", "320x320", "--classes", String(classes),
                                                   "--boxes", boxes, "--out", dir.path] + extra)
        try #require(r.status == 0, "make_test_detector.py \(family): \(r.stderr)")
        return dir
    }

    /// lensdetect with `manifest` on two 320×320 test-pattern frames: the exit and every frame's regions.
    static func detect(_ manifest: String, properties: String = "") throws -> (status: Int32, stderr: String, frames: [[Region]]) {
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=2 ! video/x-raw,format=RGB,width=320,height=320 " +
                             "! lensdetect model=\(manifest) precision=f32 metadata=- \(properties) ! fakesink"])
        let frames = try r.stdout.split(separator: "\n").map { line -> [Region] in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require(object["detections"] as? [[String: Any]]).map { d in
                Region(label: d["label"] as? String ?? "?", labelId: d["label_id"] as? Int ?? -2, x: d["x"] as? Double ?? -1,
                       y: d["y"] as? Double ?? -1, width: d["width"] as? Double ?? -1, height: d["height"] as? Double ?? -1)
            }
        }
        return (r.status, r.stderr, frames)
    }

    static func expected(_ first: String, _ second: String) -> [Region] {
        [Region(label: first, labelId: 0, x: 60, y: 40, width: 140, height: 180), Region(label: second, labelId: 2, x: 70, y: 50, width: 140, height: 182)]
    }

    @Test(arguments: [("yolov8", ["--layout", "channels-first"]), ("yolov8", ["--layout", "boxes-first"]), ("yolov5", []),
                      ("ssd", ["--ssd-form", "detection-output"]), ("ssd", ["--ssd-form", "four-outputs"])])
    func eachFamilyGivesExactlyItsBoxes(_ family: String, _ extra: [String]) throws {
        let dir = try Self.make(family, extra: extra)
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try Self.detect(dir.appendingPathComponent("model.json").path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.frames.count == 2)
        for frame in r.frames { #expect(frame == Self.expected("class0", "class2"), "\(family) \(extra)") }
    }

    /// COCO's names from the labels file beside the manifest; `classes=` keeps the named class;
    /// `class-agnostic=true` lets the stronger box suppress the other class's.
    @Test func cocoLabelsAndTheClassesFilter() throws {
        let dir = try Self.make("yolov8", classes: 80)
        defer { try? FileManager.default.removeItem(at: dir) }
        let manifest = dir.appendingPathComponent("model.json").path
        let all = try Self.detect(manifest)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.frames.first == Self.expected("person", "car"))

        let cars = try Self.detect(manifest, properties: "classes=car")
        #expect(cars.status == 0, "\(cars.stderr)")
        #expect(cars.frames.count == 2 && cars.frames.allSatisfy { $0 == [Self.expected("person", "car")[1]] }, "\(cars.frames)")
        let two = try Self.detect(manifest, properties: "classes=\"car, person\"")
        #expect(two.frames.first == Self.expected("person", "car"), "\(two.stderr)")

        let agnostic = try Self.detect(manifest, properties: "class-agnostic=true")
        #expect(agnostic.frames.first == [Self.expected("person", "car")[0]], "\(agnostic.stderr)")

        let unknown = try Self.detect(manifest, properties: "classes=dragon")
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("classes: 'dragon' is not a label of this model; its labels: person, bicycle, car,"), "\(unknown.stderr)")
    }

    /// A manifest that does not fit its model stops the run with one message naming the
    /// manifest and what does not fit.
    @Test func aManifestThatDoesNotFitItsModelFails() throws {
        let dir = try Self.make("yolov8")
        defer { try? FileManager.default.removeItem(at: dir) }
        let manifest = dir.appendingPathComponent("model.json")
        func variant(_ name: String, _ change: (inout [String: Any]) -> Void) throws -> String {
            var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any])
            change(&object)
            let url = dir.appendingPathComponent("\(name).json")
            try JSONSerialization.data(withJSONObject: object).write(to: url)
            return url.path
        }
        let cases = [
            // A YOLOv8 output read as YOLOv5's: [1, 7, 2100] is not [1, N, 8].
            (try variant("family") { $0["decoder"] = ["name": "yolov5", "parameters": [:] as [String: Any]] },
             "yolov5: no output of the model ('output0' [1, 7, 2100]) is [1, N, 8] (4 box values, objectness and 3 class scores per box)"),
            (try variant("count") { $0["decoder"] = ["name": "yolov8", "parameters": ["classes": 5]] },
             "decoder.parameters.classes is 5 but the manifest has 3 labels"),
            // Two labels for a three-class model: 6 values per box, the output has 7.
            (try variant("labels") { $0["labels"] = ["a", "b"]; $0["decoder"] = ["name": "yolov8", "parameters": [:] as [String: Any]] },
             "yolov8: no output of the model ('output0' [1, 7, 2100]) is [1, 6, N] or [1, N, 6] (4 box values and 2 class scores per box)"),
        ]
        for (path, message) in cases {
            let r = try Self.detect(path)
            #expect(r.status != 0 && r.frames.isEmpty, "\(path): \(r.stderr)")
            let errors = r.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
            #expect(errors == ["error: lensdetect0: \(path): \(message)"], "\(r.stderr)")
        }
    }
}
