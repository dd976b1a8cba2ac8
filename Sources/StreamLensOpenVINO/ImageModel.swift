import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// A compiled model with its pre-processing, fed frames synchronously (`infer`) or
/// asynchronously (`submit`: up to `InferenceOptions.requests` infer requests in flight, each
/// with its own input tensor, so the frame may change while its request runs). The request's
/// tensor takes the frame's pixels, or, for an input much smaller than the frame, the input
/// itself sampled out of the frame in Swift (`CompiledModel.sampler`).
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
    /// Set when the image input is sampled out of the frame in Swift: requests take its f32
    /// tensor (written straight into the request's own), not the frame.
    private let sampler: SwiftPreprocessor?
    /// The sampled tensor for `infer`.
    private var sampledScratch: [Float] = []
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
                let request = try handle("ov_compiled_model_create_infer_request") { ov_compiled_model_create_infer_request(compiled.pointer, $0) }
                let slot = RequestSlot(request: request)
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
        self.sampler = compiled.sampler
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
        let tensor = try handle("ov_tensor_create") { ov_tensor_create(F32, shape, $0) }
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

    /// The image input's tensor: the sampled input (f32), or the frame with its borders (u8).
    private func tensorShape() throws -> ov_shape_t {
        var dims: [Int64] = sampler.map { $0.shape.map(Int64.init) } ?? [1, Int64(tensorSize.height), Int64(tensorSize.width), Int64(frame.channels)]
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
            let type = self.sampler == nil ? U8 : F32
            let tensor = try handle("ov_tensor_create_from_host_ptr") { ov_tensor_create_from_host_ptr(type, shape, UnsafeMutableRawPointer(mutating: base), $0) }
            defer { ov_tensor_free(tensor) }
            try check(ov_infer_request_set_input_tensor_by_index(request, self.imageInput, tensor), "ov_infer_request_set_input_tensor_by_index")
            try check(ov_infer_request_infer(request), "ov_infer_request_infer")
        }
        if let sampler {
            if sampledScratch.count != sampler.count { sampledScratch = [Float](repeating: 0, count: sampler.count) }
            try sampledScratch.withUnsafeMutableBufferPointer { try sampler.write(pixels, into: $0) }
            try sampledScratch.withUnsafeBytes { try run($0.baseAddress!) }
        } else if frame.stride == frame.width * frame.channels && tensorSize == (frame.width, frame.height) {
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

    /// Starts inference of one frame on a free request (its pixels copied, or its input
    /// sampled, into the request's own tensor) and returns at once; the outputs come with the ticket, collected
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
            let tensor = try handle("ov_tensor_create") { ov_tensor_create(sampler == nil ? U8 : F32, shape, $0) }
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
        guard let data else { throw InferenceError("ov_tensor_data gave no data") }
        if let sampler {
            // This frame's input, sampled while the previous frame's request runs.
            try sampler.write(pixels, into: UnsafeMutableBufferPointer(start: data.assumingMemoryBound(to: Float.self), count: sampler.count))
        } else {
            copyRows(pixels, into: data)
        }
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
