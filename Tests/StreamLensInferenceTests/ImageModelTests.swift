import Foundation
import StreamLensCore
import StreamLensInference
import StreamLensOpenVINO
import Testing

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
/// MediaPipe's short-range detector, installed by set-up into the model store (Models/model-catalogue.json).
let shortRange = try! ModelStore.Reference("catalogue:mediapipe-face-detection/face_detection_short_range.tflite")!.installedPath()

/// Decodes an image file to packed RGB with GStreamer's own tools (a real decoder, no mock).
func decodeRGB(_ path: String) throws -> (pixels: [UInt8], width: Int, height: Int) {
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("rgb-\(UUID().uuidString).raw").path
    defer { try? FileManager.default.removeItem(atPath: out) }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
    p.arguments = ["-q", "filesrc", "location=\(path)", "!", "decodebin", "!", "videoconvert", "!", "video/x-raw,format=RGB", "!", "filesink", "location=\(out)"]
    try p.run()
    p.waitUntilExit()
    let data = try Data(contentsOf: URL(fileURLWithPath: out))
    // astronaut.png is 512x512.
    let side = Int(Double(data.count / 3).squareRoot())
    return ([UInt8](data), side, side)
}

func sigmoid(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

@Suite(.serialized) struct ImageModelTests {
    let engine: InferenceEngine
    init() throws { engine = try InferenceEngine() }

    static let blazeInput = ImageInput(width: 128, height: 128, layout: "NHWC", colorOrder: "RGB", mean: 127.5, scale: 127.5)

    @Test func blazeFaceScoresTheAstronautsFace() throws {
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        #expect(image.width == 512)
        var options = InferenceOptions()
        options.precision = "f32"
        let frame = FrameLayout(width: image.width, height: image.height, pixelFormat: "RGB", stride: image.width * 3)
        // The face is around (180…330, 30…200) in the 512² photo: a centred 240² crop there.
        let model = try engine.loadImageModel(path: shortRange, input: Self.blazeInput, frame: frame,
                                              region: .crop(x: 140, y: 0, width: 240, height: 240), options: options)
        #expect(model.outputs.map(\.shape).sorted { $0.last! > $1.last! } == [[1, 896, 16], [1, 896, 1]])
        let outputs = try image.pixels.withUnsafeBytes { try model.infer($0) }
        let scores = try #require(outputs.first { $0.shape == [1, 896, 1] })
        let best = scores.values.map(sigmoid).max() ?? 0
        #expect(best > 0.9, "best face score \(best)")

        // The same model on a flat grey frame finds nothing.
        let grey = [UInt8](repeating: 128, count: image.pixels.count)
        let none = try grey.withUnsafeBytes { try model.infer($0) }
        let greyBest = none.first { $0.shape == [1, 896, 1] }!.values.map(sigmoid).max() ?? 1
        #expect(greyBest < 0.5, "grey frame scored \(greyBest)")
    }

    @Test func letterboxPaddingAndPaddedRowsWork() throws {
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        // Rows padded to a stride larger than width*3, as some decoders deliver them.
        let stride = image.width * 3 + 16
        var padded = [UInt8](repeating: 0, count: stride * image.height)
        for row in 0..<image.height {
            padded.replaceSubrange(row * stride..<(row * stride + image.width * 3), with: image.pixels[(row * image.width * 3)..<((row + 1) * image.width * 3)])
        }
        let frame = FrameLayout(width: image.width, height: image.height, pixelFormat: "RGB", stride: stride)
        var options = InferenceOptions()
        options.precision = "f32"
        let cropped = try engine.loadImageModel(path: shortRange, input: Self.blazeInput, frame: frame,
                                                region: .crop(x: 140, y: 0, width: 240, height: 240), options: options)
        let a = try padded.withUnsafeBytes { try cropped.infer($0) }
        let b = try image.pixels.withUnsafeBytes { raw in
            try engine.loadImageModel(path: shortRange, input: Self.blazeInput,
                                      frame: FrameLayout(width: image.width, height: image.height, pixelFormat: "RGB", stride: image.width * 3),
                                      region: .crop(x: 140, y: 0, width: 240, height: 240), options: options).infer(raw)
        }
        #expect(a == b) // same pixels, same result, whatever the stride
        let letterboxed = try engine.loadImageModel(path: shortRange, input: Self.blazeInput, frame: frame,
                                                    region: .pad(top: 100, left: 0, bottom: 100, right: 0), options: options)
        #expect(try padded.withUnsafeBytes { try letterboxed.infer($0) }.count == 2)
    }

    @Test func absentDeviceListsTheAvailableOnes() throws {
        var options = InferenceOptions()
        options.device = "NPU"
        let frame = FrameLayout(width: 64, height: 64, pixelFormat: "RGB", stride: 192)
        #expect(throws: InferenceError.self) {
            try engine.loadImageModel(path: shortRange, input: Self.blazeInput, frame: frame, region: .whole, options: options)
        }
        do {
            _ = try engine.loadImageModel(path: shortRange, input: Self.blazeInput, frame: frame, region: .whole, options: options)
        } catch let e as InferenceError {
            #expect(e.message.hasPrefix("device NPU is not available here (available: CPU"), "\(e.message)")
        }
        #expect(try engine.availableDevices().contains("CPU"))
    }

    @Test func missingOrWrongModelFiles() throws {
        let frame = FrameLayout(width: 64, height: 64, pixelFormat: "RGB", stride: 192)
        #expect(throws: InferenceError("model file /nonexistent/m.tflite not found")) {
            try engine.loadImageModel(path: "/nonexistent/m.tflite", input: Self.blazeInput, frame: frame, region: .whole, options: InferenceOptions())
        }
        // A file that is not a model: named, with OpenVINO's own reason on the next line.
        let junk = FileManager.default.temporaryDirectory.appendingPathComponent("junk-\(UUID().uuidString).onnx").path
        _ = FileManager.default.createFile(atPath: junk, contents: Data("not a model".utf8))
        defer { try? FileManager.default.removeItem(atPath: junk) }
        do {
            _ = try engine.loadImageModel(path: junk, input: Self.blazeInput, frame: frame, region: .whole, options: InferenceOptions())
            Issue.record("junk model accepted")
        } catch let e as InferenceError {
            #expect(e.message.hasPrefix("model file \(junk) cannot be read: it is damaged or not a model"), "\(e.message)")
            #expect(e.message.contains("OpenVINO: Unable to read the model"), "\(e.message)")
        }
    }
}
