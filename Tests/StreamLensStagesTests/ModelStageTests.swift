import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensStages
import StreamLensTesting
import Testing

/// The model stages alone, frames in memory, real models (OpenVINO, f32): what the bridge
/// would do with them, without a pipeline.
@Suite(.serialized) struct ModelStageTests {
    init() {
        _ = FileManager.default.changeCurrentDirectoryPath(packageRoot.path)
        StandardBackends.register() // the stages' models run on OpenVINO here
    }

    /// lensdetect finds the astronaut's face (DetectTests' reference box: x 179.3, y 81.7, 92.1
    /// wide) with two infer requests in flight: frames wait for theirs and leave in order.
    @Test func detectorFindsTheFaceThroughTheAsynchronousPath() throws {
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/astronaut.png").path, width: 512, height: 512)
        let driver = try StageDriver(DetectStage.self, settings: ["model": .string("Models/face-short-range.json"), "precision": .string("f32"),
                                                                 "draw": .bool(false), "nireq": .int(2)])
        try driver.start(.packed("RGB", width: 512, height: 512))
        var out: [StageDriver<DetectStage>.Delivered] = []
        for _ in 0..<6 { out += driver.push(bytes) }
        out += driver.finish()
        #expect(out.map(\.index) == Array(0..<6))
        for frame in out {
            #expect(frame.outcome == .forward)
            try #require(frame.pixels.regions.count == 1, "\(frame.pixels.regions)")
            let r = frame.pixels.regions[0]
            #expect(r.label == "face" && r.labelId == 0 && r.objectId == -1 && r.keypoints.count == 6)
            #expect(abs(r.x - 179.3) <= 1.5 && abs(r.y - 81.7) <= 1.5 && abs(r.width - 92.1) <= 2, "\(r)")
            #expect(frame.pixels.bytes == bytes, "draw=false changed the pixels")
        }
    }

    /// Binding outputs is the decoder's: by the manifest's names, by shape when renamed, and a
    /// model that does not fit is named.
    @Test func decoderBindsOutputsByNameOrShape() throws {
        let manifest = try ModelManifest.load(path: "Models/face-short-range.json")
        var decoder = try manifest.makeDecoder()
        #expect(try decoder.bind([ModelOutput(name: "classificators", shape: [1, 896, 1]), ModelOutput(name: "regressors", shape: [1, 896, 16])]) == [1, 0])
        #expect(try decoder.bind([ModelOutput(name: "Identity_1", shape: [1, 896, 1]), ModelOutput(name: "Identity", shape: [1, 896, 16])]) == [1, 0])
        #expect(throws: StageError.self) { try decoder.bind([ModelOutput(name: "a", shape: [1, 2304, 16]), ModelOutput(name: "b", shape: [1, 2304, 1])]) }
        #expect(DecoderRegistry.detector(named: "blazeface") != nil && DecoderRegistry.names == ["blazeface", "centerface", "yolov8", "yolov8-seg", "yolov5", "ssd", "segmentation", "db", "image", "classifier", "landmarks", "ctc"])
    }

    /// lensstylize's live changes: a model that is not there is refused, one that does not load
    /// is set back; another style loads in the background and replaces the current one between frames.
    @Test func stylizerReloadsRefusesAndRestores() throws {
        let (w, h) = (160, 120)
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/chelsea.png").path, width: w, height: h)
        let driver = try StageDriver(StylizeStage.self, settings: ["model": .string("Models/mosaic.json"), "precision": .string("f32"),
                                                                  "inference-size": .string("128")])
        try driver.start(.packed("RGB", width: w, height: h))
        var mosaic = driver.push(bytes)
        mosaic += driver.finish()
        try #require(mosaic.count == 1 && mosaic[0].outcome == .forward)
        #expect(meanDifference(mosaic[0].pixels.bytes, bytes) > 20, "mosaic barely changed the picture")

        // A manifest that is not there is refused by the check, before anything is set.
        #expect(throws: StageError("model manifest Models/nope.json not found")) { try driver.change(["model": .string("Models/nope.json")]) }
        #expect(driver.settings.model == "Models/mosaic.json")
        // One that is there but whose network does not load: tried in the background, set back.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sl-broken-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("not a network".utf8).write(to: dir.appendingPathComponent("mosaic.onnx"))
        let broken = dir.appendingPathComponent("broken.json").path
        try FileManager.default.copyItem(atPath: "Models/mosaic.json", toPath: broken)
        try driver.change(["model": .string(broken)])
        let refused = driver.pushUntilNotice(containing: "keeping Models/mosaic.json", bytes: bytes)
        #expect(refused.found, "\(driver.notices.map(\.text))")
        #expect(driver.restored["model"] == .string("Models/mosaic.json") && driver.settings.model == "Models/mosaic.json")
        let stillMosaic = refused.delivered + driver.finish()
        #expect(stillMosaic.allSatisfy { $0.pixels.bytes == mosaic[0].pixels.bytes }, "a refused model changed the output")

        try driver.change(["model": .string("Models/waves.json")])
        let loaded = driver.pushUntilNotice(containing: "now using Models/waves.json", bytes: bytes)
        #expect(loaded.found, "\(driver.notices.map(\.text))")
        _ = driver.finish()
        let waves = driver.push(bytes) + driver.finish()
        try #require(waves.count == 1)
        #expect(meanDifference(waves[0].pixels.bytes, mosaic[0].pixels.bytes) > 5, "waves looks like mosaic")

        try driver.change(["strength": .double(0)])
        let untouched = driver.push(bytes) + driver.finish()
        #expect(untouched.count == 1 && untouched[0].pixels.bytes == bytes, "strength 0 changed the frame")
    }
}
