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

/// The steps in plain Swift, for when no registered backend compiles them: bilinear resampling
/// with half-pixel centres (what OpenVINO's RESIZE_LINEAR does, within a grey level: see
/// PreprocessingTests), letterbox borders black, a crop taken before resizing.
public final class SwiftPreprocessor: Preprocessor {
    public let shape: [Int]
    private let steps: Preprocessing
    /// For each output row and column: the two source rows/columns and the weight of the second,
    /// in the padded frame's coordinates (a padded pixel reads as 0).
    private let rows: [(Int, Int, Float)]
    private let columns: [(Int, Int, Float)]
    /// The source channel each output channel reads (colour order).
    private let channelMap: [Int]

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
        func taps(_ count: Int, from start: Int, length: Int, shift: Int) -> [(Int, Int, Float)] {
            let scale = Float(length) / Float(count)
            return (0..<count).map { i in
                let at = max(0, (Float(i) + 0.5) * scale - 0.5)
                let first = min(Int(at), length - 1), second = min(first + 1, length - 1)
                return (start + first - shift, start + second - shift, at - Float(first))
            }
        }
        rows = taps(input.height, from: source.y, length: source.height, shift: offset.y)
        columns = taps(input.width, from: source.x, length: source.width, shift: offset.x)
        let order: [Character] = switch frame.pixelFormat {
        case "GRAY8": ["G"]
        default: Array(frame.pixelFormat.prefix(3))
        }
        let wantedOrder: [Character] = channels == 1 ? ["G"] : (input.colorOrder == "BGR" ? ["B", "G", "R"] : ["R", "G", "B"])
        channelMap = wantedOrder.map { c in order.firstIndex(of: c) ?? 0 }
    }

    public func tensor(_ pixels: UnsafeRawBufferPointer) throws -> Data {
        let frame = steps.frame, input = steps.input
        guard pixels.count >= frame.minimumBytes else {
            throw InferenceError("frame buffer has \(pixels.count) bytes, expected \(frame.stride * frame.height)")
        }
        let channels = channelMap.count, pixelBytes = frame.channels
        let nchw = input.layout == "NCHW"
        let (mean, scale) = (input.mean, input.scale)
        let plane = input.width * input.height
        var values = [Float](repeating: 0, count: plane * channels)
        func at(_ y: Int, _ x: Int, _ c: Int) -> Float {
            guard y >= 0, x >= 0, y < frame.height, x < frame.width else { return 0 }
            return Float(pixels[y * frame.stride + x * pixelBytes + c])
        }
        for (oy, row) in rows.enumerated() {
            for (ox, column) in columns.enumerated() {
                for (oc, c) in channelMap.enumerated() {
                    let top = at(row.0, column.0, c) * (1 - column.2) + at(row.0, column.1, c) * column.2
                    let bottom = at(row.1, column.0, c) * (1 - column.2) + at(row.1, column.1, c) * column.2
                    let v = (top * (1 - row.2) + bottom * row.2 - mean) / scale
                    values[nchw ? oc * plane + oy * input.width + ox : (oy * input.width + ox) * channels + oc] = v
                }
            }
        }
        return values.withUnsafeBytes { Data($0) }
    }
}
