import COpenVINO
import Foundation
import StreamLensCore
import Synchronization

// The only Swift file that imports COpenVINO. Everyone else sees InferenceEngine, ImageModel
// and plain Swift values.

/// A failed OpenVINO call: the call's name, its status and OpenVINO's own last message.
public struct InferenceError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One status-to-throw helper for the whole C API.
private func check(_ status: ov_status_e, _ call: StaticString) throws {
    guard status != OK else { return }
    // The message is a copy the caller owns (OpenVINO allocates it per call): freed with ov_free,
    // found by LeakSanitizer (make test-asan).
    let detail = ov_get_last_err_msg().map { text -> String in
        defer { ov_free(text) }
        return String(cString: text)
    }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    throw InferenceError("\(call) failed (status \(status.rawValue))" + (detail.isEmpty ? "" : ": \(detail)"))
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
    /// u8 value v becomes (v - mean) / scale.
    public var mean: Float
    public var scale: Float
    /// The image input's name, needed when the model has several inputs (the others are set
    /// with `ImageModel.setInput`).
    public var name: String?
    public init(width: Int, height: Int, layout: String, colorOrder: String, mean: Float, scale: Float, name: String? = nil) {
        self.width = width; self.height = height; self.layout = layout; self.colorOrder = colorOrder
        self.mean = mean; self.scale = scale; self.name = name
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
    var channels: Int { pixelFormat == "GRAY8" ? 1 : pixelFormat.count == 3 ? 3 : 4 }

    /// The bytes a frame buffer must have at least (the last row needs no padding).
    var minimumBytes: Int { stride * (height - 1) + width * channels }

    /// Bytes of the tensor one frame fills, letterbox borders included.
    func tensorBytes(padding: (top: Int, left: Int, bottom: Int, right: Int)) -> Int {
        (width + padding.left + padding.right) * channels * (height + padding.top + padding.bottom)
    }

    /// The frame's rows into a tensor's bytes (padded layout; the borders are left as they are).
    func copyRows(_ pixels: UnsafeRawBufferPointer, padding: (top: Int, left: Int, bottom: Int, right: Int), into base: UnsafeMutableRawPointer) {
        let rowBytes = width * channels, tensorRow = (width + padding.left + padding.right) * channels
        let origin = padding.top * tensorRow + padding.left * channels
        for row in 0..<height {
            base.advanced(by: origin + row * tensorRow).copyMemory(from: pixels.baseAddress!.advanced(by: row * stride), byteCount: rowBytes)
        }
    }
    var colorFormat: ov_color_format_e? {
        switch pixelFormat {
        case "GRAY8": return GRAY
        case "RGB": return RGB
        case "BGR": return BGR
        case "RGBx", "RGBA": return RGBX
        case "BGRx", "BGRA": return BGRX
        default: return nil
        }
    }
}

/// Where the model's square (or rectangle) comes from in the frame, done by OpenVINO's
/// pre-processing rather than by hand: pad (letterbox), crop (centre crop) or neither (stretch).
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

/// The OpenVINO runtime (one `ov_core_t`), its compiled models and the process's thread
/// budget. Model stages share one (`shared()`), so that models compiled twice with the same
/// settings are compiled once and models that run at the same time divide the cores
/// (InferenceRuntime.swift says why and how). Thread-safe as OpenVINO's core is.
///
/// @unchecked Sendable: `core` is created once and never reassigned; OpenVINO documents
/// ov::Core as safe to use from several threads; the caches are behind locks.
public final class InferenceEngine: @unchecked Sendable {
    private let core: OpaquePointer
    /// The model stages alive, for the thread budget.
    let models = ModelRegistry()
    /// Compiled models by everything that went into them; held weakly (an entry goes when the
    /// last ImageModel made from it does).
    private let compiledModels = Mutex<[String: WeakCompiledModel]>([:])
    /// Batchers by their compiled model's key (batch size included); held weakly, like models.
    private let batchers = Mutex<[String: WeakBatchedModel]>([:])
    /// Why a model refused a batch, by the same key: the next stage asking is told at once
    /// (finding out may take a whole compilation, when an output shows the refusal).
    private let refusals = Mutex<[String: String]>([:])
    /// One compilation at a time: a second stage asking for the same model waits and shares
    /// it, and precision=auto measures without another compilation running beside it.
    private let compiling = NSLock()

    public init() throws {
        var core: OpaquePointer?
        try check(ov_core_create(&core), "ov_core_create")
        self.core = core!
    }

    deinit { ov_core_free(core) }

    private static let process: Result<InferenceEngine, InferenceError> = {
        do { return .success(try InferenceEngine()) } catch let error as InferenceError { return .failure(error) } catch { return .failure(InferenceError("\(error)")) }
    }()

    /// Models are compiled for throughput (`ThreadPlan.plan`): set by `streamlens serve`, whose
    /// sources share each model one after another.
    public static let throughput = Atomic<Bool>(false)

    /// The process's engine, made on first use: every model stage (and the plugin's elements in
    /// one process) compiles through it.
    public static func shared() throws -> InferenceEngine { try process.get() }

    /// Counts a stage that will run the local model at `path` in the thread budget while the
    /// token lives (stages register when built, before compiling).
    public func registerModel(_ path: String) -> ModelUse { models.add(path) }

    /// The cores this process may run on.
    public var cores: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// The thread plan a model compiled now gets.
    public func threadPlan(path: String, options: InferenceOptions) -> ThreadPlan {
        let users = models.count(sharing: path)
        return ThreadPlan.plan(device: options.device, threads: options.threads, cores: cores, models: users.all, sharing: users.same,
                               throughput: Self.throughput.load(ordering: .relaxed))
    }

    /// How many compiled models are alive in the cache (for tests and summaries).
    public var compiledModelCount: Int { compiledModels.withLock { $0.values.filter { $0.model != nil }.count } }

    /// A device's OPTIMIZATION_CAPABILITIES ("FP32", "BF16", "INT8"…); empty if it has none.
    public func capabilities(of device: String) -> [String] {
        var value: UnsafeMutablePointer<CChar>?
        guard ov_core_get_property(core, device, "OPTIMIZATION_CAPABILITIES", &value) == OK, let value else { return [] }
        defer { ov_free(value) }
        return String(cString: value).split(separator: " ").map(String.init)
    }

    /// Devices OpenVINO can use here ("CPU", "GPU.0", …).
    public func availableDevices() throws -> [String] {
        var devices = ov_available_devices_t()
        try check(ov_core_get_available_devices(core, &devices), "ov_core_get_available_devices")
        defer { ov_available_devices_free(&devices) }
        return (0..<devices.size).compactMap { devices.devices[$0].map { String(cString: $0) } }
    }

    /// Checks that `device` exists here; virtual devices (AUTO, MULTI, HETERO, BATCH) pick among
    /// the real ones and are always accepted.
    public func checkDevice(_ device: String) throws {
        let base = String(device.prefix { $0 != ":" && $0 != "." })
        if ["AUTO", "MULTI", "HETERO", "BATCH"].contains(base) { return }
        let available = try availableDevices()
        guard available.contains(where: { $0 == device || $0.hasPrefix(base + ".") || $0 == base }) else {
            throw InferenceError("device \(device) is not available here (available: \(available.joined(separator: ", ")))")
        }
    }

    /// Reads a model (.xml, .onnx, .tflite), fixes its image input's shape (batch → 1, height and
    /// width → `input`'s, reshaping a fixed-size model when they differ), adds pre-processing from
    /// `frame` to `input`, and compiles it. A model with several inputs names its image input in
    /// `input.name`; the others keep their shapes and are set with `ImageModel.setInput`.
    ///
    /// `resizable`: a model with a fixed input size may be reshaped to `input`'s size (image-to-image
    /// models run at a chosen size); otherwise a fixed size that differs from `input` is an error.
    public func loadImageModel(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion,
                               options: InferenceOptions, resizable: Bool = false) throws -> ImageModel {
        compiling.lock()
        defer { compiling.unlock() }
        let compiled = try compiledModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: 1)
        return try ImageModel(compiled: compiled, requests: options.requests)
    }

    /// What a model stage runs: with `options.batchSize` 1, `loadImageModel`'s ImageModel; above
    /// 1, a handle on the process's batcher for this compiled model, whose frames run together
    /// with those of every other stage holding one (`BatchedModel`). A model that cannot take a
    /// batch (its graph fixes batch 1, it has other inputs each stage sets, an output is not
    /// batched in its first dimension) runs as without batching, and its `settings` say why.
    public func loadImageInference(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion,
                                   options: InferenceOptions, resizable: Bool = false) throws -> any ImageInference {
        guard options.batchSize > 1 else {
            return try loadImageModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable)
        }
        let refusal: String
        do {
            compiling.lock()
            defer { compiling.unlock() }
            let key = try cacheKey(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: options.batchSize)
            if let shared = batchers.withLock({ $0[key]?.model }) { return BatchedImageModel(shared, options: options) }
            if let known = refusals.withLock({ $0[key] }) { throw InferenceError(known) }
            let batched: CompiledModel
            do {
                batched = try compiledModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable,
                                            batch: options.batchSize)
                if !batched.otherInputs.isEmpty {
                    throw InferenceError("its other inputs (\(batched.otherInputs.map(\.name).joined(separator: ", "))) are set by each stage")
                }
                for output in batched.outputs where output.shape.first != options.batchSize {
                    throw InferenceError("its output \(output.name) is \(output.shape), not batched in its first dimension")
                }
            } catch let error as InferenceError {
                refusals.withLock { $0[key] = error.message }
                throw error
            }
            let single = try compiledModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: 1)
            let batcher = try BatchedModel(batch: batched, single: single, size: options.batchSize)
            batchers.withLock { cache in
                cache = cache.filter { $0.value.model != nil }
                cache[key] = WeakBatchedModel(batcher)
            }
            return BatchedImageModel(batcher, options: options)
        } catch let error as InferenceError {
            refusal = error.message
        }
        // Not batched: the stage's own infer requests, as with batch-size=1 (a file that is not
        // there fails here with the same message it would without batching).
        let model = try loadImageModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable)
        model.note = "batch-size \(options.batchSize) refused (\(refusal)): \(model.requestCount) infer requests instead"
        return model
    }

    /// Everything that goes into a compiled model, as the caches' key; checks what can be checked
    /// before reading the model (the file, the frame format, the device).
    private func cacheKey(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion, options: InferenceOptions,
                          resizable: Bool, batch: Int) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else { throw InferenceError("model file \(path) not found") }
        if let reason = InputFile.notAFile(path) { throw InferenceError("model file \(path) is \(reason)") }
        guard frame.colorFormat != nil else {
            throw InferenceError("frames in \(frame.pixelFormat) cannot feed a model (use one of \(FrameLayout.supportedFormats.joined(separator: ", ")))")
        }
        try checkDevice(options.device)
        let plan = threadPlan(path: path, options: options)
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let stamp = "\((attributes?[.size] as? NSNumber)?.int64Value ?? -1)@\((attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"
        // The budget's plan is not part of the key (an explicit threads= is): a stage that comes
        // later (another source in `streamlens serve`) shares the model compiled before it
        // rather than compiling it again for a plan that counts one more user.
        return [path, stamp, options.device, options.precision ?? "default", plan.explicit ? "\(plan)" : "budget", "\(input)", "\(frame)",
                "\(region)", "\(resizable)", options.cacheDirectory ?? ""].joined(separator: "|") + (batch > 1 ? "|batch \(batch)" : "")
    }

    /// The compiled model for these settings, from the cache or compiled now (`compiling` held).
    /// `batch` > 1: the image input's batch reshaped to it (throws when the model refuses).
    private func compiledModel(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion, options: InferenceOptions,
                               resizable: Bool, batch: Int) throws -> CompiledModel {
        let key = try cacheKey(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: batch)
        if let shared = compiledModels.withLock({ $0[key]?.model }) { return shared }
        var plan = threadPlan(path: path, options: options)
        // A batcher runs at most `slotCount` batches at once: more streams would only split
        // the threads among streams that stay idle.
        if batch > 1 && !plan.explicit { plan.streams = min(plan.streams, BatchedModel.slotCount) }
        var model: OpaquePointer?
        do {
            try check(ov_core_read_model(core, path, nil, &model), "ov_core_read_model")
        } catch let error as InferenceError {
            // OpenVINO's text is a stack of "Exception from …cpp:84:" lines: lead with the file.
            let reason = error.message.split(separator: "\n").first { $0.contains("Unable to read") || $0.contains("rror") && !$0.hasPrefix("Exception from") }
            throw InferenceError("model file \(path) cannot be read: it is damaged or not a model (OpenVINO reads .onnx, .tflite, .xml, .pb, .pdmodel)"
                                 + (reason.map { "\n  OpenVINO: \($0.trimmingCharacters(in: .whitespaces))" } ?? ""))
        }
        defer { ov_model_free(model) }
        let compiled = try compile(model!, input: input, frame: frame, colorFormat: frame.colorFormat!, region: region, options: options,
                                   plan: plan, resizable: resizable, batch: batch, label: path)
        compiledModels.withLock { cache in
            cache = cache.filter { $0.value.model != nil }
            cache[key] = WeakCompiledModel(compiled)
        }
        return compiled
    }

    /// The pre-processing alone: frames in, the float tensor a model of `shape` (in
    /// `input.layout`) takes out — built and run by the same code as a local model's, so a
    /// remote model receives exactly what the local one would. The network is a Parameter
    /// feeding a Result (an IR read from memory); OpenVINO compiles the steps in front of it.
    /// f32 throughout, whatever the device's default precision.
    public func loadPreprocessing(shape: [Int], input: ImageInput, frame: FrameLayout, region: FrameRegion) throws -> ImageModel {
        guard let colorFormat = frame.colorFormat else {
            throw InferenceError("frames in \(frame.pixelFormat) cannot feed a model (use one of \(FrameLayout.supportedFormats.joined(separator: ", ")))")
        }
        guard shape.count == 4, shape.allSatisfy({ $0 > 0 }) else { throw InferenceError("pre-processing needs a static 4-d shape, got \(shape)") }
        let dims = shape.map { "<dim>\($0)</dim>" }.joined()
        let ir = """
            <?xml version="1.0"?>
            <net name="preprocessing" version="11"><layers>
            <layer id="0" name="image" type="Parameter" version="opset1"><data shape="\(shape.map(String.init).joined(separator: ","))" element_type="f32"/>
            <output><port id="0" precision="FP32" names="image">\(dims)</port></output></layer>
            <layer id="1" name="tensor" type="Result" version="opset1"><input><port id="0" precision="FP32">\(dims)</port></input></layer>
            </layers><edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges></net>
            """
        var model: OpaquePointer?
        try ir.withCString { try check(ov_core_read_model_from_memory_buffer(core, $0, strlen($0), nil, &model), "ov_core_read_model_from_memory_buffer") }
        defer { ov_model_free(model) }
        var options = InferenceOptions()
        options.precision = "f32"
        options.threads = 1 // a few arithmetic steps, not worth more
        let compiled = try compile(model!, input: input, frame: frame, colorFormat: colorFormat, region: region, options: options,
                                   plan: ThreadPlan.plan(device: "CPU", threads: 1, cores: cores, models: 1, sharing: 1),
                                   resizable: false, batch: 1, label: "pre-processing")
        return try ImageModel(compiled: compiled, requests: 1) // used synchronously, before a request to the server
    }

    /// `model` with OpenVINO's pre-processing for `frame` and `region` in front, compiled.
    private func compile(_ model: OpaquePointer, input: ImageInput, frame: FrameLayout, colorFormat: ov_color_format_e, region: FrameRegion,
                         options: InferenceOptions, plan: ThreadPlan, resizable: Bool, batch: Int, label path: String) throws -> CompiledModel {
        let inputs = try ports(model, inputs: true)
        let imageIndex: Int
        if let name = input.name {
            guard let i = inputs.firstIndex(where: { $0.name == name }) else {
                throw InferenceError("\(path) has no input named \(name) (inputs: \(inputs.map(\.name).joined(separator: ", ")))")
            }
            imageIndex = i
        } else {
            guard inputs.count == 1 else {
                throw InferenceError("\(path) has \(inputs.count) inputs (\(inputs.map(\.name).joined(separator: ", "))); name the image input in the manifest's input.name")
            }
            imageIndex = 0
        }
        try makeStatic(model, index: imageIndex, name: inputs.count > 1 ? inputs[imageIndex].name : nil, input: input, resizable: resizable, batch: batch)

        var ppp: OpaquePointer?
        try check(ov_preprocess_prepostprocessor_create(model, &ppp), "ov_preprocess_prepostprocessor_create")
        defer { ov_preprocess_prepostprocessor_free(ppp) }
        var inputInfo: OpaquePointer?
        try check(ov_preprocess_prepostprocessor_get_input_info_by_index(ppp, imageIndex, &inputInfo), "ov_preprocess_prepostprocessor_get_input_info_by_index")
        defer { ov_preprocess_input_info_free(inputInfo) }

        var tensorInfo: OpaquePointer?
        try check(ov_preprocess_input_info_get_tensor_info(inputInfo, &tensorInfo), "ov_preprocess_input_info_get_tensor_info")
        defer { ov_preprocess_input_tensor_info_free(tensorInfo) }
        try check(ov_preprocess_input_tensor_info_set_element_type(tensorInfo, U8), "ov_preprocess_input_tensor_info_set_element_type")
        try withLayout("NHWC") { try check(ov_preprocess_input_tensor_info_set_layout(tensorInfo, $0), "ov_preprocess_input_tensor_info_set_layout") }
        try check(ov_preprocess_input_tensor_info_set_color_format(tensorInfo, colorFormat), "ov_preprocess_input_tensor_info_set_color_format")
        // Letterbox padding is done by placing the frame's rows into a zeroed buffer of the padded
        // size (a copy, no resampling): OpenVINO pads only f32 tensors, and converting a whole
        // 720p frame to f32 before resizing cost twice the inference (8 ms vs 3.5 ms a frame).
        var padding = (top: 0, left: 0, bottom: 0, right: 0)
        if case let .pad(top, left, bottom, right) = region { padding = (top, left, bottom, right) }
        let tensorHeight = frame.height + padding.top + padding.bottom, tensorWidth = frame.width + padding.left + padding.right
        try check(ov_preprocess_input_tensor_info_set_spatial_static_shape(tensorInfo, tensorHeight, tensorWidth), "ov_preprocess_input_tensor_info_set_spatial_static_shape")

        var steps: OpaquePointer?
        try check(ov_preprocess_input_info_get_preprocess_steps(inputInfo, &steps), "ov_preprocess_input_info_get_preprocess_steps")
        defer { ov_preprocess_preprocess_steps_free(steps) }
        // Crop and resize first, on u8; colour conversion and f32 only at the model's size. (Colour
        // conversion of the whole 720p frame before resizing made pre-processing cost 3x the
        // model: 6.9 ms a frame letterboxed, 2.3 ms in this order.)
        if case let .crop(x, y, width, height) = region {
            var begin: [Int32] = [0, Int32(y), Int32(x), 0]
            var end: [Int32] = [Int32(batch), Int32(y + height), Int32(x + width), Int32(frame.channels)]
            try check(ov_preprocess_preprocess_steps_crop(steps, &begin, 4, &end, 4), "ov_preprocess_preprocess_steps_crop")
        }
        try check(ov_preprocess_preprocess_steps_resize(steps, RESIZE_LINEAR), "ov_preprocess_preprocess_steps_resize")
        if colorFormat == GRAY {
            guard input.colorOrder == "GRAY" else { throw InferenceError("\(path): grey frames for a model that takes \(input.colorOrder)") }
        } else {
            try check(ov_preprocess_preprocess_steps_convert_color(steps, input.colorOrder == "BGR" ? BGR : RGB), "ov_preprocess_preprocess_steps_convert_color")
        }
        try check(ov_preprocess_preprocess_steps_convert_element_type(steps, F32), "ov_preprocess_preprocess_steps_convert_element_type")
        if input.mean != 0 { try check(ov_preprocess_preprocess_steps_mean(steps, input.mean), "ov_preprocess_preprocess_steps_mean") }
        if input.scale != 1 { try check(ov_preprocess_preprocess_steps_scale(steps, input.scale), "ov_preprocess_preprocess_steps_scale") }

        var modelInfo: OpaquePointer?
        try check(ov_preprocess_input_info_get_model_info(inputInfo, &modelInfo), "ov_preprocess_input_info_get_model_info")
        defer { ov_preprocess_input_model_info_free(modelInfo) }
        try withLayout(input.layout) { try check(ov_preprocess_input_model_info_set_layout(modelInfo, $0), "ov_preprocess_input_model_info_set_layout") }

        // Every output handed over as f32, whatever the model computes it in (f16, u8, i8, i32…):
        // OpenVINO converts at the end of the network, and the readers below only know f32.
        for i in 0..<(try portCount(model, inputs: false)) {
            var outputInfo: OpaquePointer?
            try check(ov_preprocess_prepostprocessor_get_output_info_by_index(ppp, i, &outputInfo), "ov_preprocess_prepostprocessor_get_output_info_by_index")
            defer { ov_preprocess_output_info_free(outputInfo) }
            var outputTensor: OpaquePointer?
            try check(ov_preprocess_output_info_get_tensor_info(outputInfo, &outputTensor), "ov_preprocess_output_info_get_tensor_info")
            defer { ov_preprocess_output_tensor_info_free(outputTensor) }
            try check(ov_preprocess_output_set_element_type(outputTensor, F32), "ov_preprocess_output_set_element_type")
        }

        var built: OpaquePointer?
        try check(ov_preprocess_prepostprocessor_build(ppp, &built), "ov_preprocess_prepostprocessor_build")
        defer { ov_model_free(built) }

        let outputs = try ports(built!, inputs: false)
        let otherInputs = try ports(built!, inputs: true).enumerated().filter { $0.offset != imageIndex }.map(\.element)
        let tensorShape = [batch, tensorHeight, tensorWidth, frame.channels]
        let (compiled, precision) = try compileChoosingPrecision(built!, options: options, plan: plan, tensorShape: tensorShape,
                                                                 imageInput: imageIndex, label: path)
        return CompiledModel(engine: self, pointer: compiled, frame: frame, padding: padding, imageInput: imageIndex,
                             otherInputs: otherInputs, outputs: outputs, settings: "\(precision), \(plan)")
    }

    /// One compilation with `precision` (nil: the device's default) and the thread plan.
    private func compileOnce(_ built: OpaquePointer, options: InferenceOptions, plan: ThreadPlan, precision: String?) throws -> OpaquePointer {
        var pairs: [(String, String)] = []
        if let precision { pairs.append(("INFERENCE_PRECISION_HINT", precision)) }
        if let threads = plan.threads { pairs.append(("INFERENCE_NUM_THREADS", String(threads))) }
        if plan.streams > 1 {
            pairs.append(("NUM_STREAMS", String(plan.streams)))
        } else if let h = options.performanceHint {
            pairs.append(("PERFORMANCE_HINT", h))
        }
        if let pinning = plan.pinning { pairs.append(("ENABLE_CPU_PINNING", pinning ? "YES" : "NO")) }
        // A directory of blobs for each precision: OpenVINO's model cache (2026.4, CPU) does not
        // key a blob by INFERENCE_PRECISION_HINT. The same model compiled at f16 after f32 in one
        // CACHE_DIR loaded the f32 blob (LOADED_FROM_CACHE, f32's speed) while reporting f16, so
        // a pinned precision could run another and precision=auto timed one blob twice.
        if let c = options.cacheDirectory { pairs.append(("CACHE_DIR", c + "/" + (precision ?? "default"))) }
        var compiled: OpaquePointer?
        try withProperties(pairs) { count, properties in
            try check(ov_core_compile_model_props(core, built, options.device, count, properties, &compiled), "ov_core_compile_model_props")
        }
        return compiled!
    }

    /// The precision a compiled model runs at, as OpenVINO reports it ("f32", "bf16", "f16").
    private func reportedPrecision(_ compiled: OpaquePointer) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard ov_compiled_model_get_property(compiled, "INFERENCE_PRECISION_HINT", &value) == OK, let value else { return nil }
        defer { ov_free(value) }
        let text = String(cString: value).lowercased()
        return ["float32": "f32", "bfloat16": "bf16", "float16": "f16"][text] ?? text
    }

    /// Compiles with the precision asked for; for "auto" on the CPU, with the faster of the
    /// candidates the CPU runs (measured here on the model's own input shape, a few inferences
    /// each, interleaved, or read from an earlier start's decision). Returns the compiled model
    /// and what to say about its precision.
    private func compileChoosingPrecision(_ built: OpaquePointer, options: InferenceOptions, plan: ThreadPlan, tensorShape: [Int],
                                          imageInput: Int, label path: String) throws -> (OpaquePointer, String) {
        guard options.precision == "auto" else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: options.precision)
            if let asked = options.precision { return (compiled, "precision \(asked)") }
            return (compiled, "precision \(reportedPrecision(compiled) ?? "?") (\(options.device)'s default)")
        }
        guard options.device == "CPU" else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: nil)
            return (compiled, "precision auto → \(reportedPrecision(compiled) ?? "?") (\(options.device) chooses its own)")
        }
        let candidates = precisionCandidates(capabilities: capabilities(of: options.device))
        let file = options.cacheDirectory.map {
            PrecisionDecision.file(in: $0, model: path, device: options.device, shape: tensorShape, plan: plan, candidates: candidates)
        }
        if let file, let decision = PrecisionDecision.load(file), candidates.contains(decision.precision) {
            return (try compileOnce(built, options: options, plan: plan, precision: decision.precision), decision.summary(device: options.device, cached: true))
        }
        // Each candidate compiled; one the device runs as another precision (a bf16 hint on a
        // CPU without bf16 runs in f32) is not a candidate here.
        var runs: [(precision: String, compiled: OpaquePointer)] = []
        var dropped: [String] = []
        for candidate in candidates {
            guard let compiled = try? compileOnce(built, options: options, plan: plan, precision: candidate) else { dropped.append(candidate); continue }
            let real = reportedPrecision(compiled) ?? candidate
            if real != candidate || runs.contains(where: { $0.precision == real }) {
                ov_compiled_model_free(compiled)
                dropped.append(candidate)
                continue
            }
            runs.append((candidate, compiled))
        }
        guard !runs.isEmpty else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: "f32")
            return (compiled, "precision auto → f32 (none of \(candidates.joined(separator: ", ")) compiled as itself)")
        }
        let decision: PrecisionDecision
        if runs.count == 1 {
            decision = PrecisionDecision(precision: runs[0].precision, milliseconds: [:],
                                         reason: "the only precision \(options.device) runs here" + (dropped.isEmpty ? "" : "; \(dropped.joined(separator: ", ")) would run as \(runs[0].precision)"))
        } else {
            do {
                decision = PrecisionDecision.fastest(try medianMilliseconds(runs, tensorShape: tensorShape, imageInput: imageInput))!
            } catch {
                runs.forEach { ov_compiled_model_free($0.compiled) }
                throw error
            }
        }
        for run in runs where run.precision != decision.precision { ov_compiled_model_free(run.compiled) }
        if let file { decision.store(file) }
        return (runs.first { $0.precision == decision.precision }!.compiled, decision.summary(device: options.device, cached: false))
    }

    /// Median milliseconds of one inference of each compiled model on a zero frame: one warm-up,
    /// then rounds taking one inference of each in turn (so a load that comes and goes weighs on
    /// all alike) — at least `minimumRounds`, and more until each candidate has run for
    /// `minimumMilliseconds` (at most `maximumRounds`): five rounds of a 3 ms detector flipped
    /// between f32 and f16 from one start to the next on the Xeon; a 100 ms style stops at five.
    private func medianMilliseconds(_ runs: [(precision: String, compiled: OpaquePointer)], tensorShape: [Int], imageInput: Int,
                                    minimumRounds: Int = 5, maximumRounds: Int = 100, minimumMilliseconds: Double = 300) throws -> [String: Double] {
        var requests: [OpaquePointer] = []
        var tensors: [OpaquePointer] = []
        defer {
            requests.forEach { ov_infer_request_free($0) }
            tensors.forEach { ov_tensor_free($0) }
        }
        var dims = tensorShape.map(Int64.init)
        var shape = ov_shape_t()
        try check(ov_shape_create(Int64(dims.count), &dims, &shape), "ov_shape_create")
        defer { ov_shape_free(&shape) }
        for run in runs {
            var request: OpaquePointer?
            try check(ov_compiled_model_create_infer_request(run.compiled, &request), "ov_compiled_model_create_infer_request")
            requests.append(request!)
            var tensor: OpaquePointer?
            try check(ov_tensor_create(U8, shape, &tensor), "ov_tensor_create")
            tensors.append(tensor!)
            var data: UnsafeMutableRawPointer?
            var size = 0
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            try check(ov_tensor_get_byte_size(tensor, &size), "ov_tensor_get_byte_size")
            data!.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            try check(ov_infer_request_set_input_tensor_by_index(request, imageInput, tensor), "ov_infer_request_set_input_tensor_by_index")
            try check(ov_infer_request_infer(request), "ov_infer_request_infer") // warm-up
        }
        var times = [[Double]](repeating: [], count: runs.count)
        var rounds = 0
        while rounds < minimumRounds || rounds < maximumRounds && times.contains(where: { $0.reduce(0, +) < minimumMilliseconds }) {
            for (i, request) in requests.enumerated() {
                let start = DispatchTime.now().uptimeNanoseconds
                try check(ov_infer_request_infer(request), "ov_infer_request_infer")
                let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                times[i].append(ms)
            }
            rounds += 1
        }
        var result: [String: Double] = [:]
        for (i, run) in runs.enumerated() { result[run.precision] = times[i].sorted()[rounds / 2] }
        return result
    }

    private func portCount(_ model: OpaquePointer, inputs: Bool) throws -> Int {
        var n = 0
        if inputs { try check(ov_model_inputs_size(model, &n), "ov_model_inputs_size") } else { try check(ov_model_outputs_size(model, &n), "ov_model_outputs_size") }
        return n
    }

    /// Batch → 1 when dynamic (otherwise inference "succeeds" on an empty tensor) or `resizable`;
    /// height and width → `input`'s, by reshaping when they are dynamic or differ; a dynamic channel count
    /// → 3. A model that cannot take that size is refused with a message saying so.
    /// `batch` > 1: the batch → `batch`, whatever the model says (it may refuse: thrown).
    private func makeStatic(_ model: OpaquePointer, index: Int, name: String?, input: ImageInput, resizable: Bool, batch: Int) throws {
        var port: OpaquePointer?
        try check(ov_model_const_input_by_index(model, index, &port), "ov_model_const_input_by_index")
        defer { ov_output_const_port_free(port) }
        var partial = ov_partial_shape_t()
        try check(ov_port_get_partial_shape(port, &partial), "ov_port_get_partial_shape")
        defer { ov_partial_shape_free(&partial) }
        guard partial.rank.min == 4, partial.rank.max == 4 else {
            throw InferenceError("the model's input is not an image (rank \(partial.rank.min)…\(partial.rank.max), expected 4)")
        }
        let nchw = input.layout == "NCHW"
        let current = (0..<4).map { (partial.dims[$0].min, partial.dims[$0].max) }
        let channels = current[nchw ? 1 : 3]
        let wanted: Int64 = input.colorOrder == "GRAY" ? 1 : 3
        guard channels.0 != channels.1 || channels.0 == wanted else {
            throw InferenceError("the model's image input has \(channels.0) channels in \(input.layout) layout; the manifest's \(input.colorOrder) gives \(wanted) (is its layout or color_order right?)")
        }
        var dims: [Int64] = (0..<4).map { i in
            switch (i, nchw) {
            // A resizable model's fixed batch (CenterFace's file says 10) is one frame too.
            case (0, _) where batch > 1: return Int64(batch)
            case (0, _): return current[0].0 == current[0].1 && !resizable ? current[0].0 : 1
            case (2, true), (1, false): return Int64(input.height)
            case (3, true), (2, false): return Int64(input.width)
            default: return current[i].0 == current[i].1 ? current[i].0 : wanted
            }
        }
        let was = current.map { $0.0 == $0.1 ? String($0.0) : "?" }.joined(separator: ",")
        if !ov_partial_shape_is_dynamic(partial) {
            if current.map(\.0) == dims { return }
            // A batch is the one change a model that is not resizable may take.
            guard resizable || batch > 1 && Array(current.dropFirst().map(\.0)) == Array(dims.dropFirst()) else {
                throw InferenceError("the model's image input is [\(was)] but the manifest says \(input.width)x\(input.height) \(input.layout)"
                                     + " (a fully convolutional detector may say \"resizable\": true in its input)")
            }
        }
        var fixed = ov_partial_shape_t()
        try check(ov_partial_shape_create_static(4, &dims, &fixed), "ov_partial_shape_create_static")
        defer { ov_partial_shape_free(&fixed) }
        do {
            if let name {
                try check(ov_model_reshape_input_by_name(model, name, fixed), "ov_model_reshape_input_by_name")
            } else {
                try check(ov_model_reshape_single_input(model, fixed), "ov_model_reshape_single_input")
            }
        } catch let error as InferenceError {
            // OpenVINO's text names the shape check that failed deep inside the graph: its first
            // line is enough.
            let detail = error.message.split(separator: "\n").first.map(String.init) ?? error.message
            throw InferenceError("the model's image input [\(was)] cannot take " + (batch > 1 ? "a batch of \(batch), " : "")
                                 + "\(input.width)x\(input.height) (\(detail))")
        }
    }

    /// Names and shapes of a model's inputs or outputs (a dynamic dimension shows as -1).
    private func ports(_ model: OpaquePointer, inputs: Bool) throws -> [(name: String, shape: [Int])] {
        try (0..<portCount(model, inputs: inputs)).map { i in
            var port: OpaquePointer?
            if inputs {
                try check(ov_model_const_input_by_index(model, i, &port), "ov_model_const_input_by_index")
            } else {
                try check(ov_model_const_output_by_index(model, i, &port), "ov_model_const_output_by_index")
            }
            defer { ov_output_const_port_free(port) }
            var cName: UnsafeMutablePointer<CChar>?
            let name: String
            if ov_port_get_any_name(port, &cName) == OK, let cName {
                name = String(cString: cName)
                ov_free(cName)
            } else {
                name = String(i)
            }
            var partial = ov_partial_shape_t()
            try check(ov_port_get_partial_shape(port, &partial), "ov_port_get_partial_shape")
            defer { ov_partial_shape_free(&partial) }
            guard partial.rank.min == partial.rank.max else { return (name, []) }
            return (name, (0..<Int(partial.rank.min)).map { partial.dims[$0].min == partial.dims[$0].max ? Int(partial.dims[$0].min) : -1 })
        }
    }

    private func withLayout(_ text: String, _ body: (OpaquePointer) throws -> Void) throws {
        var layout: OpaquePointer?
        try check(ov_layout_create(text, &layout), "ov_layout_create")
        defer { ov_layout_free(layout) }
        try body(layout!)
    }

    /// Literal property names (Swift 6 rejects the C API's global key symbols).
    private func withProperties(_ pairs: [(String, String)], _ body: (Int, UnsafePointer<ov_property_t>?) throws -> Void) throws {
        let strings = pairs.flatMap { [strdup($0.0)!, strdup($0.1)!] }
        defer { strings.forEach { free($0) } }
        var properties = (0..<pairs.count).map { i in
            ov_property_t(key: UnsafePointer(strings[2 * i]), value: UnsafeRawPointer(strings[2 * i + 1]))
        }
        try properties.withUnsafeMutableBufferPointer { try body($0.count, UnsafePointer($0.baseAddress)) }
    }
}

/// A model compiled with its pre-processing for one frame layout: what the engine caches and
/// ImageModels share (each with its own infer requests).
///
/// @unchecked Sendable: immutable after init; OpenVINO's compiled model is thread-safe
/// (requests are created from it on any thread).
final class CompiledModel: @unchecked Sendable {
    /// The core that compiled this model: held so it is freed after the model (a compiled model
    /// freed after its core crashed in ov::Any's destructor under ThreadSanitizer).
    let engine: InferenceEngine
    let pointer: OpaquePointer
    let frame: FrameLayout
    let padding: (top: Int, left: Int, bottom: Int, right: Int)
    let imageInput: Int
    let otherInputs: [(name: String, shape: [Int])]
    let outputs: [(name: String, shape: [Int])]
    /// "precision auto → f32 (…), 1 thread (its share of the cores, not pinned)".
    let settings: String
    /// ImageModels made from this compiled model: alive now, and the most at once.
    private let users = Mutex<(now: Int, peak: Int)>((0, 0))
    func join() { users.withLock { $0.now += 1; $0.peak = max($0.peak, $0.now) } }
    func leave() { users.withLock { $0.now -= 1 } }
    var peakUsers: Int { users.withLock { $0.peak } }

    init(engine: InferenceEngine, pointer: OpaquePointer, frame: FrameLayout, padding: (top: Int, left: Int, bottom: Int, right: Int),
         imageInput: Int, otherInputs: [(name: String, shape: [Int])], outputs: [(name: String, shape: [Int])], settings: String) {
        self.engine = engine; self.pointer = pointer; self.frame = frame; self.padding = padding; self.imageInput = imageInput
        self.otherInputs = otherInputs; self.outputs = outputs; self.settings = settings
    }

    deinit { ov_compiled_model_free(pointer) }
}

final class WeakCompiledModel: @unchecked Sendable {
    weak var model: CompiledModel?
    init(_ model: CompiledModel) { self.model = model }
}

/// A compiled model with its pre-processing, fed frames synchronously (`infer`) or
/// asynchronously (`submit`: up to `InferenceOptions.requests` infer requests in flight, each
/// with its own input tensor, so a frame's pixels are copied in and the frame may change
/// while its request runs).
///
/// Not thread-safe: used by one worker. OpenVINO's threads only say a request is done
/// (`ov_infer_request_set_callback`); outputs are read on the worker's thread.
public final class ImageModel {
    /// Shared with every ImageModel of the same model and settings in the process.
    private let compiled: CompiledModel
    /// The requests: the first also serves `infer`.
    private let slots: [RequestSlot]
    public let frame: FrameLayout
    /// Output names and shapes, in the model's order.
    public let outputs: [(name: String, shape: [Int])]
    /// The model's inputs other than the image (a style vector…), set with `setInput`.
    public let otherInputs: [(name: String, shape: [Int])]
    private let imageInput: Int
    /// Tensors set with `setInput`, owned here until replaced.
    private var inputTensors: [String: OpaquePointer] = [:]
    /// Letterbox borders around the frame in the tensor, in pixels.
    private let padding: (top: Int, left: Int, bottom: Int, right: Int)
    /// The tensor's pixels when rows must be repacked or padded; borders stay zero.
    private var scratch: [UInt8] = []
    /// Requests started by `submit`, oldest first (a request is free again once its result has
    /// been collected).
    private var started: [(slot: RequestSlot, pending: PendingInference)] = []

    /// One infer request and the input tensor `submit` copies frames into.
    final class RequestSlot: @unchecked Sendable {
        let request: OpaquePointer
        /// U8, the padded frame's shape; borders stay zero.
        var input: OpaquePointer?
        /// Whether `input` is the request's image tensor now (`infer` sets another).
        var inputBound = false
        /// The request running now (set before start, read by OpenVINO's callback thread).
        let running = Mutex<PendingInference?>(nil)
        /// OpenVINO's C API keeps the pointer it is given (not a copy): it lives as long as the
        /// request, freed after it.
        let callback = UnsafeMutablePointer<ov_callback_t>.allocate(capacity: 1)
        init(request: OpaquePointer) { self.request = request }
        deinit { callback.deallocate() }
    }

    public var requestCount: Int { slots.count }
    /// The precision and threads it runs with, for stage summaries; and, when other stages ran
    /// the same compiled model (sources of `streamlens serve`), for how many it was compiled once.
    public var settings: String {
        let peak = compiled.peakUsers
        return compiled.settings + (peak > 1 ? ", compiled once for \(peak) stages" : "") + (note.map { ", \($0)" } ?? "")
    }
    /// Said after the settings: why a batch-size asked for is not used (`loadImageInference`).
    public internal(set) var note: String?

    /// A property as the compiled model reports it ("INFERENCE_NUM_THREADS", "NUM_STREAMS",
    /// "ENABLE_CPU_PINNING", "INFERENCE_PRECISION_HINT"…): how OpenVINO will really run it.
    public func compiledProperty(_ key: String) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard ov_compiled_model_get_property(compiled.pointer, key, &value) == OK, let value else { return nil }
        defer { ov_free(value) }
        return String(cString: value)
    }

    init(compiled: CompiledModel, requests: Int = 1) throws {
        self.compiled = compiled
        self.imageInput = compiled.imageInput
        self.otherInputs = compiled.otherInputs
        var slots: [RequestSlot] = []
        do {
            for _ in 0..<max(1, requests) {
                var request: OpaquePointer?
                try check(ov_compiled_model_create_infer_request(compiled.pointer, &request), "ov_compiled_model_create_infer_request")
                let slot = RequestSlot(request: request!)
                slots.append(slot)
                slot.callback.initialize(to: ov_callback_t(callback_func: { args in
                    // OpenVINO's thread: the request is done (or failed); the worker collects it.
                    let slot = Unmanaged<RequestSlot>.fromOpaque(args!).takeUnretainedValue()
                    slot.running.withLock { $0 }?.markDone()
                }, args: Unmanaged.passUnretained(slot).toOpaque()))
                try check(ov_infer_request_set_callback(slot.request, slot.callback), "ov_infer_request_set_callback")
            }
        } catch {
            slots.forEach { ov_infer_request_free($0.request) }
            throw error
        }
        self.slots = slots
        self.frame = compiled.frame
        self.padding = compiled.padding
        self.outputs = compiled.outputs
        compiled.join()
    }

    deinit {
        compiled.leave()
        // A ticket nobody collected must not call back into a freed model.
        for entry in started { entry.pending.abandon(InferenceError("the model was released before its result was collected")) }
        // A request still running reads its tensors and calls back into its slot: wait first.
        for slot in slots {
            if slot.running.withLock({ $0 }) != nil { _ = ov_infer_request_wait(slot.request) }
            ov_infer_request_free(slot.request)
            if let input = slot.input { ov_tensor_free(input) }
        }
        inputTensors.values.forEach { ov_tensor_free($0) }
    }

    /// Sets one of `otherInputs` (f32 values in the input's shape) for every following frame.
    public func setInput(name: String, values: [Float]) throws {
        let port = try otherInput(named: name, count: values.count)
        finishStarted() // requests in flight read the old tensor
        var dims = port.shape.map(Int64.init)
        var shape = ov_shape_t()
        try check(ov_shape_create(Int64(dims.count), &dims, &shape), "ov_shape_create")
        defer { ov_shape_free(&shape) }
        var tensor: OpaquePointer?
        try check(ov_tensor_create(F32, shape, &tensor), "ov_tensor_create")
        var data: UnsafeMutableRawPointer?
        do {
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            values.withUnsafeBytes { data!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            for slot in slots { try check(ov_infer_request_set_tensor(slot.request, name, tensor), "ov_infer_request_set_tensor") }
        } catch {
            ov_tensor_free(tensor)
            throw error
        }
        if let old = inputTensors[name] { ov_tensor_free(old) }
        inputTensors[name] = tensor
    }

    /// Runs the model on one frame (rows of `frame.stride` bytes) and returns copies of every
    /// output.
    public func infer(_ pixels: UnsafeRawBufferPointer) throws -> [TensorData] {
        try infer(pixels) { views in
            zip(outputs, views).map { TensorData(name: $0.name, shape: $0.shape, values: Array($1)) }
        }
    }

    private var tensorSize: (width: Int, height: Int) {
        (frame.width + padding.left + padding.right, frame.height + padding.top + padding.bottom)
    }

    private func checkSize(_ pixels: UnsafeRawBufferPointer) throws {
        guard pixels.count >= frame.stride * (frame.height - 1) + frame.width * frame.channels else {
            throw InferenceError("frame buffer has \(pixels.count) bytes, expected \(frame.stride * frame.height)")
        }
    }

    private func tensorShape() throws -> ov_shape_t {
        var dims: [Int64] = [1, Int64(tensorSize.height), Int64(tensorSize.width), Int64(frame.channels)]
        var shape = ov_shape_t()
        try check(ov_shape_create(4, &dims, &shape), "ov_shape_create")
        return shape
    }

    private func copyRows(_ pixels: UnsafeRawBufferPointer, into base: UnsafeMutableRawPointer) {
        frame.copyRows(pixels, padding: padding, into: base)
    }

    /// Runs the model on one frame and hands `body` the outputs in place, in the model's order,
    /// valid only during the call: no copy on the per-frame path.
    public func infer<R>(_ pixels: UnsafeRawBufferPointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R {
        try checkSize(pixels)
        finishStarted() // the synchronous path uses the first request
        let request = slots[0].request
        // The tensor wraps the frame without a copy when rows are packed and nothing is padded;
        // otherwise rows are copied into place in a scratch buffer first.
        let run: (UnsafeRawPointer) throws -> Void = { base in
            var shape = try self.tensorShape()
            defer { ov_shape_free(&shape) }
            var tensor: OpaquePointer?
            try check(ov_tensor_create_from_host_ptr(U8, shape, UnsafeMutableRawPointer(mutating: base), &tensor), "ov_tensor_create_from_host_ptr")
            defer { ov_tensor_free(tensor) }
            try check(ov_infer_request_set_input_tensor_by_index(request, self.imageInput, tensor), "ov_infer_request_set_input_tensor_by_index")
            try check(ov_infer_request_infer(request), "ov_infer_request_infer")
        }
        if frame.stride == frame.width * frame.channels && tensorSize == (frame.width, frame.height) {
            try run(pixels.baseAddress!)
        } else {
            let count = tensorSize.width * frame.channels * tensorSize.height
            if scratch.count != count { scratch = [UInt8](repeating: 0, count: count) }
            scratch.withUnsafeMutableBytes { copyRows(pixels, into: $0.baseAddress!) }
            try scratch.withUnsafeBytes { try run($0.baseAddress!) }
        }
        // The request's own input tensor is set again by the next `submit` on this slot.
        slots[0].inputBound = false
        return try withOutputs(of: request, body)
    }

    /// The request's outputs as f32 views (the request owns the memory; valid during `body`).
    private func withOutputs<R>(of request: OpaquePointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R {
        var tensors: [OpaquePointer?] = []
        defer { tensors.forEach { ov_tensor_free($0) } }
        let views = try outputs.indices.map { i -> UnsafeBufferPointer<Float> in
            let (tensor, values) = try f32Output(of: request, index: i, name: outputs[i].name)
            tensors.append(tensor)
            return values
        }
        return try body(views)
    }

    /// Starts inference of one frame on a free request (its pixels are copied into the
    /// request's own tensor) and returns at once; the outputs come with the ticket, collected
    /// on the thread that waits for it. When every request is busy, the oldest is waited for.
    public func submit(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference {
        try checkSize(pixels)
        collectFinished()
        if started.count >= slots.count, let oldest = started.first {
            _ = oldest.pending.wait()
            collectFinished()
        }
        guard let slot = slots.first(where: { s in !started.contains { $0.slot === s } }) else {
            throw InferenceError("no free infer request") // cannot happen: the oldest was collected above
        }
        if slot.input == nil {
            var shape = try tensorShape()
            defer { ov_shape_free(&shape) }
            var tensor: OpaquePointer?
            try check(ov_tensor_create(U8, shape, &tensor), "ov_tensor_create")
            var data: UnsafeMutableRawPointer?
            var size = 0
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            try check(ov_tensor_get_byte_size(tensor, &size), "ov_tensor_get_byte_size")
            data!.initializeMemory(as: UInt8.self, repeating: 0, count: size) // letterbox borders
            slot.input = tensor
        }
        if !slot.inputBound {
            try check(ov_infer_request_set_input_tensor_by_index(slot.request, imageInput, slot.input), "ov_infer_request_set_input_tensor_by_index")
            slot.inputBound = true
        }
        var data: UnsafeMutableRawPointer?
        try check(ov_tensor_data(slot.input, &data), "ov_tensor_data")
        copyRows(pixels, into: data!)
        let request = slot.request
        let outputs = self.outputs
        let pending = PendingInference(bytesSent: 0) { [unowned self] in
            // The waiting thread: the status of the finished request, then copies of its outputs.
            do {
                try check(ov_infer_request_wait(request), "ov_infer_request_wait")
                return .success(try self.withOutputs(of: request) { views in
                    zip(outputs, views).map { TensorData(name: $0.name, shape: $0.shape, values: Array($1)) }
                })
            } catch let error as InferenceError {
                return .failure(error)
            } catch {
                return .failure(InferenceError("\(error)"))
            }
        }
        slot.running.withLock { $0 = pending }
        do {
            try check(ov_infer_request_start_async(request), "ov_infer_request_start_async")
        } catch {
            slot.running.withLock { $0 = nil }
            throw error
        }
        started.append((slot, pending))
        return pending
    }

    /// Waits for (and collects) every request `submit` started; all are free afterwards.
    private func finishStarted() {
        for entry in started { _ = entry.pending.wait() }
        collectFinished()
    }

    /// Frees the requests whose results have been collected (oldest first).
    private func collectFinished() {
        while let first = started.first, first.pending.isCollected {
            first.slot.running.withLock { $0 = nil }
            started.removeFirst()
        }
    }
}

// MARK: Batching across stages

/// How a batcher has run, for summaries and tests.
public struct BatchStatistics: Sendable, Equatable {
    /// Inferences started: full batches and (after the timeout) partial ones.
    public var batches = 0
    /// Frames in them.
    public var frames = 0
    /// Batches the timeout started with fewer frames than the batch size (run frame by frame).
    public var partial = 0
    /// The most frames one batch held.
    public var largest = 0
    /// The most stages that held a handle at once.
    public var streams = 0
    public var meanBatch: Double { batches == 0 ? 0 : Double(frames) / Double(batches) }
    public init(batches: Int = 0, frames: Int = 0, partial: Int = 0, largest: Int = 0, streams: Int = 0) {
        self.batches = batches; self.frames = frames; self.partial = partial; self.largest = largest; self.streams = streams
    }
}

/// One compiled model with batch N shared by any number of stages (the sources of `streamlens
/// serve`): frames submitted by any of them fill the next free slot of a batch tensor
/// [N, H, W, C]; a full batch runs as one inference, and each frame's ticket gets its own
/// slice of every output. A frame never waits longer than its stage's batch-timeout for the
/// others: then the frames there run.
///
/// A partial batch runs frame by frame on the batch-1 compiled model (its requests read their
/// slices of the batch tensor in place), not padded to N: on 2 vCPUs the short-range face model
/// took 2.8 ms for one frame and 9.8 ms for a batch of 4 (Python API, f32, 2 threads), so a lone
/// frame padded to 4 would cost 3.5 times its own inference; a dynamic batch (1…4) cost 4.8 ms
/// for one frame (README "Batching across streams").
///
/// The timeout is a timer, not a deadline checked by the next submitter: a stream's last frame,
/// or a lone stream's frame whose successor comes 33 ms later, has no next submitter. Timers
/// and completions run on one serial queue; the slots are behind `condition`, on which a
/// submitter waits when both slots are busy (one running, one running or filling: the filling
/// one runs by its timeout at the latest, so the wait is bounded).
///
/// @unchecked Sendable: the slots and figures are only touched with `condition` held; the
/// OpenVINO objects are created in init and freed in deinit.
final class BatchedModel: @unchecked Sendable {
    /// Batches in flight at once: one fills while the other runs.
    static let slotCount = 2
    let batch: CompiledModel
    let single: CompiledModel
    let size: Int
    /// Output names and shapes for one frame (the batch dimension 1).
    let outputs: [(name: String, shape: [Int])]
    private let queue = DispatchQueue(label: "streamlens batcher")
    private let condition = NSCondition()
    private var slots: [Slot] = []
    private var filling: Int?
    private var round = 0
    private var figures = BatchStatistics()
    private var users = 0

    /// One batch: its request and tensor, the batch-1 requests that run a partial batch frame
    /// by frame (each reads its slice of the tensor in place), and the tickets of its frames.
    final class Slot {
        let request: OpaquePointer
        let input: OpaquePointer
        let base: UnsafeMutableRawPointer
        var singles: [OpaquePointer] = []
        var views: [OpaquePointer] = []
        var completions: [Completion] = []
        var items: [PendingInference] = []
        var round = 0
        var deadline: UInt64?
        /// Requests of this slot running now (0: free, or filling).
        var running = 0
        var ranSingly = false
        init(request: OpaquePointer, input: OpaquePointer, base: UnsafeMutableRawPointer) {
            self.request = request; self.input = input; self.base = base
        }
    }

    /// What OpenVINO's callback is given: which request of which slot is done. Weak: a
    /// callback during the batcher's deinit (which waits for its requests) finds nothing.
    final class Completion: @unchecked Sendable {
        weak var model: BatchedModel?
        let slot: Int
        /// nil: the batch request; i: the batch-1 request of frame i.
        let single: Int?
        let callback = UnsafeMutablePointer<ov_callback_t>.allocate(capacity: 1)
        init(model: BatchedModel, slot: Int, single: Int?) { self.model = model; self.slot = slot; self.single = single }
        deinit { callback.deallocate() }
    }

    init(batch: CompiledModel, single: CompiledModel, size: Int) throws {
        self.batch = batch; self.single = single; self.size = size
        outputs = batch.outputs.map { ($0.name, [1] + $0.shape.dropFirst()) }
        let frame = batch.frame, padding = batch.padding
        let sliceBytes = frame.tensorBytes(padding: padding)
        let (height, width) = (frame.height + padding.top + padding.bottom, frame.width + padding.left + padding.right)
        func shape(_ n: Int) throws -> ov_shape_t {
            var dims: [Int64] = [Int64(n), Int64(height), Int64(width), Int64(frame.channels)]
            var shape = ov_shape_t()
            try check(ov_shape_create(4, &dims, &shape), "ov_shape_create")
            return shape
        }
        func request(_ compiled: CompiledModel, _ completion: Completion) throws -> OpaquePointer {
            var request: OpaquePointer?
            try check(ov_compiled_model_create_infer_request(compiled.pointer, &request), "ov_compiled_model_create_infer_request")
            completion.callback.initialize(to: ov_callback_t(callback_func: { args in
                // OpenVINO's thread: hand the finished request to the batcher's queue.
                let completion = Unmanaged<Completion>.fromOpaque(args!).takeUnretainedValue()
                guard let model = completion.model else { return }
                model.queue.async { model.completed(completion) }
            }, args: Unmanaged.passUnretained(completion).toOpaque()))
            do {
                try check(ov_infer_request_set_callback(request, completion.callback), "ov_infer_request_set_callback")
            } catch {
                ov_infer_request_free(request)
                throw error
            }
            return request!
        }
        // Counted first: a failure below still runs deinit, which leaves and frees.
        batch.join()
        single.join()
        for index in 0..<Self.slotCount {
            var batchShape = try shape(size)
            defer { ov_shape_free(&batchShape) }
            var tensor: OpaquePointer?
            try check(ov_tensor_create(U8, batchShape, &tensor), "ov_tensor_create")
            var data: UnsafeMutableRawPointer?
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            data!.initializeMemory(as: UInt8.self, repeating: 0, count: sliceBytes * size) // letterbox borders
            let whole = Completion(model: self, slot: index, single: nil)
            let slot: Slot
            do {
                slot = Slot(request: try request(batch, whole), input: tensor!, base: data!)
            } catch {
                ov_tensor_free(tensor)
                throw error
            }
            slot.completions.append(whole)
            slots.append(slot)
            try check(ov_infer_request_set_input_tensor_by_index(slot.request, batch.imageInput, slot.input), "ov_infer_request_set_input_tensor_by_index")
            for i in 0..<size {
                var one = try shape(1)
                defer { ov_shape_free(&one) }
                var view: OpaquePointer?
                try check(ov_tensor_create_from_host_ptr(U8, one, data!.advanced(by: i * sliceBytes), &view), "ov_tensor_create_from_host_ptr")
                slot.views.append(view!)
                let completion = Completion(model: self, slot: index, single: i)
                slot.singles.append(try request(single, completion))
                slot.completions.append(completion)
                try check(ov_infer_request_set_input_tensor_by_index(slot.singles[i], single.imageInput, view), "ov_infer_request_set_input_tensor_by_index")
            }
        }
    }

    deinit {
        batch.leave()
        single.leave()
        for slot in slots where slot.running > 0 {
            if slot.ranSingly {
                for request in slot.singles.prefix(slot.items.count) { _ = ov_infer_request_wait(request) }
            } else {
                _ = ov_infer_request_wait(slot.request)
            }
        }
        for slot in slots {
            for item in slot.items where !item.isFinished { item.finish(.failure(InferenceError("the batcher was released before the batch ran")), bytesReceived: 0) }
        }
        freeRequests()
    }

    private func freeRequests() {
        for slot in slots {
            slot.singles.forEach { ov_infer_request_free($0) }
            ov_infer_request_free(slot.request)
            slot.views.forEach { ov_tensor_free($0) }
            ov_tensor_free(slot.input)
        }
        slots = []
    }

    func join() { condition.withLock { users += 1; figures.streams = max(figures.streams, users) } }
    func leave() { condition.withLock { users -= 1 } }
    var statistics: BatchStatistics { condition.withLock { figures } }

    /// Copies the frame into the filling batch (waiting for a free one when both are busy) and
    /// returns its ticket; a batch that is full now starts now.
    func submit(_ pixels: UnsafeRawBufferPointer, timeoutMilliseconds: Double) -> PendingInference {
        condition.lock()
        defer { condition.unlock() }
        let index: Int
        while true {
            if let filling { index = filling; break }
            if let free = slots.firstIndex(where: { $0.running == 0 }) {
                round += 1
                slots[free].round = round
                slots[free].deadline = nil
                filling = free
                index = free
                break
            }
            condition.wait()
        }
        let slot = slots[index]
        batch.frame.copyRows(pixels, padding: batch.padding, into: slot.base.advanced(by: slot.items.count * batch.frame.tensorBytes(padding: batch.padding)))
        let pending = PendingInference(bytesSent: 0)
        slot.items.append(pending)
        if slot.items.count == size {
            start(index)
        } else {
            let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeoutMilliseconds) * 1e6)
            if slot.deadline.map({ deadline < $0 }) ?? true {
                slot.deadline = deadline
                let round = slot.round
                queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) { [weak self] in self?.timedOut(index, round: round) }
            }
        }
        return pending
    }

    /// The timer: the batch still filling in that round runs with the frames it has.
    private func timedOut(_ index: Int, round: Int) {
        condition.withLock {
            guard filling == index, slots[index].round == round, !slots[index].items.isEmpty else { return }
            start(index)
        }
    }

    /// Starts the slot's batch (`condition` held): one inference when full, else one batch-1
    /// inference per frame.
    private func start(_ index: Int) {
        filling = nil
        let slot = slots[index]
        let count = slot.items.count
        figures.batches += 1
        figures.frames += count
        figures.largest = max(figures.largest, count)
        slot.ranSingly = count < size
        if count == size {
            slot.running = 1
            do {
                try check(ov_infer_request_start_async(slot.request), "ov_infer_request_start_async")
            } catch {
                slot.running = 0
                fail(slot, from: 0, error)
            }
        } else {
            figures.partial += 1
            slot.running = count
            for i in 0..<count {
                do {
                    try check(ov_infer_request_start_async(slot.singles[i]), "ov_infer_request_start_async")
                } catch {
                    slot.running -= 1
                    slot.items[i].finish(.failure((error as? InferenceError) ?? InferenceError("\(error)")), bytesReceived: 0)
                }
            }
        }
        if slot.running == 0 { release(slot) }
    }

    private func fail(_ slot: Slot, from first: Int, _ error: Error) {
        for item in slot.items.dropFirst(first) { item.finish(.failure((error as? InferenceError) ?? InferenceError("\(error)")), bytesReceived: 0) }
    }

    /// The slot's frames are all answered: free for the next batch.
    private func release(_ slot: Slot) {
        slot.items = []
        slot.running = 0
        condition.broadcast()
    }

    /// The batcher's queue: a request is done; its frames get their outputs (copies, so the
    /// slot is free at once, whenever their stages collect them).
    private func completed(_ completion: Completion) {
        condition.withLock {
            let slot = slots[completion.slot]
            if let i = completion.single {
                guard i < slot.items.count else { return }
                slot.items[i].finish(answer(of: slot.singles[i], frame: 0, of: 1), bytesReceived: 0)
            } else {
                for (i, item) in slot.items.enumerated() { item.finish(answer(of: slot.request, frame: i, of: size), bytesReceived: 0) }
            }
            slot.running -= 1
            if slot.running == 0 { release(slot) }
        }
    }

    /// Frame `frame`'s slice of every output of a finished request holding `count` frames.
    private func answer(of request: OpaquePointer, frame: Int, of count: Int) -> Result<[TensorData], InferenceError> {
        do {
            try check(ov_infer_request_wait(request), "ov_infer_request_wait")
            return .success(try outputs.indices.map { i in
                let (tensor, all) = try f32Output(of: request, index: i, name: outputs[i].name)
                defer { ov_tensor_free(tensor) }
                let each = all.count / count
                return TensorData(name: outputs[i].name, shape: outputs[i].shape, values: Array(all[(frame * each)..<((frame + 1) * each)]))
            })
        } catch let error as InferenceError {
            return .failure(error)
        } catch {
            return .failure(InferenceError("\(error)"))
        }
    }
}

final class WeakBatchedModel: @unchecked Sendable {
    weak var model: BatchedModel?
    init(_ model: BatchedModel) { self.model = model }
}

/// A stage's handle on a `BatchedModel`: its frames join the batches of every stage running
/// the same compiled model; outputs are shaped for one frame, as a batch-1 model's are.
///
/// Not thread-safe, like ImageModel (one worker); the batcher it shares is.
public final class BatchedImageModel: ImageInference {
    private let batcher: BatchedModel
    private let timeout: Double
    public let requestCount: Int
    public var outputs: [(name: String, shape: [Int])] { batcher.outputs }
    public var otherInputs: [(name: String, shape: [Int])] { [] }
    public var remoteAddress: RemoteModelAddress? { nil }
    public var batchSize: Int { batcher.size }

    init(_ batcher: BatchedModel, options: InferenceOptions) {
        self.batcher = batcher
        timeout = options.batchTimeout
        requestCount = max(1, options.requests)
        batcher.join()
    }

    deinit { batcher.leave() }

    public var statistics: BatchStatistics { batcher.statistics }

    /// "precision f32, 2 threads…, batched: 4 streams, mean batch 3.6 (batch-size 4, 120 batches, 8 partial)".
    public var settings: String {
        let s = statistics
        return batcher.batch.settings + String(format: ", batched: %d stream%@, mean batch %.1f (batch-size %d, %d batches, %d partial)",
                                               s.streams, s.streams == 1 ? "" : "s", s.meanBatch, batcher.size, s.batches, s.partial)
    }

    /// A property as the batch's compiled model reports it (ImageModel.compiledProperty).
    public func compiledProperty(_ key: String) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard ov_compiled_model_get_property(batcher.batch.pointer, key, &value) == OK, let value else { return nil }
        defer { ov_free(value) }
        return String(cString: value)
    }

    public func setInput(name: String, values: [Float]) throws { _ = try otherInput(named: name, count: values.count) }

    public func submit(_ pixels: UnsafeRawBufferPointer) throws -> PendingInference {
        let frame = batcher.batch.frame
        guard pixels.count >= frame.minimumBytes else {
            throw InferenceError("frame buffer has \(pixels.count) bytes, expected \(frame.stride * frame.height)")
        }
        return batcher.submit(pixels, timeoutMilliseconds: timeout)
    }

    public func infer<R>(_ pixels: UnsafeRawBufferPointer, _ body: ([UnsafeBufferPointer<Float>]) throws -> R) throws -> R {
        try outputs(of: submit(pixels).wait().get()).withBuffers(body)
    }

    public func outputs(of answer: [TensorData]) throws -> [TensorData] {
        guard answer.count == outputs.count else { throw InferenceError("the model gave \(answer.count) outputs, expected \(outputs.count)") }
        return answer
    }
}

/// Output `index` of a finished request as f32 values (the tensor: the caller frees it, after
/// the last use of the values, which it holds).
private func f32Output(of request: OpaquePointer, index: Int, name: String) throws -> (tensor: OpaquePointer?, values: UnsafeBufferPointer<Float>) {
    var tensor: OpaquePointer?
    try check(ov_infer_request_get_output_tensor_by_index(request, index, &tensor), "ov_infer_request_get_output_tensor_by_index")
    do {
        var type = DYNAMIC
        try check(ov_tensor_get_element_type(tensor, &type), "ov_tensor_get_element_type")
        guard type == F32 else { throw InferenceError("output \(name) is not f32 (element type \(type.rawValue))") }
        var count = 0
        try check(ov_tensor_get_size(tensor, &count), "ov_tensor_get_size")
        var data: UnsafeMutableRawPointer?
        try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
        return (tensor, UnsafeBufferPointer(start: data!.assumingMemoryBound(to: Float.self), count: count))
    } catch {
        ov_tensor_free(tensor)
        throw error
    }
}
