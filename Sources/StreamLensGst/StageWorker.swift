import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// The bridge for one stage element: a thread that pulls frames from the stage's input,
/// hands each frame to the stage, and pushes the result out of the stage's output — or lets the
/// upstream streaming thread do so in-line (`takeInline`), for a lossless stage whose work on a
/// frame is shorter than a hand-over to another thread (`considerInLine`).
///
/// Modes (`mode` property): lossless keeps the input queue at four buffers without dropping, so a slow
/// stage holds upstream back and every frame is processed; live keeps one buffer and drops
/// the older one, so the stage always works on the newest frame. auto picks live when a
/// LATENCY query upstream says the source is live.
///
/// Here: the worker's state, its life cycle and the frame loop (pull, caps, the stage, end of
/// stream). By concern beside it: StageWorker+Delivery (frames pushed on or counted dropped, in
/// order), +Metrics (Prometheus), +BusPosts (notices, events, readings, figures on the bus),
/// +Watchdog (restarts of the source part); SamplePixels is the frame the stage sees.
///
/// @unchecked Sendable: `stage`, `format`, `statistics` and the other `var`s below are used only
/// with `processing` held once `start()` has run (by the worker, or in-line by the upstream
/// streaming thread; before that only by the starting thread);
/// `pendingSettings` and `stopping` are Mutex/Atomic; the element is a counted reference
/// (`ObjectReference`) held as long as the worker.
final class StageWorker: @unchecked Sendable {
    private let elementReference: ObjectReference<GstElement>
    var element: UnsafeMutablePointer<GstElement> { elementReference.pointer }
    /// False for a sink stage: the frames end with the stage.
    let hasOutput: Bool
    let stage: any Stage
    let descriptor: StageDescriptor
    let requestedMode: BridgeSettings.Mode
    let name: String

    private let pendingSettings = Mutex<StageSettings?>(nil)
    /// Held while the stage is called: by the worker, or by the upstream streaming thread for a
    /// stage running in-line (`takeInline`): one caller at a time, as `Stage` promises.
    private let processing = NSLock()
    /// Frames are processed on the upstream streaming thread (`takeInline`), not the worker's
    /// (the stage's input says so: sl_stage_set_in_line).
    var inLine: Bool { sl_stage_in_line(element) != 0 }
    /// The first frame is yet to come (the mode is decided on it); set-up of a live stage's backlog.
    private var first = true
    private var settingUpLive = false
    let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?

    // Worker-thread state.
    private var format: VideoFormat?
    private var lastCaps: UnsafeMutablePointer<GstCaps>?
    var statistics = FrameStatistics()
    var live = false
    var reportedLatency: UInt64 = 0
    var downstreamDone = false
    /// Set for a watchdog stage: restarts the source part (see SourceWatchdog).
    let watchdog: SourceWatchdog?

    init(element: UnsafeMutablePointer<GstElement>, stage: any Stage, descriptor: StageDescriptor, settings: StageSettings) {
        elementReference = ObjectReference(retaining: element)
        self.hasOutput = sl_stage_has_output(element) != 0
        self.stage = stage
        self.descriptor = descriptor
        // Encoded video is lossless whatever the mode (StageDescriptor.takesEncodedVideo).
        self.requestedMode = descriptor.takesEncodedVideo ? .lossless : BridgeSettings.Mode(rawValue: settings.string("mode")) ?? .auto
        self.name = objectName(element)
        self.watchdog = descriptor.restartsUpstream ? SourceWatchdog(element: element, name: name, settings: settings) : nil
    }

    /// An error came from the source part of a watchdog stage (bus thread).
    func sourceFailed(_ message: String) { watchdog?.sourceFailed(message) }

    deinit {
        // The stage's figures leave the metrics page with it (a source removed while the
        // process goes on; at exit the registry holds nothing of a pipeline that is gone).
        MetricsRegistry.shared.remove(source: metricsSource)
        StageFigures.remove(key: metricsSource)
        if let lastCaps { gst_caps_unref(lastCaps) }
    }

    func start() {
        metricsSourceName = takeString(sl_element_pipeline_source_name(element))
        sl_stage_set_downstream_flow(element, GST_FLOW_OK)
        if watchdog != nil || requestedMode == .live { inLineTrial = nil }
        setLive(requestedMode == .live)
        updateLatency(post: false)
        // The thread lets go of the worker before it says it is done: the host's reference is then
        // the last one, so the stage and its models are freed by the thread that stops the
        // pipeline — not by this one, perhaps while the process already runs its exit handlers
        // (a remote stage freed here raced exit() and corrupted the heap, 2 runs in ~80).
        let thread = Thread { [weak self] in
            guard let worker = self else { return }
            worker.run()
            worker.endBacklog()
            let finished = worker.finished
            _ = consume worker
            finished.signal()
        }
        thread.name = "streamlens \(name)"
        self.thread = thread
        thread.start()
    }

    /// Called after the inner elements went to READY: pulls and pushes return at once, so the
    /// worker ends within a frame's work. The wait is bounded all the same: a stage stuck in its
    /// work (a model that never returns) must not hold the pipeline's shutdown. Such a worker is
    /// left running; it holds its own references, so nothing it uses is freed under it.
    func stop() {
        guard thread != nil else { return }
        stopping.store(true, ordering: .relaxed)
        if finished.wait(timeout: .now() + Self.stopTimeout) == .timedOut {
            writeStandardError("warning: \(name): its worker did not stop within \(Int(Self.stopTimeout)) s; leaving it\n")
        }
        thread = nil
    }

    static let stopTimeout: Double = 10

    /// A property changed (any thread): picked up by the worker before the next frame.
    func settingsDidChange() {
        let settings = StageElements.settings(of: element, descriptor: descriptor)
        pendingSettings.withLock { $0 = settings }
    }

    /// Lossless while the stage may yet go in-line (`considerInLine`): a queue of one frame, so
    /// upstream's buffer pool does not grow by the four a worker's queue holds. A pool hands its
    /// buffers out in turn, all of them, and each new one costs page faults: with the larger
    /// pool kept after the switch, a 720p pass-through in-line added 15–21 µs a frame against
    /// gst-launch, 11–14 with a queue of one (bench-bridge-style runs, 9–11 rounds, a noisy VM).
    private func setLive(_ live: Bool, settingUp: Bool = false) {
        self.live = live
        liveForHost.store(live, ordering: .relaxed)
        let frames = live ? (settingUp ? Int(SL_SETUP_QUEUE) : 1) : (inLineTrial != nil ? 1 : Int(SL_LOSSLESS_QUEUE))
        configureQueue(frames: frames, drop: live)
    }

    private func configureQueue(frames: Int, drop: Bool) {
        sl_stage_configure_queue(element, guint(frames), drop ? 1 : 0)
        queueCapacity = frames
    }

    func updateLatency(post: Bool) {
        let latency = stage.latencyNanoseconds
        guard latency != reportedLatency || !post else { return }
        reportedLatency = latency
        sl_stage_set_latency(element, GstClockTime(latency))
        if post { gst_element_post_message(element, gst_message_new_latency(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self))) }
    }

    private func run() {
        if let watchdog, !watchdog.startSource(stopping: { stopping.load(ordering: .relaxed) }) { return }
        while true {
            processing.withLock { publishMetrics() }
            // A timed pull: a stop can come while the stage's input was never flushed (a pipeline
            // that failed on its way to PAUSED), so the flag is checked every 100 ms.
            switch watchdogBeforePull() {
            case .proceed: break
            case .again: continue
            case .stop: return
            }
            // Ctrl-C reached this stage (the first of its chain): upstream is refused with EOS
            // from now on, and the stage's own input ends behind the frames that reached it
            // already (the pipeline waits for its input's EOS, which a source that is
            // down or restarting would never send). Those frames are processed as any others
            // (a lossless run loses none of what it took: the queue held up to four that were
            // dropped before), then the input's EOS ends the output below.
            if !inputClosed, !streamFinished, sl_stage_end_requested(element) != 0 {
                inputClosed = true
                sl_stage_close_input(element)
            }
            if inLine {
                // Frames are processed in-line (`takeInline`); this thread delivers those whose
                // results came in meanwhile, and ends the stream after the last.
                let holding = processing.withLock { !held.isEmpty }
                let ended = sl_stage_wait_input_end(element, GstClockTime(holding ? 2_000_000 : 100_000_000)) != 0
                let goOn = processing.withLock { () -> Bool in
                    // Frames queued before the switch to in-line that no later arrival took.
                    while let sample = sl_stage_take(element) {
                        if !handle(sample) { return false }
                    }
                    if !held.isEmpty, !deliverFinished(wait: ended) { return false }
                    if ended { finishStream() }
                    return !ended
                }
                if !goOn || stopping.load(ordering: .relaxed) { return }
                continue
            }
            // Frames held for a stage's requests in flight: a short pull, so a finished one
            // leaves soon even when no new frame comes.
            var holding = false
            let goOn = processing.withLock { () -> Bool in
                defer { holding = !held.isEmpty }
                return held.isEmpty || deliverFinished(wait: false)
            }
            if !goOn { return }
            guard let sample = sl_stage_pull(element, GstClockTime(holding ? 2_000_000 : 100_000_000)) else {
                switch watchdogAtEndOfStream() {
                case .proceed: break
                case .again: continue
                case .stop: return
                }
                if sl_stage_input_ended(element) != 0 {
                    processing.withLock {
                        if held.isEmpty || deliverFinished(wait: true) { finishStream() }
                    }
                    return
                }
                if stopping.load(ordering: .relaxed) { return }
                continue
            }
            if !processing.withLock({ handle(sample) }) { return }
        }
    }

    /// A frame at the stage's input, on the upstream streaming thread: a stage running in-line
    /// (`considerInLine`) takes it — and any queued before the decision — and processes it now,
    /// with no hand-over to its worker. Returns what downstream
    /// answered (EOS or an error stop upstream, as from any element).
    func takeInline() -> GstFlowReturn {
        processing.withLock {
            while let sample = sl_stage_take(element) {
                if !handle(sample) { return GST_FLOW_FLUSHING }
            }
            return sl_stage_downstream_flow(element)
        }
    }

    /// One frame: the stage's settings and format brought up to date, the frame processed, and
    /// what is ready delivered. False when the worker must stop (flushing). `processing` held.
    private func handle(_ sample: OpaquePointer) -> Bool {
        let pixels = SamplePixels(taking: sample)
        watchdog?.frameArrived()
        // Downstream is done (EOS or an error): drop what is still queued until upstream,
        // now refused with the same answer, ends the stream.
        if downstreamDone || sl_stage_downstream_flow(element) != GST_FLOW_OK {
            downstreamDone = true
            return true
        }
        // Auto mode on a live input: the newest frame wins, once set-up is over. A stage
        // sets up on its first format (a model compiles for the frame's size, 0.2–2 s;
        // precision=auto times candidates too); the frames that arrive meanwhile (a late
        // live source sends them at once) are its backlog, kept (up to SL_SETUP_QUEUE, 30;
        // older ones dropped, upstream never waits) and processed, instead of all but the
        // newest being dropped at the start of every live run. Its stages downstream get
        // that backlog in a burst: every stage keeps its frames the same way until no
        // stage of the process has a set-up backlog left (`StageWorker.setupBacklogs`).
        // The held frames' memory is held for that moment only.
        if first {
            first = false
            if requestedMode == .auto, !descriptor.takesEncodedVideo, sl_stage_upstream_is_live(element) != 0 {
                setLive(true, settingUp: true)
                settingUpLive = true
            }
        }
        if let settings = pendingSettings.withLock({ s -> StageSettings? in defer { s = nil }; return s }) {
            stage.settingsChanged(settings)
            updateLatency(post: true)
            postNotices()
        }
        guard handleCaps(of: sample), let format, let buffer = gst_sample_get_buffer(sample) else {
            // The stage cannot take these frames (its error is on the bus). Going away now
            // would leave the input queue full and upstream's end-of-stream waiting in it
            // for a reader, with the streaming lock held: the host's change to PLAYING then
            // waited for ever (a 3-frame source, ~1 run in 40 under a busy core). Refuse what
            // comes and keep draining until the stream ends or the stage is stopped.
            sl_stage_set_downstream_flow(element, GST_FLOW_ERROR)
            downstreamDone = true
            return true
        }
        sl_handoff_acquire(buffer)
        pixels.frameSize = (format.width, format.height)
        pixels.eventsOnArrival = pixels.frameRecord(FrameRecords.events)
        statistics.received(at: DispatchTime.now().uptimeNanoseconds)
        let pts = sl_buffer_pts(buffer), duration = sl_buffer_duration(buffer), dts = buffer.pointee.dts
        let frame = Frame(format: format, pts: pts == GstClockTime.max ? nil : UInt64(pts),
                          duration: duration == GstClockTime.max ? nil : UInt64(duration),
                          index: statistics.framesIn - 1, pixels: pixels,
                          ageOnArrival: live ? age(of: pixels.sample, pts: pts) : nil,
                          dts: dts == GstClockTime.max ? nil : UInt64(dts),
                          keyframe: buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_DELTA_UNIT.rawValue == 0)
        // A buffer smaller than its caps say would be read past its end by any stage that
        // maps it: dropped here, for every stage, with the reason.
        // (The caps' frame size, known since they were negotiated; a video meta's own planes.)
        let meta = Int(sl_buffer_video_meta_size(buffer))
        let needed = meta > 0 ? meta : format.size
        let size = Int(gst_buffer_get_size(buffer))
        let outcome: FrameOutcome
        if size < needed {
            outcome = .failed(reason: "a frame of \(size) bytes, shorter than its caps say (\(needed) bytes for \(format.width)x\(format.height) \(format.pixelFormat))")
        } else {
            let start = inLineTrial != nil ? DispatchTime.now().uptimeNanoseconds : 0
            outcome = stage.process(frame)
            if inLineTrial != nil { considerInLine(outcome, nanoseconds: DispatchTime.now().uptimeNanoseconds - start) }
        }
        if settingUpLive {
            if let end = backlogEnd, statistics.framesIn >= end { endBacklog() }
            if backlogEnd == nil, Self.setupBacklogs.load(ordering: .relaxed) == 0 {
                settingUpLive = false
                setLive(true)
            }
        }
        postNotices()
        reportPeriodically()
        // A stage whose cost is only known once it runs (a model) may raise its latency.
        if stage.latencyNanoseconds != reportedLatency { updateLatency(post: true) }
        for (frame, outcome) in held.add((pixels, pts), outcome: outcome) {
            if !deliver(outcome, pixels: frame.pixels, pts: frame.pts) { return false }
        }
        return held.isEmpty || deliverFinished(wait: false)
    }

    /// End of stream: the summary, then end-of-stream downstream (once).
    func finishStream() {
        endBacklog()
        guard !streamFinished else { return }
        streamFinished = true
        stage.streamEnded()
        // What the stage's writers found while it ended (a write that failed on their thread).
        postNotices()
        postStageEvents()
        publishMetrics(force: true)
        postStatistics()
        if hasOutput { sl_stage_push_end_of_stream(element) }
    }

    /// Whether frames go on being processed here or in-line, on the upstream streaming thread
    /// (`takeInline`): decided once, after a few frames on this thread (the first one, where a
    /// stage sets up, not counted). In-line is for a lossless stage without a watchdog that
    /// answers each frame at once, in less than `inLineBudget`: a hand-over to this thread
    /// costs ~50 µs of wake-ups a frame here (bench-bridge), more than such a stage's work,
    /// while a stage doing more (a model) runs beside upstream's own work on its thread.
    private func considerInLine(_ outcome: FrameOutcome, nanoseconds: UInt64) {
        if live || watchdog != nil || outcome == .pending || requestedMode == .live {
            inLineTrial = nil
            if !live { setLive(false) } // the worker's queue of four
            return
        }
        if statistics.framesIn <= 1 { return } // set-up
        inLineTrial!.append(nanoseconds)
        guard inLineTrial!.count >= Self.inLineTrialFrames else { return }
        let median = inLineTrial!.sorted()[inLineTrial!.count / 2]
        inLineTrial = nil
        guard median < Self.inLineBudget else {
            setLive(false) // the worker's queue of four
            return
        }
        sl_stage_set_in_line(element)
    }

    /// Process times of the frames seen so far (ns); nil once decided.
    private var inLineTrial: [UInt64]? = []
    static let inLineTrialFrames = 8
    static let inLineBudget: UInt64 = 200_000

    /// Frames the stage answered `.pending` for, and frames that came after them, oldest first.
    /// They leave in this order (FrameDelivery: the same rule as the in-memory StageDriver's).
    var held = FrameDelivery<(pixels: SamplePixels, pts: GstClockTime)>()

    /// Frames a stage dropped for errors (StageWorker+Delivery): the kinds of reason said so far,
    /// the count and the first reason for the host, and whether the run is lossless.
    var dropKinds: Set<String> = []
    let droppedCount = Atomic<Int>(0)
    let liveForHost = Atomic<Bool>(false)
    let firstDropReason = Mutex<String?>(nil)
    private(set) var streamFinished = false
    /// The stage's end was asked for and its input closed (sl_stage_close_input).
    private var inputClosed = false
    /// The readings last set on the element (StageWorker+BusPosts).
    var publishedReadings: [String: String] = [:]
    /// Events this stage added, by type, for Prometheus.
    var eventCounts: [[String]: Int] = [:]
    /// The registry's key for this worker's metrics.
    let metricsSource = MetricsRegistry.shared.newSource()
    /// The source this stage's pipeline runs for (`streamlens serve`), read when the stage
    /// starts: its metrics' `source` label. Nil in `streamlens run` and in other hosts.
    var metricsSourceName: String?
    var lastMetrics: UInt64 = 0
    var queueDrops = 0
    /// Frames the input queue holds at most now (sl_stage_configure_queue).
    var queueCapacity = 4
    /// (time, frames received) at recent publishes: the frame rate over the last few seconds.
    var rateWindow: [(time: UInt64, frames: Int)] = []
    /// When the figures were last posted while running (StageWorker+BusPosts).
    var lastReport = DispatchTime.now().uptimeNanoseconds

    /// First sample and caps changes: tell the stage, and report the caps on the bus.
    private func handleCaps(of sample: OpaquePointer) -> Bool {
        guard let caps = gst_sample_get_caps(sample) else {
            // Bytes straight from a file (`filesrc ! lensdetect`): nothing decoded them.
            let upstream = sl_element_neighbour(element, "sink").map { e -> String in
                defer { gst_object_unref(e) }
                return objectName(e)
            } ?? "upstream"
            sl_stage_post_error(element, "frames arrive without caps: \(upstream) sends bytes, not decoded video; put a decodebin (and a videoconvert) between \(upstream) and \(objectName(element))", nil)
            return false
        }
        if let lastCaps, lastCaps == caps || gst_caps_is_equal(lastCaps, caps) != 0 { return true }
        if let lastCaps { gst_caps_unref(lastCaps) }
        lastCaps = gst_caps_ref(caps)
        guard let newFormat = descriptor.takesEncodedVideo ? VideoFormat(encodedCaps: caps) : VideoFormat(caps: caps) else {
            sl_stage_post_error(element, descriptor.takesEncodedVideo ? "not encoded video: \(capsString(caps))" : "not raw video: \(capsString(caps))", nil)
            return false
        }
        let arrivedBefore = Int(sl_stage_buffers_arrived(element))
        defer {
            // The frames that came while the stage set up on its first format (see `run`).
            let backlog = min(Int(SL_SETUP_QUEUE), Int(sl_stage_buffers_arrived(element)) - arrivedBefore)
            if live, format == newFormat, statistics.framesIn == 0, backlog > 0, backlogEnd == nil {
                backlogEnd = 1 + backlog
                Self.setupBacklogs.add(1, ordering: .relaxed)
            }
        }
        Self.formatSetups.add(1, ordering: .relaxed)
        // A lossless stage setting up on its first format (a model compiling, 0.1–2 s): upstream
        // goes on decoding meanwhile, into a longer queue (up to SL_SETUP_QUEUE frames, ~100 MB at
        // most), instead of waiting after four frames; the stage then catches up.
        let widened = !live && format == nil
        if widened {
            configureQueue(frames: max(Int(SL_LOSSLESS_QUEUE), min(Int(SL_SETUP_QUEUE), Self.setupQueueBytes / max(1, newFormat.size))), drop: false)
        }
        defer {
            if widened { setLive(false) }
            Self.lastFormatSetupEnd.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            Self.formatSetups.subtract(1, ordering: .relaxed)
        }
        do {
            try stage.formatChanged(newFormat)
        } catch {
            sl_stage_post_error(element, "\(error)", "caps: \(capsString(caps))")
            return false
        }
        format = newFormat
        sl_stage_post_info(element, "caps", "\(name): \(capsString(caps))")
        return true
    }

    /// Running time now minus the frame's running time: how long ago it was captured.
    func age(of sample: OpaquePointer, pts: GstClockTime) -> UInt64? {
        guard pts != GstClockTime.max, let segment = gst_sample_get_segment(sample) else { return nil }
        let frameTime = gst_segment_to_running_time(segment, GST_FORMAT_TIME, pts)
        let now = sl_element_running_time_now(element)
        guard frameTime != GstClockTime.max, now != GstClockTime.max else { return nil }
        return now > frameTime ? UInt64(now - frameTime) : 0
    }

    /// Stages of the process with a set-up backlog left (see `run`).
    static let setupBacklogs = Atomic<Int>(0)
    /// The memory a lossless stage's input may hold while it sets up (`handleCaps`).
    static let setupQueueBytes = 100 << 20
    /// Stages of the process setting up on a format now (a model compiling, precision=auto
    /// timing its candidates), and when the last one finished (uptime, ns): the start timeout
    /// does not count that time (a model compiling on a busy machine is slow, not stuck).
    static let formatSetups = Atomic<Int>(0)
    static let lastFormatSetupEnd = Atomic<UInt64>(0)
    /// This stage's backlog: the frame count (framesIn) at which it is processed.
    private var backlogEnd: Int?
    private func endBacklog() {
        guard backlogEnd != nil else { return }
        backlogEnd = nil
        Self.setupBacklogs.subtract(1, ordering: .relaxed)
    }
}
