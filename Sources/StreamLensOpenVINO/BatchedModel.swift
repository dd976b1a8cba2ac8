import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

// MARK: Batching across stages

/// How a batcher has run, for summaries and tests.
public struct BatchStatistics: Sendable, Equatable {
    /// Inferences started (full batches and, after the timeout, partial ones) and the frames in
    /// them; `partial`: those the timeout started with fewer frames than the batch size (run
    /// frame by frame); `largest`: the most frames one batch held.
    public var batches = 0, frames = 0, partial = 0, largest = 0
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
/// slices of the batch tensor in place), not padded to N: on a CPU a batch of N costs most of N
/// frames' inference, so a lone frame padded to N would pay for the frames that are not there,
/// and a dynamic batch (1…N) costs a lone frame more than the batch-1 model does
/// (docs/inference.md, "Batching across streams").
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
            let request = try handle("ov_compiled_model_create_infer_request") { ov_compiled_model_create_infer_request(compiled.pointer, $0) }
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
            return request
        }
        // Counted first: a failure below still runs deinit, which leaves and frees.
        batch.join()
        single.join()
        for index in 0..<Self.slotCount {
            var batchShape = try shape(size)
            defer { ov_shape_free(&batchShape) }
            let tensor = try handle("ov_tensor_create") { ov_tensor_create(U8, batchShape, $0) }
            var data: UnsafeMutableRawPointer?
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            data!.initializeMemory(as: UInt8.self, repeating: 0, count: sliceBytes * size) // letterbox borders
            let whole = Completion(model: self, slot: index, single: nil)
            let slot: Slot
            do {
                slot = Slot(request: try request(batch, whole), input: tensor, base: data!)
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
                let view = try handle("ov_tensor_create_from_host_ptr") { ov_tensor_create_from_host_ptr(U8, one, data!.advanced(by: i * sliceBytes), $0) }
                slot.views.append(view)
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
    public var precision: String? { compiledProperty("INFERENCE_PRECISION_HINT")?.lowercased() }
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
