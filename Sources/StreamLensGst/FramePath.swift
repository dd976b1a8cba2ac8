import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// One stage and everything its frames go through: caps, settings between frames, the stage's
/// calls, delivery in order (`FramePath+Delivery`), its posts on the bus (`+BusPosts`), metrics
/// (`+Metrics`) and a watchdog's restarts (`+Watchdog`). Not Sendable: it lives in its worker's
/// Mutex (`StageWorker`), so one caller at a time — the worker thread, or upstream's streaming
/// thread for an in-line stage — is a property of the type, not a promise of a comment.
final class FramePath {
    let elementReference: ObjectReference<GstElement>
    var element: UnsafeMutablePointer<GstElement> { elementReference.pointer }
    let stage: any Stage
    let descriptor: StageDescriptor
    let name: String
    /// False for a sink stage: the frames end with the stage.
    let hasOutput: Bool
    let requestedMode: BridgeSettings.Mode
    let placement: StagePlacement
    let inbox: StageInbox
    /// What the stages of this pipeline share (set-ups, backlogs).
    let shared: PipelineShared
    /// Set for a watchdog stage: restarts the source part (see SourceWatchdog).
    let watchdog: SourceWatchdog?

    var format: VideoFormat?
    private var lastCaps: UnsafeMutablePointer<GstCaps>?
    var statistics = FrameStatistics()
    var live = false
    var reportedLatency: UInt64 = 0
    var downstreamDone = false
    /// The first frame is yet to come (a live input's set-up backlog is decided on it).
    private var first = true
    private var settingUpLive = false
    /// This stage's set-up backlog: the frame count (framesIn) at which it is processed.
    private var backlogEnd: Int?

    /// Frames the stage answered `.pending` for, and frames that came after them, oldest first.
    /// They leave in this order (FrameDelivery: the same rule as the in-memory StageDriver's).
    var held = FrameDelivery<(pixels: SamplePixels, pts: GstClockTime)>()
    /// Kinds of reason for frames dropped for errors, said once each (FramePath+Delivery).
    var dropKinds: Set<String> = []
    private(set) var streamFinished = false
    /// The stage's end was asked for and its input closed (sl_stage_close_input).
    var inputClosed = false
    /// The readings last set on the element (FramePath+BusPosts).
    var publishedReadings: [String: String] = [:]
    /// Events this stage added, by type, for Prometheus.
    var eventCounts: [[String]: Int] = [:]
    /// The registry's key for this stage's metrics.
    let metricsSource = MetricsRegistry.shared.newSource()
    /// The source this stage's pipeline runs for (`streamlens serve`): its metrics' `source`
    /// label. Nil in `streamlens run` and in other hosts.
    let metricsSourceName: String?
    var lastMetrics: UInt64 = 0
    var queueDrops = 0
    /// Frames the input queue holds at most now (sl_stage_configure_queue).
    var queueCapacity = Int(SL_LOSSLESS_QUEUE)
    /// (time, frames received) at recent publishes: the frame rate over the last few seconds.
    var rateWindow: [(time: UInt64, frames: Int)] = []
    /// When the figures were last posted while running (FramePath+BusPosts).
    var lastReport = DispatchTime.now().uptimeNanoseconds

    /// The memory a lossless stage's input may hold while it sets up (`handleCaps`).
    static let setupQueueBytes = 100 << 20

    init(element reference: ObjectReference<GstElement>, stage: any Stage, descriptor: StageDescriptor, bridge: BridgeSettings,
         placement: StagePlacement, inbox: StageInbox) {
        elementReference = reference
        let element = reference.pointer
        self.stage = stage
        self.descriptor = descriptor
        self.placement = placement
        self.inbox = inbox
        name = objectName(element)
        hasOutput = sl_stage_has_output(element) != 0
        // Encoded video is lossless whatever the mode (StageDescriptor.takesEncodedVideo).
        requestedMode = descriptor.takesEncodedVideo ? .lossless : bridge.mode
        watchdog = (stage as? any SourceRestarting).map { SourceWatchdog(element: element, name: objectName(element), policy: $0.restartPolicy) }
        shared = PipelineShared.of(element)
        metricsSourceName = takeString(sl_element_pipeline_source_name(element))
    }

    deinit {
        // The stage's figures leave the metrics page with it (a source removed while the
        // process goes on; at exit the registry holds nothing of a pipeline that is gone).
        MetricsRegistry.shared.remove(source: metricsSource)
        StageFigures.remove(key: metricsSource)
        if let lastCaps { gst_caps_unref(lastCaps) }
        endBacklog()
    }

    /// Before the first frame: the queue for the mode, the latency, and an in-line stage's
    /// input told to hand its frames over on arrival.
    func start() {
        sl_stage_set_downstream_flow(element, GST_FLOW_OK)
        setLive(requestedMode == .live)
        if placement == .inLine { sl_stage_set_in_line(element) }
        updateLatency(post: false)
    }

    /// Lossless: a queue of four frames, upstream waits when it is full; live: one, the newest
    /// wins; an in-line stage takes each frame as it comes, so one is all it ever holds.
    func setLive(_ live: Bool, settingUp: Bool = false) {
        self.live = live
        inbox.live.store(live, ordering: .relaxed)
        let frames = live ? (settingUp ? Int(SL_SETUP_QUEUE) : 1) : placement == .inLine ? 1 : Int(SL_LOSSLESS_QUEUE)
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

    /// What other threads handed over since the last frame: new settings, audio units.
    private func takeInbox() {
        if let values = inbox.settings.withLock({ s -> PropertyValues? in defer { s = nil }; return s }) {
            stage.changeSettings(values)
            updateLatency(post: true)
            postNotices()
        }
        takeAudio()
    }

    /// Audio that came (a stage with an audio input), given to the stage on this thread.
    func takeAudio() {
        guard descriptor.audioCaps != nil, let input = stage as? any AudioInput else { return }
        let (units, ended) = inbox.takeAudio()
        for unit in units { input.audioArrived(unit) }
        if ended { input.audioEnded() }
    }

    /// An in-line stage's frames, on upstream's streaming thread: every one queued, processed
    /// now. What downstream answered (EOS or an error stop upstream, as from any element).
    func takeInline() -> GstFlowReturn {
        while let sample = sl_stage_take(element) {
            if !handle(sample) { return GST_FLOW_FLUSHING }
        }
        return sl_stage_downstream_flow(element)
    }

    /// One frame: the stage's settings and format brought up to date, the frame processed, and
    /// what is ready delivered. False when the frame path must stop (flushing).
    func handle(_ sample: OpaquePointer) -> Bool {
        let pixels = SamplePixels(taking: sample)
        watchdog?.frameArrived()
        // Downstream is done (EOS or an error): drop what is still queued until upstream,
        // now refused with the same answer, ends the stream.
        if downstreamDone || sl_stage_downstream_flow(element) != GST_FLOW_OK {
            downstreamDone = true
            return true
        }
        // Auto mode on a live input, for a stage on its own thread: the newest frame wins,
        // once set-up is over. A stage sets up on its first format (a model compiles for the
        // frame's size; precision=auto times candidates too); the frames that arrive meanwhile
        // (a late live source sends them at once) are its backlog, kept (up to SL_SETUP_QUEUE;
        // older ones dropped, upstream never waits) and processed, instead of all but the
        // newest being dropped at the start of every live run. Its stages downstream get that
        // backlog in a burst: each keeps its frames the same way until no stage of this
        // pipeline has a set-up backlog left (`PipelineShared.setupBacklogs`).
        if first {
            first = false
            if requestedMode == .auto, placement == .ownThread, !descriptor.takesEncodedVideo, sl_stage_upstream_is_live(element) != 0 {
                setLive(true, settingUp: true)
                settingUpLive = true
            }
        }
        takeInbox()
        guard handleCaps(of: sample), let format, let buffer = gst_sample_get_buffer(sample) else {
            // The stage cannot take these frames (its error is on the bus). Going away now
            // would leave the input queue full and upstream's end-of-stream waiting in it for a
            // reader, with the streaming lock held. Refuse what comes and keep draining until
            // the stream ends or the stage is stopped.
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
        // A buffer smaller than its caps say would be read past its end by any stage that maps
        // it: dropped here, for every stage, with the reason. (The caps' frame size; a video
        // meta's own planes.)
        let meta = Int(sl_buffer_video_meta_size(buffer))
        let needed = meta > 0 ? meta : format.size
        let size = Int(gst_buffer_get_size(buffer))
        let outcome: FrameOutcome = size < needed
            ? .failed(reason: "a frame of \(size) bytes, shorter than its caps say (\(needed) bytes for \(format.width)x\(format.height) \(format.pixelFormat))")
            : stage.process(frame)
        if settingUpLive {
            if let end = backlogEnd, statistics.framesIn >= end { endBacklog() }
            if backlogEnd == nil, shared.setupBacklogs.load(ordering: .relaxed) == 0 {
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

    /// A watchdog stage's source part, started once the pipeline heads for PLAYING; false when
    /// the worker is stopping first. (Nothing to do for other stages.)
    func startWatchdog() -> Bool {
        guard let watchdog else { return true }
        return watchdog.startSource(stopping: { [inbox] in inbox.stopping.load(ordering: .relaxed) })
    }

    /// Ctrl-C reached this stage (the first of its chain): upstream is refused with EOS from now
    /// on, and the stage's own input ends behind the frames that reached it already (the
    /// pipeline waits for its input's EOS, which a source that is down or restarting would never
    /// send). Those frames are processed as any others, then the input's EOS ends the output.
    func closeInputIfEnding() {
        if !inputClosed, !streamFinished, sl_stage_end_requested(element) != 0 {
            inputClosed = true
            sl_stage_close_input(element)
        }
    }

    /// One round of a stage on its own thread: metrics, the watchdog, then the next frame pulled
    /// and handled (or the end of the stream). False when the worker is done. Only this thread
    /// takes the frame path of such a stage, so the pull may wait here.
    func pumpOnce() -> Bool {
        publishMetrics()
        switch watchdogBeforePull() {
        case .proceed: break
        case .again: return true
        case .stop: return false
        }
        closeInputIfEnding()
        // Frames held for a stage's requests in flight: a short pull, so a finished one leaves
        // soon even when no new frame comes.
        if !held.isEmpty, !deliverFinished(wait: false) { return false }
        guard let sample = sl_stage_pull(element, GstClockTime(held.isEmpty ? 100_000_000 : 2_000_000)) else {
            switch watchdogAtEndOfStream() {
            case .proceed: break
            case .again: return true
            case .stop: return false
            }
            if sl_stage_input_ended(element) != 0 {
                if held.isEmpty || deliverFinished(wait: true) { finishStream() }
                return false
            }
            return true
        }
        return handle(sample)
    }

    /// End of stream: the last audio, the summary, then end-of-stream downstream (once).
    func finishStream() {
        endBacklog()
        guard !streamFinished else { return }
        streamFinished = true
        takeAudio()
        stage.streamEnded()
        // What the stage's writers found while it ended (a write that failed on their thread).
        postNotices()
        postStageEvents()
        publishMetrics(force: true)
        postStatistics()
        if hasOutput { sl_stage_push_end_of_stream(element) }
    }

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
            // The frames that came while the stage set up on its first format (see `handle`).
            let backlog = min(Int(SL_SETUP_QUEUE), Int(sl_stage_buffers_arrived(element)) - arrivedBefore)
            if live, format == newFormat, statistics.framesIn == 0, backlog > 0, backlogEnd == nil {
                backlogEnd = 1 + backlog
                shared.setupBacklogs.add(1, ordering: .relaxed)
            }
        }
        shared.formatSetups.add(1, ordering: .relaxed)
        // A lossless stage on its own thread setting up on its first format (a model
        // compiling): upstream goes on decoding meanwhile, into a longer queue (up to
        // SL_SETUP_QUEUE frames, `setupQueueBytes` at most), instead of waiting after four
        // frames; the stage then catches up.
        let widened = !live && format == nil && placement == .ownThread
        if widened {
            configureQueue(frames: max(Int(SL_LOSSLESS_QUEUE), min(Int(SL_SETUP_QUEUE), Self.setupQueueBytes / max(1, newFormat.size))), drop: false)
        }
        defer {
            if widened { setLive(false) }
            shared.lastFormatSetupEnd.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            shared.formatSetups.subtract(1, ordering: .relaxed)
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

    func endBacklog() {
        guard backlogEnd != nil else { return }
        backlogEnd = nil
        shared.setupBacklogs.subtract(1, ordering: .relaxed)
    }
}
