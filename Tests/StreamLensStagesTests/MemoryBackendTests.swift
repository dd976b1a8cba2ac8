import Foundation
import StreamLensCore
import StreamLensInference
import StreamLensStages
import StreamLensTesting
import Testing

@Suite struct MemoryBackendTests {
    let folder: URL
    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-memory-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    func manifest(_ name: String, _ json: String) throws -> String {
        let path = folder.appendingPathComponent(name).path
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A grey frame with a white rectangle (RGB).
    static func frame(width: Int, height: Int, white: (x: Int, y: Int, w: Int, h: Int)) -> [UInt8] {
        var bytes = [UInt8](repeating: 40, count: width * height * 3)
        for y in white.y..<(white.y + white.h) { for x in white.x..<(white.x + white.w) { for c in 0..<3 { bytes[(y * width + x) * 3 + c] = 255 } } }
        return bytes
    }

    /// A "detector" that reports the bounding box of the bright pixels of its input as one
    /// DetectionOutput row (SSD form, 0…1 of the input).
    static let brightBox: MemoryBackend.Network = { tensor, input in
        let (w, h) = (input.width, input.height)
        var box = (x0: w, y0: h, x1: -1, y1: -1)
        for y in 0..<h { for x in 0..<w where tensor[(y * w + x) * 3] > 0.8 {
            box = (min(box.x0, x), min(box.y0, y), max(box.x1, x + 1), max(box.y1, y + 1))
        } }
        let row: [Float] = box.x1 < 0 ? [-1, 0, 0, 0, 0, 0, 0]
            : [0, 0, 0.9, Float(box.x0) / Float(w), Float(box.y0) / Float(h), Float(box.x1) / Float(w), Float(box.y1) / Float(h)]
        return [TensorData(name: "detections", shape: [1, 1, 1, 7], values: row)]
    }

    /// lensdetect letterboxes a 320x180 frame into the 300x300 input, the network finds the
    /// white rectangle there, and the stage maps its box back to the frame's pixels.
    @Test func lensdetectRunsOnAnInMemoryBackend() throws {
        let path = try manifest("bright.json", """
            {"schema_version": 1, "name": "bright", "model": "bright.bin",
             "input": {"width": 300, "height": 300, "color_order": "RGB", "value_range": [0, 1], "layout": "NHWC"},
             "crop": "letterbox", "decoder": {"name": "ssd", "parameters": {"min_score": 0.5}}, "labels": ["bright"], "licence": "a network of this test, in Swift"}
            """)
        let backend = MemoryBackend(outputs: { _ in [("detections", [1, 1, 1, 7])] }, network: Self.brightBox)
        let driver = try StageDriver(DetectStage.self, settings: ["model": .string(path), "draw": .bool(false)]) {
            try DetectStage(settings: $0, models: backend.loader())
        }
        try driver.start(.packed("RGB", width: 320, height: 180))
        let white = (x: 200, y: 60, w: 80, h: 40)
        var out = driver.push(Self.frame(width: 320, height: 180, white: white))
        out += driver.push(Self.frame(width: 320, height: 180, white: (20, 100, 30, 30)))
        out += driver.finish()
        try #require(out.count == 2 && backend.loads.count == 1)
        for (frame, box) in zip(out, [white, (x: 20, y: 100, w: 30, h: 30)]) {
            try #require(frame.pixels.regions.count == 1, "\(frame.pixels.regions)")
            let r = frame.pixels.regions[0]
            #expect(r.label == "bright" && abs((r.confidence ?? 0) - 0.9) < 1e-6)
            // One input pixel is 320/300 frame pixels: the box is found within two of them.
            #expect(abs(r.x - Double(box.x)) <= 2.2 && abs(r.y - Double(box.y)) <= 2.2, "\(r)")
            #expect(abs(r.width - Double(box.w)) <= 2.2 && abs(r.height - Double(box.h)) <= 2.2, "\(r)")
        }
        #expect(driver.stage.summary?.contains("in memory") == true, "\(driver.stage.summary ?? "")")
    }

    /// lensclassify crops each region, and the network's class follows the crop's brightness.
    @Test func lensclassifyRunsOnAnInMemoryBackend() throws {
        let path = try manifest("brightness.json", """
            {"schema_version": 1, "name": "brightness", "model": "brightness.bin",
             "input": {"width": 32, "height": 32, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"},
             "decoder": {"name": "classifier", "parameters": {"attribute": "brightness", "activation": "none"}}, "labels": ["dark", "bright"], "licence": "a network of this test, in Swift"}
            """)
        let backend = MemoryBackend(outputs: { _ in [("scores", [1, 2])] }) { tensor, _ in
            let mean = tensor.reduce(0, +) / Float(tensor.count)
            return [TensorData(name: "scores", shape: [1, 2], values: [1 - mean, mean])]
        }
        let driver = try StageDriver(ClassifyStage.self, settings: ["model": .string(path)]) {
            try ClassifyStage(settings: $0, models: backend.loader())
        }
        try driver.start(.packed("RGB", width: 320, height: 180))
        let regions = [RegionOfInterest(label: "thing", labelId: 0, x: 200, y: 60, width: 80, height: 40),
                       RegionOfInterest(label: "thing", labelId: 0, x: 20, y: 100, width: 30, height: 30)]
        var out = driver.push(Self.frame(width: 320, height: 180, white: (200, 60, 80, 40)), regions: regions)
        out += driver.finish()
        try #require(out.count == 1 && out[0].pixels.regions.count == 2)
        let answers = out[0].pixels.regions.map { $0.classifications.first }
        #expect(answers[0]?.name == "brightness" && answers[0]?.label == "bright" && (answers[0]?.confidence ?? 0) > 0.6, "\(answers)")
        #expect(answers[1]?.label == "dark" && (answers[1]?.confidence ?? 0) > 0.8, "\(answers)")
    }

    /// lensstylize: a network that inverts its input, at full strength and halfway.
    @Test func lensstylizeRunsOnAnInMemoryBackend() throws {
        let path = try manifest("invert.json", """
            {"schema_version": 1, "name": "invert", "model": "invert.bin",
             "input": {"width": 64, "height": 36, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"},
             "crop": "stretch", "decoder": {"name": "image", "parameters": {"color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"}},
             "labels": [], "licence": "a network of this test, in Swift"}
            """)
        let backend = MemoryBackend(outputs: { input in [("image", [1, 3, input.height, input.width])] }) { tensor, input in
            [TensorData(name: "image", shape: [1, 3, input.height, input.width], values: tensor.map { 1 - $0 })]
        }
        let (w, h) = (128, 72)
        let bytes = Self.frame(width: w, height: h, white: (0, 0, 64, 72)) // left half white, right half grey 40
        for (strength, left, right) in [(1.0, 0.0, 215.0), (0.5, 127.5, 127.5)] {
            let driver = try StageDriver(StylizeStage.self, settings: ["model": .string(path), "strength": .double(strength),
                                                                      "inference-size": .string("64x36")]) {
                try StylizeStage(settings: $0, models: backend.loader())
            }
            try driver.start(.packed("RGB", width: w, height: h))
            var out = driver.push(bytes)
            out += driver.finish()
            try #require(out.count == 1 && out[0].outcome == .forward, "\(driver.notices)")
            let px = out[0].pixels.bytes
            // Away from the edge between the halves, where resampling mixes them.
            let l = Double(px[(36 * w + 16) * 3]), r = Double(px[(36 * w + 112) * 3])
            #expect(abs(l - left) <= 3 && abs(r - right) <= 3, "strength \(strength): left \(l), right \(r)")
        }
    }
}
