import Foundation
import Testing
@testable import StreamLensCore

@Suite struct InferenceSizeTests {
    @Test func parsesTheThreeForms() throws {
        #expect(try InferenceSize.parse("") == .manifest)
        #expect(try InferenceSize.parse(" 256 ") == .shortSide(256))
        #expect(try InferenceSize.parse("320x180") == .fixed(width: 320, height: 180))
        #expect(try InferenceSize.parse("320X180") == .fixed(width: 320, height: 180))
        for bad in ["abc", "0", "8", "320x", "x180", "1x2x3", "-5", "5000"] {
            #expect(throws: StageError.self, "\(bad)") { try InferenceSize.parse(bad) }
        }
    }

    @Test func shortSideKeepsTheFramesAspectInMultiplesOfEight() {
        let s = InferenceSize.shortSide(256)
        #expect(s.resolve(frameWidth: 1280, frameHeight: 720, manifestWidth: 384, manifestHeight: 384) == (456, 256))
        #expect(s.resolve(frameWidth: 720, frameHeight: 1280, manifestWidth: 384, manifestHeight: 384) == (256, 456))
        #expect(s.resolve(frameWidth: 640, frameHeight: 480, manifestWidth: 384, manifestHeight: 384) == (344, 256))
        #expect(InferenceSize.manifest.resolve(frameWidth: 1280, frameHeight: 720, manifestWidth: 384, manifestHeight: 384) == (384, 384))
        #expect(InferenceSize.fixed(width: 320, height: 180).resolve(frameWidth: 64, frameHeight: 64, manifestWidth: 1, manifestHeight: 1) == (320, 180))
    }
}

@Suite struct ControlCommandTests {
    @Test func parsesSetGetListHelp() throws {
        #expect(try ControlCommand.parse("set strength=0.5") == .set(element: nil, assignments: [("strength", "0.5")]))
        #expect(try ControlCommand.parse("  set style device=AUTO precision=f32 ") ==
                .set(element: "style", assignments: [("device", "AUTO"), ("precision", "f32")]))
        #expect(try ControlCommand.parse(#"set lensstylize0 style-image="/pics/wave 2.jpg""#) ==
                .set(element: "lensstylize0", assignments: [("style-image", "/pics/wave 2.jpg")]))
        #expect(try ControlCommand.parse(#"set style-image="a \"b\"""#) == .set(element: nil, assignments: [("style-image", #"a "b""#)]))
        #expect(try ControlCommand.parse("get strength") == .get(element: nil, name: "strength"))
        #expect(try ControlCommand.parse("GET det0 interval") == .get(element: "det0", name: "interval"))
        #expect(try ControlCommand.parse("list") == .list)
        #expect(try ControlCommand.parse("help me") == .help)
        #expect(try ControlCommand.parse("   ") == nil)
        #expect(try ControlCommand.parse("# a comment") == nil)
    }

    @Test func badLinesSayWhatIsWrong() {
        func message(_ line: String) -> String? {
            do { _ = try ControlCommand.parse(line); return nil } catch let e as ControlError { return e.message } catch { return "\(error)" }
        }
        #expect(message("jump")?.hasPrefix("unknown command 'jump'") == true)
        #expect(message("set") == "set needs NAME=VALUE (e.g. set strength=0.5)")
        #expect(message("set style") == "set needs NAME=VALUE (e.g. set strength=0.5)")
        #expect(message("set style strength") == "expected NAME=VALUE, got 'strength'")
        #expect(message("set =3") == "'' is not a property name")
        #expect(message("set 9a=3") == "'9a' is not a property name")
        #expect(message(#"set style-image="open"#) == "unterminated quote")
        #expect(message("get") == "get takes [ELEMENT] NAME")
        #expect(message("list all") == "list takes no arguments")
    }

    @Test func propertyValuesAreParsedAgainstTheTable() throws {
        let strength = PropertySpec("strength", .double(0...1), default: .double(1), live: true, help: "")
        #expect(try strength.parse("0.25") == .double(0.25))
        #expect(throws: StageError("property strength=2.0 is out of range 0.0…1.0")) { try strength.parse("2") }
        #expect(throws: StageError("property strength=abc is not a number")) { try strength.parse("abc") }
        #expect(throws: StageError.self) { try strength.parse("nan") }
        let draw = PropertySpec("draw", .bool, default: .bool(true), help: "")
        #expect(try draw.parse("off") == .bool(false))
        #expect(throws: StageError.self) { try draw.parse("maybe") }
        let precision = PropertySpec("precision", .choice(["f32", "bf16"]), default: .string("f32"), help: "")
        #expect(throws: StageError("property precision=f64 is not one of f32, bf16")) { try precision.parse("f64") }
    }
}

@Suite struct ResamplingTests {
    /// Packed pixels in a buffer, with helpers to read them.
    final class Image {
        var bytes: [UInt8]
        let width: Int, height: Int, layout: PackedRGBLayout
        init(width: Int, height: Int, layout: PackedRGBLayout, fill: (Int, Int, Int) -> UInt8) {
            self.width = width; self.height = height; self.layout = layout
            bytes = [UInt8](repeating: 77, count: width * height * layout.bytesPerPixel)
            for y in 0..<height { for x in 0..<width {
                let p = (y * width + x) * layout.bytesPerPixel
                bytes[p + layout.red] = fill(x, y, 0); bytes[p + layout.green] = fill(x, y, 1); bytes[p + layout.blue] = fill(x, y, 2)
            } }
        }
        func rgb(_ x: Int, _ y: Int) -> [UInt8] {
            let p = (y * width + x) * layout.bytesPerPixel
            return [bytes[p + layout.red], bytes[p + layout.green], bytes[p + layout.blue]]
        }
        func withPlane<R>(_ body: (PixelPlane) -> R) -> R {
            bytes.withUnsafeMutableBytes { body(PixelPlane(base: $0.baseAddress!, width: width, height: height,
                                                           stride: width * layout.bytesPerPixel, layout: layout)) }
        }
    }

    @Test func areaResizeAveragesEachFootprint() {
        // 4x2 BGRx → 2x1 RGB: each output pixel is the mean of a 2x2 block.
        let src = Image(width: 4, height: 2, layout: PackedRGBLayout(pixelFormat: "BGRx")!) { x, y, c in UInt8(10 * x + 100 * y + c) }
        let dst = Image(width: 2, height: 1, layout: .rgb) { _, _, _ in 0 }
        src.withPlane { s in dst.withPlane { d in Resampling.areaResize(s, into: d) } }
        // Block (0..1, 0..1), channel c: mean of 10x + 100y + c = 5 + 50 + c.
        #expect(dst.rgb(0, 0) == [55, 56, 57])
        #expect(dst.rgb(1, 0) == [75, 76, 77])
        // A large frame shrunk 4x (several threads) keeps a uniform colour exactly.
        let big = Image(width: 1280, height: 720, layout: PackedRGBLayout(pixelFormat: "RGBA")!) { _, _, c in [200, 100, 50][c] }
        let small = Image(width: 320, height: 180, layout: .bgr) { _, _, _ in 0 }
        big.withPlane { s in small.withPlane { d in Resampling.areaResize(s, into: d) } }
        #expect(Set((0..<180).flatMap { y in (0..<320).map { small.rgb($0, y) } }) == [[200, 100, 50]])
    }

    @Test func bilinearBlendAtTheSameSizeIsACopyAndStrengthBlends() {
        let styled = Image(width: 8, height: 6, layout: .rgb) { x, y, c in UInt8(15 * x + 7 * y + 50 * c) }
        for format in ["RGB", "BGR", "RGBx", "BGRA"] {
            let layout = PackedRGBLayout(pixelFormat: format)!
            func frame() -> Image { Image(width: 8, height: 6, layout: layout) { _, _, _ in 100 } }
            let full = frame(), half = frame(), none = frame()
            styled.withPlane { s in
                full.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 1) }
                half.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 0.5) }
                none.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 0) }
            }
            for y in 0..<6 { for x in 0..<8 {
                #expect(full.rgb(x, y) == styled.rgb(x, y), "\(format) \(x),\(y)")
                let expected = styled.rgb(x, y).map { Int((Double(Int($0) + 100) / 2).rounded(.down)) }
                #expect(zip(half.rgb(x, y), expected).allSatisfy { abs(Int($0) - $1) <= 1 }, "\(format) \(x),\(y)")
                #expect(none.rgb(x, y) == [100, 100, 100])
            } }
            if layout.bytesPerPixel == 4 { #expect(full.bytes[3] == 77, "the fourth byte is left alone") }
        }
    }

    @Test func bilinearUpscaleInterpolatesBetweenCentres() {
        // 2x1 → 4x1: centres of the source pixels sit at 0.5 and 2.5 in the output; the outer
        // pixels clamp, the inner ones are 1/4 and 3/4 of the way.
        let src = Image(width: 2, height: 1, layout: .rgb) { x, _, _ in x == 0 ? 0 : 200 }
        let dst = Image(width: 4, height: 1, layout: .rgb) { _, _, _ in 9 }
        src.withPlane { s in dst.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 1) } }
        #expect((0..<4).map { dst.rgb($0, 0)[0] } == [0, 50, 150, 200])
    }

    @Test func floatOutputBecomesBytesInEveryLayoutAndRange() {
        // 2x1 image, channels R,G,B = (0.0, 0.5, 1.0) and (0.25, 2.0 clamped, NaN → 0).
        let rgbPixels: [[Float]] = [[0, 0.5, 1], [0.25, 2, .nan]]
        let interleaved = rgbPixels.flatMap { $0 }
        let planar = (0..<3).flatMap { c in rgbPixels.map { $0[c] } }
        func convert(_ values: [Float], planar: Bool, bgr: Bool, scale: Float) -> [UInt8] {
            var out = [UInt8](repeating: 1, count: 6)
            let scaled = values.map { $0 * scale }
            scaled.withUnsafeBufferPointer { v in
                out.withUnsafeMutableBufferPointer {
                    FloatImage(values: v, width: 2, height: 1, planar: planar, bgr: bgr, low: 0, high: scale).writeRGB(into: $0)
                }
            }
            return out
        }
        let expected: [UInt8] = [0, 128, 255, 64, 255, 0]
        #expect(convert(interleaved, planar: false, bgr: false, scale: 1) == expected)
        #expect(convert(planar, planar: true, bgr: false, scale: 1) == expected)
        #expect(convert(interleaved, planar: false, bgr: false, scale: 255) == expected)
        // A BGR model's channel 0 is blue.
        let bgrValues = rgbPixels.flatMap { [$0[2], $0[1], $0[0]] }
        #expect(convert(bgrValues, planar: false, bgr: true, scale: 1) == expected)
        #expect(FloatImage.size(ofShape: [1, 3, 48, 64], planar: true)! == (64, 48))
        #expect(FloatImage.size(ofShape: [1, 48, 64, 3], planar: false)! == (64, 48))
        #expect(FloatImage.size(ofShape: [1, 1, 1, 100], planar: false) == nil)
    }
}

@Suite struct ImageManifestTests {
    @Test func magentaManifestDescribesAnArbitraryStyleModel() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Models/magenta-style.json").path
        let m = try ModelManifest.load(path: path)
        #expect(m.decoder.name == "image" && m.decoder.image?.valueRange == [0, 1] && m.decoder.blazeFace == nil)
        #expect(m.input.name == "content_image" && m.style?.input.width == 256 && m.labels.isEmpty)
        // Its networks come from the model catalogue, its default style picture is a shipped one.
        #expect(m.model == "catalogue:magenta/style_transfer_f16_384.tflite" && m.style?.model == "catalogue:magenta/style_predict_quantized_256.tflite")
        #expect(try m.resolve(m.style!.image!, relativeTo: path).hasSuffix("Models/styles/waves.jpg"))
        #expect(FileManager.default.fileExists(atPath: try m.resolve(m.style!.image!, relativeTo: path)))
        #expect(throws: StageError("model magenta-arbitrary-style is not a detector (its decoder is 'image')")) { try m.makeDecoder() }
    }

    @Test func imageDecoderDefaultsAndBadRanges() throws {
        let text = """
            {"schema_version": 1, "name": "ff", "model": "ff.onnx",
             "input": {"width": 64, "height": 48, "color_order": "BGR", "value_range": [0, 255], "layout": "NCHW"},
             "decoder": {"name": "image", "parameters": {"layout": "NCHW", "value_range": [0, 255]}},
             "licence": "test"}
            """
        let m = try ModelManifest.decode(Data(text.utf8), origin: "ff.json")
        #expect(m.decoder.image == ModelManifest.ImageOutput(layout: .nchw, colorOrder: .rgb, valueRange: [0, 255]))
        #expect(m.style == nil && m.provenance == nil)
        let bad = text.replacingOccurrences(of: #""layout": "NCHW", "value_range": [0, 255]}"#, with: #""value_range": [1, 1]}"#)
        #expect(throws: StageError("model manifest ff.json: decoder.parameters.value_range must be two numbers [lo, hi] with lo < hi, got [1.0, 1.0]")) {
            try ModelManifest.decode(Data(bad.utf8), origin: "ff.json")
        }
    }
}
