import Foundation
import StreamLensCore
import Synchronization
import StreamLensInference
import StreamLensOpenVINO
import Testing

/// batch-size across stages (`InferenceEngine.loadImageInference`, `BatchedModel`): real
/// OpenVINO, the real CenterFace model (fully convolutional: its outputs are [N, …]), f32
/// pinned so both paths compute alike. (MediaPipe's face models cannot batch: their graphs
/// fold the batch into the anchors, [1, 896·N, 16]; BatchingStageTests shows the refusal.)
@Suite(.serialized) struct BatchingTests {
    /// The manifest's input (Models/centerface.json), so its decoder reads the outputs.
    static let input = ImageInput(width: 640, height: 384, layout: "NCHW", colorOrder: "RGB", mean: 0, scale: 1)
    static let centerFace = try! ModelStore.Reference("catalogue:centerface/centerface.onnx")!.installedPath()

    static func options(batch: Int, timeout: Double = 10) -> InferenceOptions {
        var options = InferenceOptions()
        options.precision = "f32"
        options.batchSize = batch
        options.batchTimeout = timeout
        return options
    }

    /// The astronaut shifted right by `shift` pixels (rows wrap): four frames, four places.
    static func frames() throws -> (frames: [[UInt8]], layout: FrameLayout) {
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        let row = image.width * 3
        let frames = [0, 60, 120, 180].map { shift in
            (0..<image.height).flatMap { y -> ArraySlice<UInt8> in
                let line = image.pixels[(y * row)..<((y + 1) * row)]
                let cut = line.endIndex - shift * 3
                return line[cut...] + line[..<cut]
            }
        }
        return (frames.map { Array($0) }, FrameLayout(width: image.width, height: image.height, pixelFormat: "RGB", stride: row))
    }

    /// The largest relative difference between two models' outputs.
    static func worstDifference(_ a: [TensorData], _ b: [TensorData]) -> Float {
        var worst: Float = a.count == b.count ? 0 : .infinity
        for (x, y) in zip(a, b) {
            guard x.values.count == y.values.count else { return .infinity }
            for (u, v) in zip(x.values, y.values) { worst = max(worst, abs(u - v) / max(1, abs(v))) }
        }
        return worst
    }

    static func boxes(_ outputs: [TensorData]) throws -> [Detection] {
        let manifest = try ModelManifest.load(path: packageRoot.appendingPathComponent("Models/centerface.json").path)
        var decoder = try manifest.makeDecoder()
        let order = try decoder.bind(outputs.map { ModelOutput(name: $0.name, shape: $0.shape) })
        return order.map { outputs[$0] }.withBuffers { decoder.decode($0) }
    }

    /// Four stages' frames filling one batch of 4 give each stage the outputs (and so the boxes)
    /// the batch-1 model gives for its frame; the outputs are shaped for one frame.
    @Test func aFullBatchAnswersEachStageAsBatchOneDoes() throws {
        let engine = try InferenceEngine()
        let (frames, layout) = try Self.frames()
        let single = try engine.loadImageModel(path: Self.centerFace, input: Self.input, frame: layout, region: .whole, options: Self.options(batch: 1), resizable: true)
        let expected = try frames.map { frame in try frame.withUnsafeBytes { try single.infer($0) } }
        let stages = try (0..<4).map { _ in
            try engine.loadImageInference(path: Self.centerFace, input: Self.input, frame: layout, region: .whole, options: Self.options(batch: 4, timeout: 1000),
                                          resizable: true)
        }
        let handles = try stages.map { try #require($0 as? BatchedImageModel, "not batched: \($0.settings)") }
        #expect(handles[0].outputs.map(\.shape) == single.outputs.map(\.shape), "\(handles[0].outputs)")
        // One thread submits for all four: the fourth frame fills the batch, which runs at once
        // (a timeout of 1 s would show as a partial batch below).
        let tickets = try zip(stages, frames).map { stage, frame in try frame.withUnsafeBytes { try stage.submit($0) } }
        for (i, ticket) in tickets.enumerated() {
            let outputs = try stages[i].outputs(of: ticket.wait().get())
            #expect(outputs.map(\.shape) == expected[i].map(\.shape))
            for (got, want) in zip(outputs, expected[i]) {
                let worst = zip(got.values, want.values).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? 0
                #expect(worst < 1e-3, "frame \(i) output \(got.name): relative difference \(worst)")
            }
            let (a, b) = (try Self.boxes(outputs), try Self.boxes(expected[i]))
            try #require(a.count == b.count && !a.isEmpty, "frame \(i): \(a) vs \(b)")
            for (x, y) in zip(a, b) {
                #expect(abs(x.box.xMin - y.box.xMin) < 1e-3 && abs(x.box.yMin - y.box.yMin) < 1e-3 && abs(x.box.xMax - y.box.xMax) < 1e-3 && abs(x.box.yMax - y.box.yMax) < 1e-3, "\(x) vs \(y)")
            }
        }
        let figures = handles[0].statistics
        #expect(figures == BatchStatistics(batches: 1, frames: 4, partial: 0, largest: 4, streams: 4), "\(figures)")
        #expect(handles[0].settings.contains("batched: 4 streams, mean batch 4.0"), "\(handles[0].settings)")
        // The boxes differ from frame to frame: the slices are the right frames'.
        #expect(Set(try expected.map { try Self.boxes($0).first!.box.xMin }).count == 4)
    }

    /// Four stages on four threads at once, each with two frames in flight (as a stage's nireq=2
    /// keeps them): every frame gets its own frame's answer, whichever batch it fell into.
    @Test func fourThreadsAtOnceEachGetTheirOwnAnswers() throws {
        let engine = try InferenceEngine()
        let (frames, layout) = try Self.frames()
        let single = try engine.loadImageModel(path: Self.centerFace, input: Self.input, frame: layout, region: .whole, options: Self.options(batch: 1), resizable: true)
        let expected = try frames.map { frame in try frame.withUnsafeBytes { try single.infer($0) } }
        final class Shared: @unchecked Sendable { // each stage is used by its own thread only
            var stages: [any ImageInference] = []
            let failures = Mutex<[String]>([])
        }
        let shared = Shared()
        shared.stages = try (0..<4).map { _ in
            try engine.loadImageInference(path: Self.centerFace, input: Self.input, frame: layout, region: .whole, options: Self.options(batch: 4), resizable: true)
        }
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            let stage = shared.stages[t]
            var waiting: [(frame: Int, ticket: PendingInference)] = []
            for k in 0..<6 {
                let f = (t + k) % frames.count
                do {
                    waiting.append((f, try frames[f].withUnsafeBytes { try stage.submit($0) }))
                    if waiting.count == 2 || k == 5 {
                        for entry in waiting {
                            let outputs = try stage.outputs(of: entry.ticket.wait().get())
                            let worst = Self.worstDifference(outputs, expected[entry.frame])
                            if worst > 1e-3 { shared.failures.withLock { $0.append("thread \(t) frame \(entry.frame): \(worst)") } }
                        }
                        waiting = []
                    }
                } catch {
                    shared.failures.withLock { $0.append("thread \(t): \(error)") }
                }
            }
        }
        #expect(shared.failures.withLock { $0 } == [])
        let figures = try #require(shared.stages[0] as? BatchedImageModel).statistics
        #expect(figures.frames == 24 && figures.streams == 4 && figures.largest <= 4, "\(figures)")
    }

    /// A lone stream with batch-size=4 is not stalled: each frame, waited for in turn, runs
    /// after the timeout in a batch holding just it, with the batch-1 model's answer.
    @Test func aLoneStreamRunsEachFrameAfterTheTimeout() throws {
        let engine = try InferenceEngine()
        let (frames, layout) = try Self.frames()
        let single = try engine.loadImageModel(path: Self.centerFace, input: Self.input, frame: layout, region: .whole, options: Self.options(batch: 1), resizable: true)
        let stage = try engine.loadImageInference(path: Self.centerFace, input: Self.input, frame: layout, region: .whole,
                                                   options: Self.options(batch: 4, timeout: 5), resizable: true)
        let handle = try #require(stage as? BatchedImageModel, "not batched: \(stage.settings)")
        for (i, frame) in frames.enumerated() {
            let ticket = try frame.withUnsafeBytes { try stage.submit($0) }
            let outputs = try stage.outputs(of: ticket.wait().get())
            #expect(outputs == (try frame.withUnsafeBytes { try single.infer($0) }), "frame \(i)")
            #expect(handle.statistics == BatchStatistics(batches: i + 1, frames: i + 1, partial: i + 1, largest: 1, streams: 1), "\(handle.statistics)")
        }
        // The synchronous path too.
        let count = try frames[0].withUnsafeBytes { try stage.infer($0) { $0.count } }
        #expect(count == 4 && handle.statistics.largest == 1)
    }

    /// A model whose graph fixes batch 1 (a Reshape to a constant [1, 192]) refuses batch 4: the
    /// stage runs it unbatched, and its settings (which the stage summary carries) say so.
    @Test func aModelThatRefusesTheBatchRunsUnbatchedAndSaysSo() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("batch-refusal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let xml = """
            <?xml version="1.0"?>
            <net name="fixed-batch" version="11"><layers>
            <layer id="0" name="image" type="Parameter" version="opset1"><data shape="1,8,8,3" element_type="f32"/>
            <output><port id="0" precision="FP32" names="image"><dim>1</dim><dim>8</dim><dim>8</dim><dim>3</dim></port></output></layer>
            <layer id="1" name="shape" type="Const" version="opset1"><data element_type="i64" shape="2" offset="0" size="16"/>
            <output><port id="0" precision="I64"><dim>2</dim></port></output></layer>
            <layer id="2" name="flat" type="Reshape" version="opset1"><data special_zero="false"/>
            <input><port id="0" precision="FP32"><dim>1</dim><dim>8</dim><dim>8</dim><dim>3</dim></port><port id="1" precision="I64"><dim>2</dim></port></input>
            <output><port id="2" precision="FP32" names="flat"><dim>1</dim><dim>192</dim></port></output></layer>
            <layer id="3" name="out" type="Result" version="opset1"><input><port id="0" precision="FP32"><dim>1</dim><dim>192</dim></port></input></layer>
            </layers><edges><edge from-layer="0" from-port="0" to-layer="2" to-port="0"/><edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>
            <edge from-layer="2" from-port="2" to-layer="3" to-port="0"/></edges></net>
            """
        try xml.write(to: folder.appendingPathComponent("fixed.xml"), atomically: true, encoding: .utf8)
        let shape: [Int64] = [1, 192]
        try shape.withUnsafeBytes { Data($0) }.write(to: folder.appendingPathComponent("fixed.bin"))
        let engine = try InferenceEngine()
        let input = ImageInput(width: 8, height: 8, layout: "NHWC", colorOrder: "RGB", mean: 0, scale: 1)
        let layout = FrameLayout(width: 8, height: 8, pixelFormat: "RGB", stride: 24)
        let model = try engine.loadImageInference(path: folder.appendingPathComponent("fixed.xml").path, input: input, frame: layout,
                                                  region: .whole, options: Self.options(batch: 4))
        #expect(model is ImageModel)
        #expect(model.settings.contains("batch-size 4 refused (the model's image input [1,8,8,3] cannot take a batch of 4"), "\(model.settings)")
        #expect(model.settings.contains("2 infer requests instead"), "\(model.settings)")
        // The next stage asking is told the same, from the engine's memory of the refusal.
        let again = try engine.loadImageInference(path: folder.appendingPathComponent("fixed.xml").path, input: input, frame: layout,
                                                  region: .whole, options: Self.options(batch: 4))
        #expect(again is ImageModel && again.settings.hasSuffix(model.settings.split(separator: ",").last!), "\(again.settings)")
        let pixels = (0..<192).map { UInt8($0) }
        let out = try pixels.withUnsafeBytes { try model.infer($0) { Array($0[0]) } }
        #expect(out == pixels.map(Float.init))
    }
}
