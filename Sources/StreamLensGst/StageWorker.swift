import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// The bridge for one stage element. Where the stage's frames are processed is decided by what
/// the stage is (`StageDescriptor.placement`, or the `thread` property), once, before the first
/// frame:
/// - in-line: on upstream's streaming thread as each frame arrives (`takeInline`), as a
///   GstBaseTransform runs; the worker thread only delivers what a stage finishes later and
///   ends the stream;
/// - its own thread: the worker thread pulls frames from the stage's input queue (`run`).
///
/// Modes (`mode` property), for a stage on its own thread: lossless keeps the input queue at
/// four frames without dropping, so a slow stage holds upstream back and every frame is
/// processed; live keeps one and drops the older, so the stage always works on the newest
/// frame. auto picks live when a LATENCY query upstream says the source is live.
///
/// Sendable by construction: the stage and its frame path (`FramePath`) live in a Mutex, taken
/// by one caller at a time; what other threads hand over goes through the `StageInbox`.
final class StageWorker: Sendable {
    private let elementReference: ObjectReference<GstElement>
    var element: UnsafeMutablePointer<GstElement> { elementReference.pointer }
    let descriptor: StageDescriptor
    let name: String
    let placement: StagePlacement
    let inbox = StageInbox()
    private let path: Mutex<FramePath>
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    static let stopTimeout: Double = 10

    /// Builds the stage (`type` with `settings`) into its frame path.
    init(element: UnsafeMutablePointer<GstElement>, type: any Stage.Type, settings: PropertyValues) throws {
        let reference = ObjectReference(retaining: element)
        elementReference = reference
        descriptor = type.descriptor
        name = objectName(element)
        let bridge = BridgeSettings(settings)
        placement = bridge.placement(of: descriptor)
        if descriptor.restartsUpstream, placement == .inLine {
            throw StageError("\(name) runs on a thread of its own (it watches its source while no frame comes): thread=in-line is not for it")
        }
        let stage = try type.make(settings)
        path = Mutex(FramePath(element: reference, stage: stage, descriptor: descriptor, bridge: bridge, placement: placement, inbox: inbox))
    }

    /// The stage's type is a watchdog's (restarts its source part).
    var isWatchdog: Bool { descriptor.restartsUpstream }

    /// An error came from the source part of a watchdog stage (bus thread).
    func sourceFailed(_ message: String) {
        inbox.sourceFailure.withLock { if $0 == nil { $0 = message } }
    }

    /// An audio unit on the audio input (the audio's streaming thread): for the stage, between
    /// two frames, on its own thread.
    func audioArrived(_ unit: EncodedFrame) { inbox.audioArrived(unit) }
    func audioEnded() { inbox.audioEnded() }

    /// A property changed (any thread): picked up before the next frame.
    func settingsDidChange() {
        let settings = StageElements.settings(of: element, descriptor: descriptor)
        inbox.settings.withLock { $0 = settings }
    }

    /// Frames a stage dropped for errors: the count, the first reason, and whether the run was
    /// lossless (a lossless run that lost frames fails: the host reads this at end of stream).
    var framesDroppedForErrors: (count: Int, first: String?, lossless: Bool) {
        (inbox.droppedForErrors.load(ordering: .relaxed), inbox.firstDropReason.withLock { $0 }, !inbox.live.load(ordering: .relaxed))
    }

    func start() {
        path.withLock { $0.start() }
        started.store(true, ordering: .relaxed)
        // The thread lets go of the worker before it says it is done: the host's reference is
        // then the last one, so the stage and its models are freed by the thread that stops the
        // pipeline, not by this one (perhaps while the process runs its exit handlers).
        let thread = Thread { [weak self] in
            guard let worker = self else { return }
            worker.run()
            worker.path.withLock { $0.endBacklog() }
            let finished = worker.finished
            _ = consume worker
            finished.signal()
        }
        thread.name = "streamlens \(name)"
        thread.start()
    }

    /// Called after the inner elements went to READY: pulls and pushes return at once, so the
    /// worker ends within a frame's work. The wait is bounded all the same: a stage stuck in its
    /// work (a model that never returns) must not hold the pipeline's shutdown. Such a worker is
    /// left running; it holds its own references, so nothing it uses is freed under it.
    func stop() {
        guard started.exchange(false, ordering: .relaxed) else { return }
        inbox.stopping.store(true, ordering: .relaxed)
        if finished.wait(timeout: .now() + Self.stopTimeout) == .timedOut {
            writeStandardError("warning: \(name): its worker did not stop within \(Int(Self.stopTimeout)) s; leaving it\n")
        }
    }

    /// A frame at an in-line stage's input, on upstream's streaming thread: processed now, with
    /// any queued before it.
    func takeInline() -> GstFlowReturn {
        path.withLock { $0.takeInline() }
    }

    private var stopping: Bool { inbox.stopping.load(ordering: .relaxed) }

    private func run() {
        if !path.withLock({ $0.startWatchdog() }) { return }
        while true {
            let goOn = placement == .inLine ? inLineRound() : path.withLock { $0.pumpOnce() }
            if !goOn || stopping { return }
        }
    }

    /// An in-line stage's worker: frames are processed on arrival (`takeInline`); this thread
    /// delivers those whose results came in meanwhile and ends the stream after the last. It
    /// waits for the input's end outside the frame path, which the arrivals take.
    private func inLineRound() -> Bool {
        let holding = path.withLock { path -> Bool in
            path.publishMetrics()
            path.closeInputIfEnding()
            return !path.held.isEmpty
        }
        let ended = sl_stage_wait_input_end(element, GstClockTime(holding ? 2_000_000 : 100_000_000)) != 0
        return path.withLock { path -> Bool in
            // A frame queued as the input ended, that no arrival took.
            while let sample = sl_stage_take(path.element) {
                if !path.handle(sample) { return false }
            }
            if !path.held.isEmpty, !path.deliverFinished(wait: ended) { return false }
            if ended { path.finishStream() }
            return !ended
        }
    }
}
