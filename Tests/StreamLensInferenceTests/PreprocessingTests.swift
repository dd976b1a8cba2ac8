import Foundation
import StreamLensCore
import StreamLensInference
import StreamLensOpenVINO
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
    ]

    @Test(arguments: 0..<3) func swiftStepsGiveOpenVINOsTensor(index: Int) throws {
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
        let differences = zip(x, y).map { abs($0 - $1) * input.scale }
        let mean = differences.reduce(0, +) / Float(differences.count)
        #expect(mean < 0.6 && differences.max()! < 3, "\(name): mean \(mean), max \(differences.max()!) grey levels")
    }
}
