import Foundation
import Testing

/// The feed-forward stylize path on generated random-weight ONNX networks
/// (tools/make_test_stylizer.py) in both layouts and both value ranges: lensstylize's output
/// must match a NumPy reference of the same network, at the manifest's size and at another size
/// (the network's height and width are dynamic), and with outputs that are not f32 (f16, u8:
/// OpenVINO converts them, StreamLens reads f32 only).
@Suite(.serialized) struct FeedForwardStylizeTests {
    @Test(arguments: [("NCHW", "255", "float"), ("NCHW", "1", "float"), ("NHWC", "255", "float"), ("NHWC", "1", "float"),
                      ("NCHW", "255", "uint8"), ("NHWC", "1", "float16")])
    func matchesTheNumPyReference(_ layout: String, _ range: String, _ outputType: String) throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let make = try ImportTests.spawn("python3", ["tools/make_test_stylizer.py", "--layout", layout, "--range", range, "--out", dir.path,
                                                     "--output-type", outputType])
        try #require(make.status == 0, "make_test_stylizer.py: \(make.stderr)")
        let manifest = dir.appendingPathComponent("stylizer.json").path
        for (w, h, size) in [(64, 48, ""), (96, 72, "96x72")] {
            let input = dir.appendingPathComponent("in-\(w).rgb").path
            let output = dir.appendingPathComponent("out-\(w).rgb").path
            let reference = dir.appendingPathComponent("ref-\(w).rgb").path
            let photo = try CLI.run(["run", "-q", StylizeTests.photo(width: w, height: h, count: 2) + " ! filesink location=\(input)"])
            try #require(photo.status == 0, "\(photo.stderr)")
            // The reference takes one frame.
            let single = dir.appendingPathComponent("one-\(w).rgb").path
            try Data(try Data(contentsOf: URL(fileURLWithPath: input)).prefix(w * h * 3)).write(to: URL(fileURLWithPath: single))
            let ref = try ImportTests.spawn("python3", ["tools/make_test_stylizer.py", "--layout", layout, "--range", range, "--out", dir.path,
                                                        "--reference", single, String(w), String(h), reference])
            try #require(ref.status == 0, "reference: \(ref.stderr)")
            let r = try CLI.run(["run", "-q", "filesrc location=\(input) ! rawvideoparse width=\(w) height=\(h) format=rgb framerate=10/1 ! lensstylize model=\(manifest) precision=f32 inference-size=\(size.isEmpty ? "\"\"" : size) ! filesink location=\(output)"])
            #expect(r.status == 0, "\(layout) \(range) \(w)x\(h): \(r.stderr)")
            let out = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data())
            let expected = [UInt8](try Data(contentsOf: URL(fileURLWithPath: reference)))
            let frame = w * h * 3
            try #require(out.count == 2 * frame && expected.count == frame, "\(out.count) bytes out, \(expected.count) in the reference")
            let worst = zip(out.prefix(frame), expected).map { abs(Int($0) - Int($1)) }.max() ?? 255
            #expect(worst <= 1, "\(layout) range \(range) \(outputType) at \(w)x\(h): largest difference from the reference \(worst)")
            // The network changes the picture: the comparison is not of two copies of the input.
            let inBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: input)))
            #expect(StylizeTests.meanAbsoluteDifference(Array(inBytes.prefix(frame)), expected) > 10)
        }
    }
}
