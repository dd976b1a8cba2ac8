import Foundation
import StreamLensCore
import StreamLensInference
@testable import StreamLensOpenVINO
import Testing

/// SwiftPreprocessor (what a backend without compiled pre-processing gets) against OpenVINO's
/// own pre-processing steps on the same frame: the reference no one here wrote.
@Suite struct PreprocessingTests {
    static let cases: [(String, ImageInput, FrameRegion)] = [
        ("letterbox NHWC RGB", ImageInput(width: 128, height: 128, layout: "NHWC", colorOrder: "RGB", mean: 127.5, scale: 127.5),
         .pad(top: 64, left: 0, bottom: 64, right: 0)),
        ("centre crop NCHW BGR", ImageInput(width: 96, height: 64, layout: "NCHW", colorOrder: "BGR", mean: 0, scale: 255),
         .crop(x: 100, y: 40, width: 300, height: 200)),
        ("stretch NCHW RGB", ImageInput(width: 320, height: 180, layout: "NCHW", colorOrder: "RGB", mean: 0, scale: 1), .whole),
        // PaddleOCR's detector: BGR, ImageNet's mean and std per channel over [0, 1].
        ("per channel NCHW BGR", ImageInput(width: 160, height: 96, layout: "NCHW", colorOrder: "BGR",
                                            mean: [0.406 * 255, 0.456 * 255, 0.485 * 255], scale: [0.225 * 255, 0.224 * 255, 0.229 * 255]), .whole),
    ]

    @Test(arguments: 0..<4) func swiftStepsGiveOpenVINOsTensor(index: Int) throws {
        let (name, input, region) = Self.cases[index]
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        // BGRx with padded rows: the colour order and the stride both matter.
        let (w, h) = (image.width, image.height), stride = w * 4 + 16
        var frame = [UInt8](repeating: 0, count: stride * h)
        for y in 0..<h { for x in 0..<w { for c in 0..<3 { frame[y * stride + x * 4 + c] = image.pixels[(y * w + x) * 3 + (2 - c)] } } }
        let layout = FrameLayout(width: w, height: h, pixelFormat: "BGRx", stride: stride)
        let shape = input.tensorShape
        let steps = Preprocessing(input: input, frame: layout, region: region)
        let swift = try SwiftPreprocessor(steps, shape: shape)
        let backends = InferenceBackends()
        OpenVINOBackend.register(in: backends)
        let compiled = try backends.preprocessor(steps, shape: shape)
        #expect(!(compiled is SwiftPreprocessor), "OpenVINO, registered, compiles the steps")
        let a = try frame.withUnsafeBytes { try swift.tensor($0) }, b = try frame.withUnsafeBytes { try compiled.tensor($0) }
        try #require(a.count == b.count, "\(name): \(a.count) vs \(b.count) bytes")
        let x = a.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }, y = b.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        // In grey levels: the two resamplers round differently, nothing more.
        let differences = zip(x, y).map { abs($0 - $1) * input.scale.max()! }
        let mean = differences.reduce(0, +) / Float(differences.count)
        #expect(mean < 0.6 && differences.max()! < 3, "\(name): mean \(mean), max \(differences.max()!) grey levels")
    }

    /// A small input out of a large frame is sampled in Swift (InferenceEngine.samplesInput):
    /// the detector then answers as with OpenVINO's compiled steps, the reference, on a 720p
    /// BGRx frame letterboxed to 128x128 — synchronously and through submitted requests.
    @Test func aSampledInputAnswersAsOpenVINOsSteps() throws {
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        let (w, h) = (1280, 720), stride = w * 4
        var frame = [UInt8](repeating: 40, count: stride * h)
        for y in 0..<image.height { for x in 0..<image.width { for c in 0..<3 {
            frame[(100 + y) * stride + (300 + x) * 4 + c] = image.pixels[(y * image.width + x) * 3 + (2 - c)]
        } } }
        let layout = FrameLayout(width: w, height: h, pixelFormat: "BGRx", stride: stride)
        let input = ImageInput(width: 128, height: 128, layout: "NHWC", colorOrder: "RGB", mean: 127.5, scale: 127.5)
        #expect(InferenceEngine.samplesInput(input, frame: layout, batch: 1))
        #expect(!InferenceEngine.samplesInput(ImageInput(width: 640, height: 640, layout: "NCHW", colorOrder: "RGB", mean: 0, scale: 255), frame: layout, batch: 1))
        var options = InferenceOptions()
        options.precision = "f32"
        let engine = try InferenceEngine()
        // The whole frame letterboxed (the face too small for this model there), and a crop the
        // face fills.
        for region in [FrameRegion.pad(top: 280, left: 0, bottom: 280, right: 0), .crop(x: 440, y: 100, width: 240, height: 240)] {
            let sampled = try ImageModel(compiled: try engine.compiledModel(path: shortRange, input: input, frame: layout, region: region, options: options,
                                                                            resizable: false, batch: 1, budget: engine.budget), requests: 2)
            let steps = try ImageModel(compiled: try engine.compiledModel(path: shortRange, input: input, frame: layout, region: region, options: options,
                                                                          resizable: false, batch: 1, sampling: false, budget: engine.budget), requests: 2)
            #expect(sampled.settings.hasSuffix("input sampled in Swift") && !steps.settings.contains("sampled"), "\(sampled.settings) / \(steps.settings)")
            let a = try frame.withUnsafeBytes { try sampled.infer($0) }, b = try frame.withUnsafeBytes { try steps.infer($0) }
            let pending = try frame.withUnsafeBytes { try sampled.submit($0) }
            let c = try sampled.outputs(of: try pending.wait().get())
            for (x, y) in [(a, b), (c, b)] {
                try #require(x.count == y.count && x.count == 2)
                let (scoresX, scoresY) = (x.first { $0.shape.last == 1 }!.values.map(sigmoid), y.first { $0.shape.last == 1 }!.values.map(sigmoid))
                let worstScore = zip(scoresX, scoresY).map { abs($0 - $1) }.max() ?? 1
                #expect(worstScore < 0.02, "\(region): scores differ by up to \(worstScore)")
                // The boxes of the anchors that found the face, in input pixels (of 128); the
                // others' regressors are noise that any resampler moves.
                let (boxesX, boxesY) = (x.first { $0.shape.last == 16 }!.values, y.first { $0.shape.last == 16 }!.values)
                let found = scoresY.indices.filter { scoresY[$0] > 0.5 }
                var worstBox: Float = 0
                for i in found { for k in 0..<4 { worstBox = max(worstBox, abs(boxesX[i * 16 + k] - boxesY[i * 16 + k])) } }
                #expect(worstBox < 0.5, "\(region): boxes of \(found.count) anchors differ by up to \(worstBox) px")
                if case .crop = region { #expect(!found.isEmpty, "no anchor found the face") }
            }
            if case .crop = region {
                let best = a.first { $0.shape.last == 1 }!.values.map(sigmoid).max() ?? 0
                #expect(best > 0.8, "the face scored \(best)")
            }
        }
    }
}
