import Foundation
import StreamLensCore

/// A model that could not be loaded or run: a backend's message (OpenVINO's call and its own text,
/// a server's answer).
public struct InferenceError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
/// How a model is compiled: the iOS app's compute-unit switch becomes `device`
/// (CPU, GPU, NPU, AUTO…), plus the knobs OpenVINO exposes as properties.
public struct InferenceOptions: Sendable, Equatable {
    public var device = "CPU"
    /// "f32", "bf16" or "f16" (INFERENCE_PRECISION_HINT); "auto" measures the candidates the
    /// device runs and keeps the faster (`PrecisionDecision`); nil leaves the device's default
    /// (bf16 on CPUs with avx512_bf16, where it can be the slower).
    public var precision: String?
    /// INFERENCE_NUM_THREADS; nil or 0: the process's budget decides (`ThreadPlan`).
    public var threads: Int?
    /// "LATENCY" or "THROUGHPUT" (PERFORMANCE_HINT).
    public var performanceHint: String? = "LATENCY"
    /// Compiled models are cached here, so a second start is fast (CACHE_DIR).
    public var cacheDirectory: String?
    /// Infer requests in flight at once (DL Streamer's `nireq`): with 2, the worker prepares and
    /// delivers one frame while OpenVINO's threads run the next.
    public var requests = 2
    /// Frames run as one inference (DL Streamer's batch-size): stages of one process with the
    /// same compiled model share batches of up to this many frames (`loadImageInference`).
    /// 1: every frame on its own, today's path.
    public var batchSize = 1
    /// Milliseconds a frame waits for others to fill its batch before what is there runs.
    public var batchTimeout = 10.0
    public init() {}
}

/// The model input a frame is turned into, as a manifest describes it.
public struct ImageInput: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// "NHWC" or "NCHW".
    public var layout: String
    /// "RGB" or "BGR".
    public var colorOrder: String
    /// u8 value v of channel c becomes (v - mean[c]) / scale[c]: one value for all channels,
    /// or one per channel in `colorOrder`.
    public var mean: [Float]
    public var scale: [Float]
    /// The image input's name, needed when the model has several inputs (the others are set
    /// with `ImageModel.setInput`).
    public var name: String?
    public init(width: Int, height: Int, layout: String, colorOrder: String, mean: [Float], scale: [Float], name: String? = nil) {
        self.width = width; self.height = height; self.layout = layout; self.colorOrder = colorOrder
        self.mean = mean; self.scale = scale; self.name = name
    }
    public init(width: Int, height: Int, layout: String, colorOrder: String, mean: Float, scale: Float, name: String? = nil) {
        self.init(width: width, height: height, layout: layout, colorOrder: colorOrder, mean: [mean], scale: [scale], name: name)
    }

    /// A manifest's input (at `width`×`height` when given: a stage may run it at another size).
    public init(_ m: ModelManifest.Input, width: Int? = nil, height: Int? = nil) {
        self.init(width: width ?? m.width, height: height ?? m.height, layout: m.layout.rawValue, colorOrder: m.colorOrder.rawValue,
                  mean: m.means.map { Float($0) }, scale: m.scales.map { Float($0) }, name: m.name)
    }

    /// Channel c's mean and scale.
    public func normalization(_ c: Int) -> (mean: Float, scale: Float) {
        (mean.count == 1 ? mean[0] : mean[c], scale.count == 1 ? scale[0] : scale[c])
    }
}

extension ImageInput {
    /// Which of a model's inputs takes the frames: the one `name` names, or the only one.
    /// `model` names the model (its file, or its server) in the message.
    public func imageInputIndex(among inputs: [String], of model: String) throws -> Int {
        if let name {
            guard let i = inputs.firstIndex(of: name) else {
                throw InferenceError("\(model) has no input named \(name) (inputs: \(inputs.joined(separator: ", ")))")
            }
            return i
        }
        guard inputs.count == 1 else {
            throw InferenceError("\(model) has \(inputs.count) inputs (\(inputs.joined(separator: ", "))); name the image input in the manifest's input.name")
        }
        return 0
    }
}

/// The frames a compiled model will receive: packed 8-bit RGB-family pixels.
public struct FrameLayout: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// GStreamer's name: RGB, BGR, RGBx, BGRx, RGBA, BGRA.
    public var pixelFormat: String
    /// Bytes per row.
    public var stride: Int
    public init(width: Int, height: Int, pixelFormat: String, stride: Int) {
        self.width = width; self.height = height; self.pixelFormat = pixelFormat; self.stride = stride
    }

    /// GRAY8: one channel, for second models on grey crops (lensclassify makes them).
    public static let supportedFormats = ["RGB", "BGR", "RGBx", "BGRx", "RGBA", "BGRA", "GRAY8"]
    public var channels: Int { pixelFormat == "GRAY8" ? 1 : pixelFormat.count == 3 ? 3 : 4 }

    /// The bytes a frame buffer must have at least (the last row needs no padding).
    public var minimumBytes: Int { stride * (height - 1) + width * channels }

    /// Bytes of the tensor one frame fills, letterbox borders included.
    public func tensorBytes(padding: (top: Int, left: Int, bottom: Int, right: Int)) -> Int {
        (width + padding.left + padding.right) * channels * (height + padding.top + padding.bottom)
    }

    /// The frame's rows into a tensor's bytes (padded layout; the borders are left as they are).
    public func copyRows(_ pixels: UnsafeRawBufferPointer, padding: (top: Int, left: Int, bottom: Int, right: Int), into base: UnsafeMutableRawPointer) {
        let rowBytes = width * channels, tensorRow = (width + padding.left + padding.right) * channels
        let origin = padding.top * tensorRow + padding.left * channels
        for row in 0..<height {
            base.advanced(by: origin + row * tensorRow).copyMemory(from: pixels.baseAddress!.advanced(by: row * stride), byteCount: rowBytes)
        }
    }
}

/// Where the model's square (or rectangle) comes from in the frame, done by the backend's
/// pre-processing (`Preprocessing`): pad (letterbox), crop (centre crop) or neither (stretch).
public enum FrameRegion: Sendable, Equatable {
    case whole
    case pad(top: Int, left: Int, bottom: Int, right: Int)
    case crop(x: Int, y: Int, width: Int, height: Int)
}

/// One output of an inference: its tensor name (or index), shape and values as f32.
public struct TensorData: Sendable, Equatable {
    public var name: String
    public var shape: [Int]
    public var values: [Float]
    public init(name: String, shape: [Int], values: [Float]) { self.name = name; self.shape = shape; self.values = values }
}

extension Array where Element == TensorData {
    /// The tensors' values as the buffers decoders read, valid during `body` (no copy).
    public func withBuffers<R>(_ body: ([UnsafeBufferPointer<Float>]) throws -> R) rethrows -> R {
        func nest(_ i: Int, _ views: [UnsafeBufferPointer<Float>]) throws -> R {
            guard i < count else { return try body(views) }
            return try self[i].values.withUnsafeBufferPointer { try nest(i + 1, views + [$0]) }
        }
        return try nest(0, [])
    }
}
