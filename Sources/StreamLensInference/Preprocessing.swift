import Foundation
import StreamLensCore

/// What a frame becomes before a network sees it: the part of the frame (`region`: letterbox
/// borders, a centre crop, or the whole), resized to the input's size, in its colour order,
/// as (v - mean) / scale, in its layout. A backend that can compiles these steps into its graph
/// (OpenVINO); one that cannot (a server) gets a `Preprocessor` from the registry.
public struct Preprocessing: Sendable, Equatable {
    public var input: ImageInput
    public var frame: FrameLayout
    public var region: FrameRegion

    public init(input: ImageInput, frame: FrameLayout, region: FrameRegion = .whole) {
        self.input = input; self.frame = frame; self.region = region
    }

}

extension FrameLayout {
    /// Throws the user's message unless frames in this pixel format can feed a model.
    public func checkFeedable() throws {
        guard Self.supportedFormats.contains(pixelFormat) else {
            throw InferenceError("frames in \(pixelFormat) cannot feed a model (use one of \(Self.supportedFormats.joined(separator: ", ")))")
        }
    }
}

extension ImageInput {
    /// The input tensor of one frame: [1, C, H, W] or [1, H, W, C], one channel for GRAY.
    public var tensorShape: [Int] {
        let channels = colorOrder == "GRAY" ? 1 : 3
        return layout == "NCHW" ? [1, channels, height, width] : [1, height, width, channels]
    }
}

/// Pre-processing ready to run: a frame's pixels in, the model's f32 input tensor out.
public protocol Preprocessor: AnyObject {
    /// The input tensor's shape (4 dimensions, in `input.layout`).
    var shape: [Int] { get }
    /// The tensor for one frame (rows of `frame.stride` bytes), as f32 bytes.
    func tensor(_ pixels: UnsafeRawBufferPointer) throws -> Data
}

/// The steps in plain Swift: bilinear resampling with half-pixel centres (what OpenVINO's
/// RESIZE_LINEAR does, within a grey level: see PreprocessingTests), letterbox borders black, a
/// crop taken before resizing. For a backend that cannot compile them (a server), and for
/// OpenVINO when the model's input is much smaller than the frame: sampling the input's pixels
/// out of the frame where it lies costs a fraction of copying the frame into the request.
public final class SwiftPreprocessor: Preprocessor {
    public let shape: [Int]
    private let steps: Preprocessing
    /// For each output row: the byte offsets of its two source rows in the frame (nil: a
    /// letterbox border, read as 0) and the weight of the second.
    private let rows: [(Int?, Int?, Float)]
    /// For each output column: the byte offsets of its two source pixels in a row and their
    /// weights (0 for a border column).
    private let columns: [(Int, Int, Float, Float)]
    /// The source channel each output channel reads (colour order).
    private let channelMap: [Int]
    /// A border row reads as zeros: a row of them as wide as the frame's rows.
    private let zeros: [UInt8]

    public init(_ steps: Preprocessing, shape: [Int]) throws {
        try steps.frame.checkFeedable()
        let input = steps.input, frame = steps.frame
        let channels = input.colorOrder == "GRAY" ? 1 : 3
        guard shape == input.tensorShape else { throw InferenceError("pre-processing for \(input.width)x\(input.height) \(input.layout) cannot make a tensor of shape \(shape)") }
        guard (frame.pixelFormat == "GRAY8") == (channels == 1) else {
            throw InferenceError("frames in \(frame.pixelFormat) for a model that takes \(input.colorOrder)")
        }
        self.shape = shape
        self.steps = steps
        // The source rectangle in padded-frame coordinates, and the offset of the frame in it.
        var source = (x: 0, y: 0, width: frame.width, height: frame.height)
        var offset = (x: 0, y: 0)
        switch steps.region {
        case .whole: break
        case let .pad(top, left, bottom, right):
            source = (0, 0, frame.width + left + right, frame.height + top + bottom)
            offset = (left, top)
        case let .crop(x, y, width, height):
            guard x >= 0, y >= 0, width > 0, height > 0, x + width <= frame.width, y + height <= frame.height else {
                throw InferenceError("crop \(width)x\(height) at \(x),\(y) is outside the \(frame.width)x\(frame.height) frame")
            }
            source = (x, y, width, height)
        }
        /// Each output index's two source indices (in frame coordinates; outside 0..<limit is a
        /// border) and the weight of the second.
        func taps(_ count: Int, from start: Int, length: Int, shift: Int) -> [(Int, Int, Float)] {
            let scale = Float(length) / Float(count)
            return (0..<count).map { i in
                let at = max(0, (Float(i) + 0.5) * scale - 0.5)
                let first = min(Int(at), length - 1), second = min(first + 1, length - 1)
                return (start + first - shift, start + second - shift, at - Float(first))
            }
        }
        rows = taps(input.height, from: source.y, length: source.height, shift: offset.y).map { a, b, w in
            ((0..<frame.height).contains(a) ? a * frame.stride : nil, (0..<frame.height).contains(b) ? b * frame.stride : nil, w)
        }
        columns = taps(input.width, from: source.x, length: source.width, shift: offset.x).map { a, b, w in
            let (inA, inB) = ((0..<frame.width).contains(a), (0..<frame.width).contains(b))
            return (inA ? a * frame.channels : 0, inB ? b * frame.channels : 0, inA ? 1 - w : 0, inB ? w : 0)
        }
        let order: [Character] = switch frame.pixelFormat {
        case "GRAY8": ["G"]
        default: Array(frame.pixelFormat.prefix(3))
        }
        let wantedOrder: [Character] = channels == 1 ? ["G"] : (input.colorOrder == "BGR" ? ["B", "G", "R"] : ["R", "G", "B"])
        channelMap = wantedOrder.map { c in order.firstIndex(of: c) ?? 0 }
        zeros = [UInt8](repeating: 0, count: frame.stride)
    }

    /// Values in the tensor.
    public var count: Int { shape.reduce(1, *) }

    public func tensor(_ pixels: UnsafeRawBufferPointer) throws -> Data {
        var values = [Float](repeating: 0, count: count)
        try values.withUnsafeMutableBufferPointer { try write(pixels, into: $0) }
        return values.withUnsafeBytes { Data($0) }
    }

    /// Writes the tensor of one frame (rows of `frame.stride` bytes) into `values` (`count`
    /// floats): the frame is read only where the input samples it.
    public func write(_ pixels: UnsafeRawBufferPointer, into values: UnsafeMutableBufferPointer<Float>) throws {
        let frame = steps.frame, input = steps.input
        guard pixels.count >= frame.minimumBytes, let frameBase = pixels.baseAddress else {
            throw InferenceError("frame buffer has \(pixels.count) bytes, expected \(frame.stride * frame.height)")
        }
        guard values.count >= count, let out = values.baseAddress else { throw InferenceError("a tensor of \(values.count) values for \(count)") }
        let base = frameBase.assumingMemoryBound(to: UInt8.self)
        let channels = channelMap.count
        let nchw = input.layout == "NCHW"
        let width = input.width, plane = input.width * input.height
        zeros.withUnsafeBufferPointer { zero in
            columns.withUnsafeBufferPointer { columns in
                for (oy, row) in rows.enumerated() {
                    let top = row.0.map { base + $0 } ?? zero.baseAddress!, bottom = row.1.map { base + $0 } ?? zero.baseAddress!
                    let (wTop, wBottom) = (1 - row.2, row.2)
                    for oc in 0..<channels {
                        let c = channelMap[oc]
                        let (mean, scale) = input.normalization(oc)
                        let inverseScale = 1 / scale
                        // NCHW: a channel's row is contiguous; NHWC: channels interleave.
                        var at = nchw ? oc * plane + oy * width : oy * width * channels + oc
                        let step = nchw ? 1 : channels
                        for column in columns {
                            let t = Float(top[column.0 + c]) * column.2 + Float(top[column.1 + c]) * column.3
                            let b = Float(bottom[column.0 + c]) * column.2 + Float(bottom[column.1 + c]) * column.3
                            out[at] = (t * wTop + b * wBottom - mean) * inverseScale
                            at += step
                        }
                    }
                }
            }
        }
    }
}
