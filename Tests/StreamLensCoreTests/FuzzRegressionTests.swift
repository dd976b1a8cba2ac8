import Foundation
import Testing
@testable import StreamLensCore

/// The fuzzers in `make fuzz` (Fuzz/, tools/fuzz.sh) within the ordinary test run: their committed
/// corpus replayed through the same entry points (FuzzEntryPoints.swift here is a symlink to
/// Fuzz/Sources/FuzzEntryPoints/FuzzEntryPoints.swift), so neither the corpus nor the harnesses
/// can rot; and every input a fuzzer crashed on, fed to the function that crashed, with the
/// error it must give now.
@Suite struct FuzzRegressionTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test(arguments: FuzzEntryPoints.all.map(\.name))
    func committedCorpusReplays(target: String) throws {
        let run = try #require(FuzzEntryPoints.all.first { $0.name == target }).run
        let folder = Self.corpus.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.count >= 2, "Fuzz/corpus/\(target) holds \(files.count) inputs")
        for file in files {
            let data = try Data(contentsOf: folder.appendingPathComponent(file))
            #expect(throws: Never.self, "Fuzz/corpus/\(target)/\(file)") { try run(data) }
        }
    }

    /// Every corpus folder has its entry point (coreml-import's is Python:
    /// Tests/Python/test_fuzz_corpus.py replays it).
    @Test func everyCorpusFolderIsReplayed() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).filter { $0 != "coreml-import" }
        #expect(folders.sorted() == FuzzEntryPoints.all.map(\.name).sorted())
    }

    /// The seeds taken from the repository's own files are there and still parse: a corpus of
    /// inputs that all fail early would fuzz nothing but the error paths.
    @Test func realFilesInTheCorpusAreValid() throws {
        for name in ["face-short-range", "face-full-range", "magenta-style"] {
            let data = try Data(contentsOf: Self.corpus.appendingPathComponent("model-manifest/\(name)"))
            _ = try ModelManifest.decode(data, origin: name)
        }
        let demo = try String(contentsOf: Self.corpus.appendingPathComponent("pipeline-spec/demo"), encoding: .utf8)
        #expect(PipelineSpec(text: PipelineSpec.joinLines(demo)).variableNames == ["INPUT", "MODEL", "THRESHOLD", "METADATA", "OUTPUT"])
        let commands = try String(contentsOf: Self.corpus.appendingPathComponent("control-command/from-tests"), encoding: .utf8)
        #expect(try ControlCommand.parse(commands.split(separator: "\n")[0].description) == .set(element: nil, assignments: [("strength", "0.5")]))
    }

    /// remote-tensors' seeds reach what they are for: well-shaped answers decode to faces that
    /// end inside their frame's bounds (so the fuzzer draws them), refused shapes stop early.
    @Test func remoteTensorSeedsDecodeAndRefuse() throws {
        func regions(_ seed: String) throws -> [RegionOfInterest]? {
            try FuzzEntryPoints.remoteTensorRegions(try Data(contentsOf: Self.corpus.appendingPathComponent("remote-tensors/\(seed)")))?.regions
        }
        for seed in ["short-range-faces", "full-range-faces", "centerface-faces"] {
            #expect(try regions(seed)?.isEmpty == false, "\(seed)")
        }
        let faces = try #require(try regions("short-range-faces"))
        #expect(faces.contains { $0.keypoints.contains { $0.x == 640 || $0.x == -320 } }, "the 1e20 keypoints end on the bound of the 320x240 frame")
        for seed in ["short-range-overflowing-shape", "short-range-negative-shape", "pose-detection-wrong-shapes"] {
            #expect(try regions(seed) == nil, "\(seed)")
        }
    }

    // MARK: crashes found

    /// manifest-fields, crash-53a4f3dd… (the same edit is Fuzz/corpus/manifest-fields/
    /// regression-box-coord-offset-overflow): a manifest with box_coord_offset Int.max trapped in
    /// BlazeFaceDecoderOptions.validate ("arithmetic overflow" in `box_coord_offset + 4`) instead
    /// of being refused. The keypoint check had the same sum and a product.
    @Test func decoderOffsetsNearIntMaxAreRefusedNotTrapped() throws {
        let json = try String(contentsOf: Self.corpus.appendingPathComponent("model-manifest/face-short-range"), encoding: .utf8)
        let huge = json.replacingOccurrences(of: #""box_coord_offset": 0"#, with: #""box_coord_offset": 9223372036854775807"#)
        #expect(huge != json)
        #expect(throws: StageError("model manifest m.json: decoder: the four box values at box_coord_offset 9223372036854775807 do not fit in num_coords 16")) {
            try ModelManifest.decode(Data(huge.utf8), origin: "m.json")
        }

        var options = BlazeFaceDecoderOptions(anchors: .faceShortRange, xScale: 128, yScale: 128, wScale: 128, hScale: 128)
        try options.validate()
        func refusal() -> String? {
            do { try options.validate(); return nil } catch { return (error as? StageError)?.message ?? "\(error)" }
        }
        options.keypointCoordOffset = .max
        #expect(refusal() == "decoder: 6 keypoints of 2 values at keypoint_coord_offset 9223372036854775807 do not fit in num_coords 16")
        options.keypointCoordOffset = 4
        options.numKeypoints = .max / 2 + 1  // times 2 values: past Int.max
        #expect(refusal() == "decoder: 4611686018427387904 keypoints of 2 values at keypoint_coord_offset 4 do not fit in num_coords 16")
        options.numKeypoints = 6
        options.valuesPerKeypoint = .max
        #expect(refusal() == "decoder: 6 keypoints of 9223372036854775807 values at keypoint_coord_offset 4 do not fit in num_coords 16")
        options.numCoords = .min
        #expect(refusal() == "decoder: the four box values at box_coord_offset 0 do not fit in num_coords -9223372036854775808")

        // The bounds themselves are unchanged: the last values that fit still do.
        options = BlazeFaceDecoderOptions(anchors: .faceShortRange, boxCoordOffset: 12, keypointCoordOffset: 4, numKeypoints: 6,
                                          xScale: 128, yScale: 128, wScale: 128, hScale: 128)
        try options.validate()
        options.boxCoordOffset = 13
        #expect(refusal() == "decoder: the four box values at box_coord_offset 13 do not fit in num_coords 16")
        options.boxCoordOffset = 0
        options.keypointCoordOffset = 5
        #expect(refusal() == "decoder: 6 keypoints of 2 values at keypoint_coord_offset 5 do not fit in num_coords 16")
    }

    /// manifest-fields, crash-5471a7c2… (Fuzz/corpus/manifest-fields/regression-value-range-too-
    /// narrow): value_range [0, 5e-324] passed validation, and the normalisation handed to OpenVINO
    /// was scale inf, mean NaN; [-1e308, 1e308] gave scale 0. Both are refused now, for the input,
    /// the style input and the image decoder's output alike.
    @Test func valueRangesTooNarrowOrTooWideAreRefused() throws {
        let json = try String(contentsOf: Self.corpus.appendingPathComponent("model-manifest/image-minimal"), encoding: .utf8)
        func refusal(_ range: String) -> String? {
            let edited = json.replacingOccurrences(of: #""value_range": [0, 255]"#, with: #""value_range": \#(range)"#)
            do { _ = try ModelManifest.decode(Data(edited.utf8), origin: "m.json"); return nil } catch {
                return (error as? StageError)?.message ?? "\(error)"
            }
        }
        #expect(refusal("[0, 255]") == nil)
        #expect(refusal("[0, 5e-324]") == "model manifest m.json: input value_range [0.0, 5e-324] is too narrow or too wide to map 0…255 onto")
        #expect(refusal("[-1e308, 1e308]") == "model manifest m.json: input value_range [-1e+308, 1e+308] is too narrow or too wide to map 0…255 onto")
        #expect(refusal("[0, 1e-300]") == nil)  // narrow, but 255 / 1e-300 is still a number

        var manifest = try ModelManifest.decode(Data(json.utf8), origin: "m.json")
        manifest.decoder = .init(.image(.init(valueRange: [1, 1 + Double.leastNonzeroMagnitude])))
        #expect(throws: StageError("decoder.parameters.value_range must be two numbers [lo, hi] with lo < hi, got [1.0, 1.0]")) {
            try manifest.validate()
        }
        manifest.decoder = .init(.image(.init(valueRange: [0, .leastNonzeroMagnitude])))
        #expect(throws: StageError("decoder.parameters.value_range [0.0, 5e-324] is too narrow or too wide to map 0…255 onto")) {
            try manifest.validate()
        }
        manifest.decoder = .init(.image(.init()))
        manifest.style = .init(model: "p.tflite", input: .init(width: 8, height: 8, colorOrder: .rgb, valueRange: [-1e308, 1e308], layout: .nhwc))
        #expect(throws: StageError("style.input value_range [-1e+308, 1e+308] is too narrow or too wide to map 0…255 onto")) {
            try manifest.validate()
        }
    }

    /// manifest-fields with Fuzz/corpus/manifest-fields/regression-huge-input-anchors (an input
    /// written for the structure-aware harness, not one libFuzzer came up with): a detector
    /// manifest with a 1048576x1048576 input made building its decoder allocate over 2 GB of
    /// anchors (libFuzzer: out-of-memory, malloc(2147483680)). The count is checked first now.
    @Test func anchorCountIsBoundedBeforeAnchorsAreMade() throws {
        let json = try String(contentsOf: Self.corpus.appendingPathComponent("model-manifest/face-short-range"), encoding: .utf8)
        var huge = json
        for key in ["width", "height", "input_size_width", "input_size_height"] {
            huge = huge.replacingOccurrences(of: "\"\(key)\": 128", with: "\"\(key)\": 1048576")
        }
        #expect(throws: StageError("model manifest m.json: anchor options: input 1048576x1048576 with strides [8, 16, 16, 16] makes 60129542144 anchors; at most 1048576 are supported")) {
            try ModelManifest.decode(Data(huge.utf8), origin: "m.json")
        }

        // The count is the generator's, for the shipped layouts and odd ones.
        var configs = [SSDAnchorOptions.faceShortRange, .faceFullRange]
        configs.append(SSDAnchorOptions(numLayers: 3, minScale: 0.2, maxScale: 0.9, inputHeight: 100, inputWidth: 37,
                                        strides: [3, 3, 7], aspectRatios: [1, 2, 0.5], fixedAnchorSize: false,
                                        interpolatedScaleAspectRatio: 0, reduceBoxesInLowestLayer: true))
        configs.append(SSDAnchorOptions(numLayers: 2, minScale: 0.1, maxScale: 0.5, inputHeight: 33, inputWidth: 65,
                                        strides: [16, 32], aspectRatios: [], fixedAnchorSize: true))
        #expect(configs.map(\.anchorCount) == configs.map { Double(generateAnchors($0).count) })
        #expect(SSDAnchorOptions.faceShortRange.anchorCount == 896)

        // The limit itself: a million anchors pass, one row more does not.
        var big = SSDAnchorOptions(numLayers: 1, minScale: 0.1, maxScale: 0.5, inputHeight: 1024, inputWidth: 1024,
                                   strides: [1], aspectRatios: [1], fixedAnchorSize: true, interpolatedScaleAspectRatio: 0)
        try big.validate()
        big.inputHeight = 1025
        #expect(throws: StageError("anchor options: input 1024x1025 with strides [1] makes 1049600 anchors; at most 1048576 are supported")) {
            try big.validate()
        }
    }
}
