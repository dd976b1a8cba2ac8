import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// The OpenVINO runtime (one `ov_core_t`), its compiled models and the process's thread
/// budget. Model stages share one (`shared()`), so that models compiled twice with the same
/// settings are compiled once and models that run at the same time divide the cores
/// (InferenceRuntime.swift says why and how). Thread-safe as OpenVINO's core is.
///
/// @unchecked Sendable: `core` is created once and never reassigned; OpenVINO documents
/// ov::Core as safe to use from several threads; the caches are behind locks.
public final class InferenceEngine: @unchecked Sendable {
    let core: OpaquePointer
    /// The stages running models, and how threads are shared among them.
    public let budget: ThreadBudget
    /// Compiled models by everything that went into them; held weakly (an entry goes when the
    /// last ImageModel made from it does).
    let compiledModels = Mutex<[String: WeakCompiledModel]>([:])
    /// Batchers by their compiled model's key (batch size included); held weakly, like models.
    let batchers = Mutex<[String: WeakBatchedModel]>([:])
    /// Why a model refused a batch, by the same key: the next stage asking is told at once
    /// (finding out may take a whole compilation, when an output shows the refusal).
    let refusals = Mutex<[String: String]>([:])
    /// One compilation at a time: a second stage asking for the same model waits and shares
    /// it, and precision=auto measures without another compilation running beside it.
    let compiling = NSLock()

    /// `budget`: the process's for the shared engine; a test's engine counts its own stages.
    public init(budget: ThreadBudget = ThreadBudget()) throws {
        self.budget = budget
        self.core = try handle("ov_core_create") { ov_core_create($0) }
    }

    deinit { ov_core_free(core) }

    static let process: Result<InferenceEngine, InferenceError> = {
        do { return .success(try InferenceEngine(budget: .process)) } catch let error as InferenceError { return .failure(error) } catch { return .failure(InferenceError("\(error)")) }
    }()

    /// The process's engine, made on first use: every model stage (and the plugin's elements in
    /// one process) compiles through it.
    public static func shared() throws -> InferenceEngine { try process.get() }

    /// Counts a stage that will run the local model at `path` in the thread budget while the
    /// token lives (stages register when built, before compiling).
    public func registerModel(_ path: String) -> ModelUse { budget.register(path) }

    /// The cores this process may run on.
    public var cores: Int { budget.cores }

    /// The thread plan a model compiled now gets.
    public func threadPlan(path: String, options: InferenceOptions) -> ThreadPlan { budget.plan(path: path, options: options) }

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
        // The CPU plugin is part of the wheel: asking for the device list would load every
        // plugin (GPU, NPU: each probes for its hardware), a cost on every start for nothing.
        if ["AUTO", "MULTI", "HETERO", "BATCH", "CPU"].contains(base) { return }
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
                               options: InferenceOptions, resizable: Bool = false, budget: ThreadBudget? = nil) throws -> ImageModel {
        compiling.lock()
        defer { compiling.unlock() }
        let compiled = try compiledModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: 1,
                                         budget: budget ?? self.budget)
        return try ImageModel(compiled: compiled, requests: options.requests)
    }

    /// What a model stage runs: with `options.batchSize` 1, `loadImageModel`'s ImageModel; above
    /// 1, a handle on the process's batcher for this compiled model, whose frames run together
    /// with those of every other stage holding one (`BatchedModel`). A model that cannot take a
    /// batch (its graph fixes batch 1, it has other inputs each stage sets, an output is not
    /// batched in its first dimension) runs as without batching, and its `settings` say why.
    /// `budget`: the thread budget the model counts in (the engine's when nil).
    public func loadImageInference(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion,
                                   options: InferenceOptions, resizable: Bool = false, budget: ThreadBudget? = nil) throws -> any ImageInference {
        let budget = budget ?? self.budget
        guard options.batchSize > 1 else {
            return try loadImageModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, budget: budget)
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
                                            batch: options.batchSize, budget: budget)
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
            let single = try compiledModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: 1,
                                           sampling: false, budget: budget)
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
        let model = try loadImageModel(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, budget: budget)
        model.note = "batch-size \(options.batchSize) refused (\(refusal)): \(model.requestCount) infer requests instead"
        return model
    }

    /// Everything that goes into a compiled model, as the caches' key; checks what can be checked
    /// before reading the model (the file, the frame format, the device).
    func cacheKey(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion, options: InferenceOptions,
                          resizable: Bool, batch: Int) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else { throw InferenceError("model file \(path) not found") }
        if let reason = InputFile.notAFile(path) { throw InferenceError("model file \(path) is \(reason)") }
        try frame.checkFeedable()
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
    /// `sampling`: the image input may be sampled in Swift when it is small (`samplesInput`);
    /// not for a batcher's models, which take frames.
    func compiledModel(path: String, input: ImageInput, frame: FrameLayout, region: FrameRegion, options: InferenceOptions,
                       resizable: Bool, batch: Int, sampling: Bool = true, budget: ThreadBudget) throws -> CompiledModel {
        let key = try cacheKey(path: path, input: input, frame: frame, region: region, options: options, resizable: resizable, batch: batch)
            + (sampling ? "" : "|frames")
        if let shared = compiledModels.withLock({ $0[key]?.model }) { return shared }
        var plan = budget.plan(path: path, options: options)
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
                                   plan: plan, resizable: resizable, batch: batch,
                                   sampled: sampling && Self.samplesInput(input, frame: frame, batch: batch), label: path)
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
        try frame.checkFeedable()
        let colorFormat = frame.colorFormat!
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

}
