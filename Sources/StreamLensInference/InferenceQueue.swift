import Foundation
import StreamLensCore

/// Frames waiting for their inference, oldest first: the one mechanism by which every model
/// stage keeps requests in flight — OpenVINO infer requests here (`InferenceOptions.requests`),
/// requests to a server there (`in-flight`) — gives the results back in the order the frames
/// came, and, for a server, backs off while it is away and says when it went and came back.
///
/// A stage submits each frame (or queues it without inference, between `interval`s) and
/// answers `.pending`; its `finishOldest` takes the oldest result from here. Used by one
/// worker thread.
public final class InferenceQueue<Context> {
    /// What became of one frame's inference.
    public enum Outcome {
        /// The model's outputs (in the model's order) and the time from submitting to done.
        case outputs([TensorData], milliseconds: Double)
        /// None was asked for this frame (between `interval`s).
        case notAsked
        /// The server was away (waiting out a back-off): the frame goes on without inference.
        case serverAway
        /// A server's request failed: the frame goes on without inference (the outage is
        /// reported in `takeNotices`).
        case lost(InferenceError)
        /// A local model failed on this frame.
        case failed(InferenceError)
    }

    private struct Entry {
        var context: Context
        var request: PendingInference?
        var model: (any ImageInference)?
        var serverAway = false
    }

    private var entries: [Entry] = []
    private var record = RemoteRecord()
    private var notices: [StageNotice] = []
    /// Whether a server was ever asked (the summary then has its figures).
    public private(set) var usedServer = false

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }

    /// Starts inference of one frame: its pixels are copied (or pre-processed and sent) now.
    /// A server waiting out a back-off is not asked; the frame is queued without inference.
    /// Throws what submitting threw (nothing is queued then).
    public func submit(_ model: any ImageInference, pixels: UnsafeRawBufferPointer, context: Context) throws {
        if model.remoteAddress != nil {
            usedServer = true
            guard record.mayTry(now: DispatchTime.now().uptimeNanoseconds) else {
                entries.append(Entry(context: context, request: nil, model: model, serverAway: true))
                return
            }
        }
        let request = try model.submit(pixels)
        entries.append(Entry(context: context, request: request, model: model))
    }

    /// Queues a frame that asks for no inference; it leaves in its turn.
    public func queueWithoutInference(_ context: Context) {
        entries.append(Entry(context: context, request: nil, model: nil))
    }

    /// The oldest frame and what became of its inference, once it is in — or at once when
    /// `wait` is set or its model's window of requests in flight is full (then it waits); nil
    /// when it is still running, or nothing is queued.
    public func takeOldest(wait: Bool) -> (context: Context, outcome: Outcome)? {
        guard let entry = entries.first else { return nil }
        guard let request = entry.request, let model = entry.model else {
            entries.removeFirst()
            if entry.serverAway {
                record.skip()
                return (entry.context, .serverAway)
            }
            return (entry.context, .notAsked)
        }
        let running = entries.reduce(0) { n, e in e.request != nil && e.model === model ? n + 1 : n }
        if !wait && !request.isFinished && running < model.requestCount { return nil }
        entries.removeFirst()
        let result = request.wait().flatMap { answer in Result { try model.outputs(of: answer) }.mapError { error in
            (error as? InferenceError) ?? InferenceError("\(error)")
        } }
        switch (result, model.remoteAddress) {
        case (.success(let outputs), let address):
            if let address, let notice = record.record(request, error: nil, address: address) { notices.append(notice) }
            return (entry.context, .outputs(outputs, milliseconds: request.roundTripMilliseconds))
        case (.failure(let error), let address?):
            if let notice = record.record(request, error: error, address: address) { notices.append(notice) }
            return (entry.context, .lost(error))
        case (.failure(let error), nil):
            return (entry.context, .failed(error))
        }
    }

    /// The server's figures for the end-of-stream summary, when one was asked.
    public var summary: String? { usedServer ? record.summary : nil }

    public func takeNotices() -> [StageNotice] { notices.take() }
}
