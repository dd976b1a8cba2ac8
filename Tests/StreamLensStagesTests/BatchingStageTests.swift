import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensStages
import StreamLensTesting
import Testing

/// lensdetect's batch-size= and batch-timeout=, the stage alone with real models: what its
/// summary says, batched or refused.
@Suite(.serialized) struct BatchingStageTests {
    init() {
        _ = FileManager.default.changeCurrentDirectoryPath(packageRoot.path)
        StandardBackends.register() // the stages' models run on OpenVINO here
    }

    /// MediaPipe's short-range face model reshapes to a batch of 4 but folds it into its anchors
    /// ([1, 3584, 16]): the stage runs it unbatched, finds the face as ever, and says why.
    @Test func aModelThatCannotBatchRunsUnbatchedAndTheSummarySaysSo() throws {
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/astronaut.png").path, width: 512, height: 512)
        let driver = try StageDriver(DetectStage.self, settings: ["model": .string("Models/face-short-range.json"), "precision": .string("f32"),
                                                                 "draw": .bool(false), "batch-size": .int(4), "batch-timeout": .int(5)])
        try driver.start(.packed("RGB", width: 512, height: 512))
        var out: [StageDriver<DetectStage>.Delivered] = []
        for _ in 0..<3 { out += driver.push(bytes) }
        out += driver.finish()
        #expect(out.count == 3 && out.allSatisfy { $0.pixels.regions.count == 1 })
        let summary = try #require(driver.stage.summary)
        #expect(summary.contains("batch-size 4 refused (its output regressors is [1, 3584, 16], not batched in its first dimension): 2 infer requests instead"), "\(summary)")
    }

    /// CenterFace batches: a lone stage's frames each run after the timeout (none is held back
    /// for others that never come), its face found in every frame, and the summary says how.
    /// nireq=1: each frame is waited for before the next is submitted (with 2, two frames of one
    /// stage may share a batch).
    @Test func aLoneBatchedStageIsNotStalled() throws {
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/astronaut.png").path, width: 512, height: 512)
        let driver = try StageDriver(DetectStage.self, settings: ["model": .string("Models/centerface.json"), "precision": .string("f32"),
                                                                 "draw": .bool(false), "nireq": .int(1), "batch-size": .int(4), "batch-timeout": .int(5)])
        try driver.start(.packed("RGB", width: 512, height: 512))
        var out: [StageDriver<DetectStage>.Delivered] = []
        for _ in 0..<3 { out += driver.push(bytes) }
        out += driver.finish()
        #expect(out.map(\.index) == [0, 1, 2] && out.allSatisfy { $0.outcome == .forward && $0.pixels.regions.count == 1 }, "\(out.map(\.pixels.regions))")
        let summary = try #require(driver.stage.summary)
        #expect(summary.contains("batched: 1 stream, mean batch 1.0 (batch-size 4, 3 batches, 3 partial)"), "\(summary)")
    }

    /// lensstylize batches too (a feed-forward style: image in, image out, [N, …] both): a lone
    /// frame runs after the timeout and comes out as without batching.
    @Test func aFeedForwardStyleBatches() throws {
        let (w, h) = (160, 120)
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/chelsea.png").path, width: w, height: h)
        let plain = try StageDriver(StylizeStage.self, settings: ["model": .string("Models/mosaic.json"), "precision": .string("f32"),
                                                                 "inference-size": .string("128")])
        try plain.start(.packed("RGB", width: w, height: h))
        let unbatched = plain.push(bytes) + plain.finish()
        let driver = try StageDriver(StylizeStage.self, settings: ["model": .string("Models/mosaic.json"), "precision": .string("f32"),
                                                                  "inference-size": .string("128"), "batch-size": .int(2), "batch-timeout": .int(5)])
        try driver.start(.packed("RGB", width: w, height: h))
        let batched = driver.push(bytes) + driver.finish()
        try #require(batched.count == 1 && unbatched.count == 1)
        #expect(meanDifference(batched[0].pixels.bytes, unbatched[0].pixels.bytes) < 0.5, "a batched frame came out differently")
        let summary = try #require(driver.stage.summary)
        #expect(summary.contains("batched: 1 stream"), "\(summary)")
    }
}
