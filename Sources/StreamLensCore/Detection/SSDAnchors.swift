
/// MediaPipe's `SsdAnchorsCalculatorOptions`, the subset BlazeFace models use, with the same
/// snake_case names in JSON. Keys with a default below may be left out of a manifest.
///
/// Short-range face detection (128x128): 4 layers, strides [8, 16, 16, 16], scales 0.1484375…0.75,
/// aspect ratio 1 plus the interpolated one, fixed anchor size: 896 anchors.
/// Full-range (192x192): 1 layer, stride 4, no interpolated ratio: 2304 anchors.
public struct SSDAnchorOptions: Sendable, Codable, Equatable {
    public var numLayers: Int
    public var minScale: Double
    public var maxScale: Double
    public var inputHeight: Int
    public var inputWidth: Int
    /// Where the anchor sits in its feature-map cell, 0…1 (default 0.5: the cell's centre).
    public var anchorOffsetX: Double = 0.5
    public var anchorOffsetY: Double = 0.5
    /// One stride per layer; consecutive layers with the same stride share one feature map.
    public var strides: [Int]
    public var aspectRatios: [Double]
    /// Every anchor 1x1: the regressors then carry sizes relative to the whole input (BlazeFace).
    public var fixedAnchorSize: Bool
    /// > 0 adds one anchor per cell between this layer's scale and the next one's (default 1).
    public var interpolatedScaleAspectRatio: Double = 1.0
    /// The lowest layer gets the fixed trio (0.1, 1), (scale, 2), (scale, 0.5) (default false).
    public var reduceBoxesInLowestLayer: Bool = false

    /// MediaPipe's short-range face detector (face_detection_short_range.tflite).
    public static let faceShortRange = SSDAnchorOptions(
        numLayers: 4, minScale: 0.1484375, maxScale: 0.75, inputHeight: 128, inputWidth: 128,
        strides: [8, 16, 16, 16], aspectRatios: [1.0], fixedAnchorSize: true, interpolatedScaleAspectRatio: 1.0)

    /// MediaPipe's full-range face detector (face_detection_full_range_sparse.tflite).
    public static let faceFullRange = SSDAnchorOptions(
        numLayers: 1, minScale: 0.1484375, maxScale: 0.75, inputHeight: 192, inputWidth: 192,
        strides: [4], aspectRatios: [1.0], fixedAnchorSize: true, interpolatedScaleAspectRatio: 0.0)

    enum CodingKeys: String, CodingKey {
        case numLayers = "num_layers"
        case minScale = "min_scale"
        case maxScale = "max_scale"
        case inputHeight = "input_size_height"
        case inputWidth = "input_size_width"
        case anchorOffsetX = "anchor_offset_x"
        case anchorOffsetY = "anchor_offset_y"
        case strides
        case aspectRatios = "aspect_ratios"
        case fixedAnchorSize = "fixed_anchor_size"
        case interpolatedScaleAspectRatio = "interpolated_scale_aspect_ratio"
        case reduceBoxesInLowestLayer = "reduce_boxes_in_lowest_layer"
    }

    /// What MediaPipe checks, plus what would otherwise trap: one stride per layer, positive
    /// strides and input size, at least one anchor per cell.
    public func validate() throws {
        guard numLayers > 0, strides.count == numLayers else {
            throw StageError("anchor options: num_layers is \(numLayers) but there are \(strides.count) strides (one per layer)")
        }
        guard strides.allSatisfy({ $0 > 0 }), inputWidth > 0, inputHeight > 0 else {
            throw StageError("anchor options: strides and input size must be positive (strides \(strides), input \(inputWidth)x\(inputHeight))")
        }
        guard !aspectRatios.isEmpty || interpolatedScaleAspectRatio > 0 || reduceBoxesInLowestLayer else {
            throw StageError("anchor options: no aspect_ratios and no interpolated_scale_aspect_ratio: no anchors")
        }
        guard aspectRatios.allSatisfy({ $0 > 0 }) else {
            throw StageError("anchor options: aspect_ratios must be positive, got \(aspectRatios)")
        }
        // A manifest with a huge input size made the decoder try to build billions of anchors
        // (a >2 GB allocation at 1048576x1048576; found by fuzzing): counted first, refused here.
        let count = anchorCount
        guard count <= Double(Self.maxAnchors) else {
            let shown = count < 9e18 ? "\(Int(count))" : "\(count)"
            throw StageError("anchor options: input \(inputWidth)x\(inputHeight) with strides \(strides) makes \(shown) anchors; at most \(Self.maxAnchors) are supported")
        }
    }

    /// The most anchors a manifest may ask for: BlazeFace has 896 or 2304, SSD detectors tens of
    /// thousands; a million is already 64 MB of box values a frame at 16 values per anchor.
    public static let maxAnchors = 1 << 20

    /// How many anchors `generateAnchors` makes, counted the way it makes them (layers sharing a
    /// stride share a feature map), without making them; a Double, as huge sizes overflow Int.
    public var anchorCount: Double {
        var total = 0.0
        var layerID = 0
        while layerID < min(numLayers, strides.count) {
            var perCell = 0.0
            var last = layerID
            while last < strides.count && strides[last] == strides[layerID] {
                perCell += last == 0 && reduceBoxesInLowestLayer ? 3 : Double(aspectRatios.count) + (interpolatedScaleAspectRatio > 0 ? 1 : 0)
                last += 1
            }
            let stride = Double(strides[layerID])
            total += (Double(inputHeight) / stride).rounded(.up) * (Double(inputWidth) / stride).rounded(.up) * perCell
            layerID = last
        }
        return total
    }
}

extension SSDAnchorOptions {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        numLayers = try c.decode(Int.self, forKey: .numLayers)
        minScale = try c.decode(Double.self, forKey: .minScale)
        maxScale = try c.decode(Double.self, forKey: .maxScale)
        inputHeight = try c.decode(Int.self, forKey: .inputHeight)
        inputWidth = try c.decode(Int.self, forKey: .inputWidth)
        anchorOffsetX = try c.decodeIfPresent(Double.self, forKey: .anchorOffsetX) ?? 0.5
        anchorOffsetY = try c.decodeIfPresent(Double.self, forKey: .anchorOffsetY) ?? 0.5
        strides = try c.decode([Int].self, forKey: .strides)
        aspectRatios = try c.decode([Double].self, forKey: .aspectRatios)
        fixedAnchorSize = try c.decodeIfPresent(Bool.self, forKey: .fixedAnchorSize) ?? false
        interpolatedScaleAspectRatio = try c.decodeIfPresent(Double.self, forKey: .interpolatedScaleAspectRatio) ?? 1.0
        reduceBoxesInLowestLayer = try c.decodeIfPresent(Bool.self, forKey: .reduceBoxesInLowestLayer) ?? false
    }
}

/// One SSD anchor, normalised to the model input (0…1).
public struct Anchor: Sendable, Equatable {
    public var xCenter: Double
    public var yCenter: Double
    public var width: Double
    public var height: Double
}

/// MediaPipe's `SsdAnchorsCalculator::GenerateAnchors`, step for step (without the options
/// BlazeFace does not use: explicit feature-map sizes and multi-scale anchors). The order is
/// the model's output order: layer group, then row, then column, then anchor within the cell.
/// Call `validate()` first for a message instead of a short list; layers beyond the strides
/// are ignored here.
public func generateAnchors(_ o: SSDAnchorOptions) -> [Anchor] {
    func calcScale(_ index: Int, _ count: Int) -> Double {
        count == 1 ? (o.minScale + o.maxScale) * 0.5 : o.minScale + (o.maxScale - o.minScale) * Double(index) / Double(count - 1)
    }

    var anchors: [Anchor] = []
    var layerID = 0
    while layerID < min(o.numLayers, o.strides.count) {
        var anchorHeight: [Double] = []
        var anchorWidth: [Double] = []
        var aspectRatios: [Double] = []
        var scales: [Double] = []

        // Consecutive layers with the same stride are one feature map with more anchors per cell.
        var last = layerID
        while last < o.strides.count && o.strides[last] == o.strides[layerID] {
            let scale = calcScale(last, o.strides.count)
            if last == 0 && o.reduceBoxesInLowestLayer {
                aspectRatios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            } else {
                for ratio in o.aspectRatios {
                    aspectRatios.append(ratio)
                    scales.append(scale)
                }
                if o.interpolatedScaleAspectRatio > 0 {
                    let scaleNext = last == o.strides.count - 1 ? 1.0 : calcScale(last + 1, o.strides.count)
                    scales.append((scale * scaleNext).squareRoot())
                    aspectRatios.append(o.interpolatedScaleAspectRatio)
                }
            }
            last += 1
        }

        for i in aspectRatios.indices {
            let ratioSqrt = aspectRatios[i].squareRoot()
            anchorHeight.append(scales[i] / ratioSqrt)
            anchorWidth.append(scales[i] * ratioSqrt)
        }

        let stride = Double(o.strides[layerID])
        let featureMapHeight = Int((Double(o.inputHeight) / stride).rounded(.up))
        let featureMapWidth = Int((Double(o.inputWidth) / stride).rounded(.up))
        for y in 0..<featureMapHeight {
            for x in 0..<featureMapWidth {
                for a in anchorHeight.indices {
                    let xCenter = (Double(x) + o.anchorOffsetX) / Double(featureMapWidth)
                    let yCenter = (Double(y) + o.anchorOffsetY) / Double(featureMapHeight)
                    anchors.append(Anchor(xCenter: xCenter, yCenter: yCenter,
                                          width: o.fixedAnchorSize ? 1 : anchorWidth[a],
                                          height: o.fixedAnchorSize ? 1 : anchorHeight[a]))
                }
            }
        }
        layerID = last
    }
    return anchors
}
