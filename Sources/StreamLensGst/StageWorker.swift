import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// The bridge for one stage element: a thread that pulls samples from the inner appsink,
/// hands each frame to the stage, and pushes the result into the inner appsrc.
///
/// Modes (`mode` property): lossless keeps appsink at four buffers without dropping, so a slow
/// stage holds upstream back and every frame is processed; live keeps one buffer and drops
/// the older one, so the stage always works on the newest frame. auto picks live when a
/// LATENCY query upstream says the source is live.
///
/// @unchecked Sendable: `stage`, `format`, `statistics` and the other `var`s below are used only
/// by the worker thread once `start()` has run (before that only by the starting thread);
/// `pendingSettings` and `stopping` are Mutex/Atomic; the element pointer is a counted
/// reference held until deinit.
final class StageWorker: @unchecked Sendable {
    let element: UnsafeMutablePointer<GstElement>
    let appsink: UnsafeMutablePointer<GstAppSink>
    /// nil for a sink stage: the frames end with the stage.
    let appsrc: UnsafeMutablePointer<GstAppSrc>?
    let stage: any Stage
    let descriptor: StageDescriptor
    let requestedMode: BridgeSettings.Mode
    let name: String

    private let pendingSettings = Mutex<StageSettings?>(nil)
    let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?

    // Worker-thread state.
    private var format: VideoFormat?
    private var lastCaps: UnsafeMutablePointer<GstCaps>?
    private var statistics = FrameStatistics()
    private var live = false
    private var reportedLatency: UInt64 = 0
    private var downstreamDone = false
    /// Set for a watchdog stage: restarts the source part (see SourceWatchdog).
    let watchdog: SourceWatchdog?

    init(element: UnsafeMutablePointer<GstElement>, stage: any Stage, descriptor: StageDescriptor, settings: StageSettings) {
        self.element = element
        gst_object_ref(element)
        self.appsink = sl_stage_appsink(element)
        self.appsrc = sl_stage_appsrc(element)
        self.stage = stage
        self.descriptor = descriptor
        self.requestedMode = BridgeSettings.Mode(rawValue: settings.string("mode")) ?? .auto
        self.name = objectName(element)
        self.watchdog = descriptor.restartsUpstream ? SourceWatchdog(element: element, name: name, settings: settings) : nil
    }

    /// An error came from the source part of a watchdog stage (bus thread).
    func sourceFailed(_ message: String) { watchdog?.sourceFailed(message) }

    deinit {
        // The stage's figures leave the metrics page with it (a source removed while the
        // process goes on; at exit the registry holds nothing of a pipeline that is gone).
        MetricsRegistry.shared.remove(source: metricsSource)
        if let lastCaps { gst_caps_unref(lastCaps) }
        if let pushedCaps { gst_caps_unref(pushedCaps) }
        gst_object_unref(element)
    }

    func start() {
        metricsSourceName = takeString(sl_element_pipeline_source_name(element))
        sl_stage_set_downstream_flow(element, GST_FLOW_OK)
        if requestedMode != .auto { setLive(requestedMode == .live) }
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

    private func setLive(_ live: Bool, settingUp: Bool = false) {
        self.live = live
        liveForHost.store(live, ordering: .relaxed)
        sl_stage_configure_queue(element, live ? 1 : 0, settingUp ? 1 : 0)
        queueCapacity = !live ? 4 : settingUp ? Int(SL_SETUP_QUEUE) : 1
    }

    private func updateLatency(post: Bool) {
        let latency = stage.latencyNanoseconds
        guard latency != reportedLatency || !post else { return }
        reportedLatency = latency
        sl_stage_set_latency(element, GstClockTime(latency))
        if post { gst_element_post_message(element, gst_message_new_latency(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self))) }
    }

    private func run() {
        var first = true
        var settingUpLive = false
        if let watchdog, !watchdog.startSource(stopping: { stopping.load(ordering: .relaxed) }) { return }
        while true {
            publishMetrics()
            // A timed pull: a stop can come while the inner appsink was never flushed (a pipeline
            // that failed on its way to PAUSED), so the flag is checked every 100 ms.
            switch watchdogBeforePull() {
            case .proceed: break
            case .again: continue
            case .stop: return
            }
            // Ctrl-C reached this stage (the first of its chain): upstream is refused with EOS
            // from now on, and the stage's own input ends behind the frames that reached it
            // already (the pipeline waits for its inner appsink's EOS, which a source that is
            // down or restarting would never send). Those frames are processed as any others
            // (a lossless run loses none of what it took: the queue held up to four that were
            // dropped before), then the appsink's EOS ends the output below.
            if !inputClosed, !streamFinished, sl_stage_end_requested(element) != 0 {
                inputClosed = true
                sl_stage_close_input(element)
            }
            // Frames held for a stage's requests in flight: a short pull, so a finished one
            // leaves soon even when no new frame comes.
            if !held.isEmpty, !deliverFinished(wait: false) { return }
            guard let sample = gst_app_sink_try_pull_sample(appsink, GstClockTime(held.isEmpty ? 100_000_000 : 2_000_000)) else {
                switch watchdogAtEndOfStream() {
                case .proceed: break
                case .again: continue
                case .stop: return
                }
                if gst_app_sink_is_eos(appsink) != 0 {
                    if !held.isEmpty, !deliverFinished(wait: true) { return }
                    finishStream()
                    return
                }
                if stopping.load(ordering: .relaxed) { return }
                continue
            }
            let pixels = SamplePixels(taking: sample)
            watchdog?.frameArrived()
            // Downstream is done (EOS or an error): drop what is still queued until upstream,
            // now refused with the same answer, ends the stream.
            if downstreamDone || sl_stage_downstream_flow(element) != GST_FLOW_OK {
                downstreamDone = true
                continue
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
                if requestedMode == .auto, sl_stage_upstream_is_live(element) != 0 {
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
                // would leave the inner appsink full and upstream's end-of-stream waiting in it
                // for a reader, with the streaming lock held: the host's change to PLAYING then
                // waited for ever (a 3-frame source, ~1 run in 40 under a busy core). Refuse what
                // comes and keep draining until the stream ends or the stage is stopped.
                sl_stage_set_downstream_flow(element, GST_FLOW_ERROR)
                downstreamDone = true
                continue
            }
            sl_handoff_acquire(buffer)
            pixels.frameSize = (format.width, format.height)
            pixels.eventsOnArrival = pixels.frameRecord(FrameRecords.events)
            statistics.received(at: DispatchTime.now().uptimeNanoseconds)
            let pts = sl_buffer_pts(buffer), duration = sl_buffer_duration(buffer)
            let frame = Frame(format: format, pts: pts == GstClockTime.max ? nil : UInt64(pts),
                              duration: duration == GstClockTime.max ? nil : UInt64(duration),
                              index: statistics.framesIn - 1, pixels: pixels,
                              ageOnArrival: live ? age(of: pixels.sample, pts: pts) : nil)
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
                outcome = stage.process(frame)
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
                if !deliver(outcome, pixels: frame.pixels, pts: frame.pts) { return }
            }
            if !held.isEmpty, !deliverFinished(wait: false) { return }
        }
    }

    /// Frames the stage answered `.pending` for, and frames that came after them, oldest first.
    /// They leave in this order (FrameDelivery: the same rule as the in-memory StageDriver's).
    private var held = FrameDelivery<(pixels: SamplePixels, pts: GstClockTime)>()

    /// Delivers held frames from the oldest while their outcomes are known; `wait`: until none
    /// is left (end of stream). False when the worker must stop.
    private func deliverFinished(wait: Bool) -> Bool {
        held.deliverReady(from: stage, wait: wait, afterAsking: {
            postNotices()
            if stage.latencyNanoseconds != reportedLatency { updateLatency(post: true) }
        }) { frame, outcome in deliver(outcome, pixels: frame.pixels, pts: frame.pts) }
    }

    /// Pushes a frame on or counts it dropped. False when the worker must stop (flushing).
    private func deliver(_ outcome: FrameOutcome, pixels: SamplePixels, pts: GstClockTime) -> Bool {
        switch outcome {
        case .forward:
            postEvents(of: pixels)
            guard let appsrc else { // a sink stage: the stage took the frame
                statistics.forwarded(age: live ? age(of: pixels.sample, pts: pts) : nil)
                return true
            }
            if downstreamDone { return true }
            let flow: GstFlowReturn
            if watchdog != nil {
                flow = pushRestamped(pixels.sample, into: appsrc)
            } else {
                // push_sample does not take the sample; it sets the caps on appsrc when they
                // change and carries the segment, so timestamps stay as they came in.
                sl_handoff_release(gst_sample_get_buffer(pixels.sample))
                flow = gst_app_src_push_sample(appsrc, pixels.sample)
            }
            sl_stage_flush_tags(element)
            // A watchdog's frames leave stamped "now": their age there says nothing.
            statistics.forwarded(age: live && watchdog == nil ? age(of: pixels.sample, pts: pts) : nil)
            if flow == GST_FLOW_FLUSHING { return false } // stopping
            if flow != GST_FLOW_OK {
                sl_stage_set_downstream_flow(element, flow)
                downstreamDone = true
            }
        case .failed(let reason):
            statistics.addDropped(1)
            droppedForErrors(reason)
        case .drop, .pending:
            statistics.addDropped(1)
        }
        return true
    }

    /// Frames a stage dropped (an error on that frame, a frame shorter than its caps), by kind of
    /// reason (the text with its numbers blanked): the first of each kind is said at once, the
    /// count in the summary; a lossless run that lost frames so fails (the host reads
    /// `framesDroppedForErrors` at end of stream).
    private var dropKinds: Set<String> = []
    private let droppedCount = Atomic<Int>(0)
    private let liveForHost = Atomic<Bool>(false)
    private let firstDropReason = Mutex<String?>(nil)
    var framesDroppedForErrors: (count: Int, first: String?, lossless: Bool) {
        (droppedCount.load(ordering: .relaxed), firstDropReason.withLock { $0 }, !liveForHost.load(ordering: .relaxed))
    }

    private func droppedForErrors(_ reason: String) {
        droppedCount.add(1, ordering: .relaxed)
        firstDropReason.withLock { if $0 == nil { $0 = reason } }
        let kind = String(reason.map { $0.isNumber ? "#" : $0 })
        if dropKinds.insert(kind).inserted {
            sl_stage_post_warning(element, "dropped a frame: \(reason)" + (dropKinds.count == 1 ? " (each further reason is said once; the summary counts them)" : ""))
        }
    }

    /// End of stream: the summary, then end-of-stream downstream (once).
    func finishStream() {
        endBacklog()
        guard !streamFinished else { return }
        streamFinished = true
        stage.streamEnded()
        // What the stage's writers found while it ended (a write that failed on their thread).
        postNotices()
        publishMetrics(force: true)
        postStatistics()
        if let appsrc { _ = gst_app_src_end_of_stream(appsrc) }
    }
    private(set) var streamFinished = false
    /// The stage's end was asked for and its input closed (sl_stage_close_input).
    private var inputClosed = false
    /// The caps a watchdog last set on appsrc (StageWorker+Watchdog).
    var pushedCaps: UnsafeMutablePointer<GstCaps>?

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
        guard let newFormat = VideoFormat(caps: caps) else {
            sl_stage_post_error(element, "not raw video: \(capsString(caps))", nil)
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
        defer {
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
    private func age(of sample: OpaquePointer, pts: GstClockTime) -> UInt64? {
        guard pts != GstClockTime.max, let segment = gst_sample_get_segment(sample) else { return nil }
        let frameTime = gst_segment_to_running_time(segment, GST_FORMAT_TIME, pts)
        let now = sl_element_running_time_now(element)
        guard frameTime != GstClockTime.max, now != GstClockTime.max else { return nil }
        return now > frameTime ? UInt64(now - frameTime) : 0
    }

    /// The stage's readings (read-only properties) whose values changed, set on the element.
    private func publishReadings() {
        let readings = stage.readings
        guard !readings.isEmpty, readings != publishedReadings else { return }
        for (name, value) in readings where publishedReadings[name] != value {
            guard let index = descriptor.properties.firstIndex(where: { $0.name == name && $0.readOnly }) else { continue }
            sl_stage_publish_string(element, guint(index), value)
        }
        publishedReadings = readings
    }
    private var publishedReadings: [String: String] = [:]

    /// The events the stage added to the frame, each as an element message `streamlens-event`
    /// from the stage (docs/metadata.md): applications watch the bus instead of parsing files.
    private func postEvents(of pixels: SamplePixels) {
        publishReadings()
        let now = pixels.frameRecord(FrameRecords.events)
        guard now != pixels.eventsOnArrival, let events = FrameRecords.decode([FrameEvent].self, now) else { return }
        let before = FrameRecords.decode([FrameEvent].self, pixels.eventsOnArrival)?.count ?? 0
        for event in events.dropFirst(before) {
            eventCounts[[event.type, event.zone, event.direction ?? ""], default: 0] += 1
            sl_stage_post_event(element, event.type, event.zone, event.label, gint(clamping: event.objectId), event.direction,
                                event.time ?? -1, event.dwell ?? -1, FrameRecords.encode(event))
        }
    }

    /// Events this stage added, by type, for Prometheus.
    private var eventCounts: [[String]: Int] = [:]

    /// The registry's key for this worker's metrics.
    private let metricsSource = MetricsRegistry.shared.newSource()
    /// The source this stage's pipeline runs for (`streamlens serve`), read when the stage
    /// starts: its metrics' `source` label. Nil in `streamlens run` and in other hosts.
    private var metricsSourceName: String?
    private var lastMetrics: UInt64 = 0
    private var queueDrops = 0
    /// Stages of the process with a set-up backlog left (see `run`).
    static let setupBacklogs = Atomic<Int>(0)
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
    /// Frames the inner appsink holds at most now (sl_stage_configure_queue).
    private var queueCapacity = 4
    /// (time, frames received) at recent publishes: the frame rate over the last few seconds.
    private var rateWindow: [(time: UInt64, frames: Int)] = []
    static let metricsInterval: UInt64 = 250_000_000
    static let rateSpan: UInt64 = 5_000_000_000

    /// The stage's and the host's figures into the process's metrics registry, at most every
    /// `metricsInterval` (and at end of stream), on this thread: the stage's state is read
    /// where it lives. A scrape sees the last publish.
    private func publishMetrics(force: Bool = false) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard force || now - lastMetrics >= Self.metricsInterval else { return }
        lastMetrics = now
        let arrived = Int(sl_stage_buffers_arrived(element))
        rateWindow.append((now, statistics.framesIn))
        while let first = rateWindow.first, now - first.time > Self.rateSpan { rateWindow.removeFirst() }
        var rate = 0.0
        if let first = rateWindow.first, now > first.time { rate = Double(statistics.framesIn - first.frames) / (Double(now - first.time) / 1e9) }
        let errors = droppedCount.load(ordering: .relaxed)
        // Frames that arrived but were not pulled yet are mostly still queued in the inner
        // appsink, not dropped: while running, only what exceeds its capacity (1 frame live, 4
        // lossless; SL_LOSSLESS_QUEUE) is known lost. At the end all of it is. A counter never
        // goes down.
        let unpulled = max(0, arrived - statistics.framesIn)
        queueDrops = max(queueDrops, force ? unpulled : unpulled - queueCapacity)
        // Labelled by stage, and in `streamlens serve` by source first: every source's pipeline
        // has the same stage names (the template's), and the page must tell them apart.
        let s: [(name: String, value: String)] = (metricsSourceName.map { [("source", $0)] } ?? []) + [("stage", name)]
        var m: [Metric] = [
            .counter("streamlens_stage_frames_received_total", "Frames that reached the stage's element", labels: s, statistics.framesIn + queueDrops),
            .counter("streamlens_stage_frames_sent_total", "Frames the stage passed on (a sink stage: took)", labels: s, statistics.framesOut),
            .counter("streamlens_stage_frames_dropped_total", "Frames dropped: queue (live mode, newest wins), error (could not be processed), stage (dropped on purpose)",
                     labels: s + [("reason", "queue")], queueDrops),
            .counter("streamlens_stage_frames_dropped_total", "", labels: s + [("reason", "error")], errors),
            .counter("streamlens_stage_frames_dropped_total", "", labels: s + [("reason", "stage")], max(0, statistics.dropped - errors)),
            .gauge("streamlens_stage_frames_per_second", "Frames received per second over the last 5 s", labels: s, rate),
            .gauge("streamlens_stage_live", "1 when the stage runs in live mode (newest frame wins), 0 in lossless mode", labels: s, live ? 1 : 0),
            .histogram("streamlens_stage_frame_age_seconds", "Pipeline running time when a frame leaves the stage minus the frame's own (live pipelines)",
                       labels: s, statistics.ageHistogram),
        ]
        if let watchdog {
            m.append(.counter("streamlens_source_restarts_total", "Restarts of the source by this watchdog", labels: s, watchdog.restarts))
        }
        for (key, count) in eventCounts.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            m.append(.counter("streamlens_events_total", "Events the stage added to frames, by type, zone and direction (lenszone: crossed in/out, entered, left)",
                              labels: s + [("type", key[0]), ("zone", key[1]), ("direction", key[2])], count))
        }
        for var metric in stage.metrics {
            metric.labels = s + metric.labels.filter { $0.name != "stage" && $0.name != "source" }
            m.append(metric)
        }
        MetricsRegistry.shared.publish(m, source: metricsSource)
    }

    private func postNotices() {
        for notice in stage.takeNotices() {
            switch notice.level {
            case .info: sl_stage_post_info(element, "notice", "\(name): \(notice.text)")
            case .warning: sl_stage_post_warning(element, notice.text)
            }
            for (property, value) in notice.restore {
                let text: String
                if case .string(let s) = value { text = s } else { text = value.description }
                _ = sl_object_set_checked(element, property, text)
            }
        }
    }

    private func postStatistics(kind: String = "stats") {
        let arrived = Int(sl_stage_buffers_arrived(element))
        var stats = statistics
        stats.addDropped(max(0, arrived - statistics.framesIn)) // dropped by appsink in live mode
        let own = stage.summary.map { ", \($0)" } ?? ""
        let errors = droppedCount.load(ordering: .relaxed)
        let lost = errors > 0 ? ", \(errors) of them for errors" : ""
        sl_stage_post_info(element, kind, "\(name): \(stats.summary)\(lost)\(own) (\(live ? "live" : "lossless"))")
    }

    /// The same figures while running, every `reportInterval` (printed with -v).
    private var lastReport = DispatchTime.now().uptimeNanoseconds
    static let reportInterval: UInt64 = 5_000_000_000
    private func reportPeriodically() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastReport >= Self.reportInterval else { return }
        lastReport = now
        postStatistics(kind: "interval")
    }
}

/// Owns the sample being processed and maps its buffer on demand. Read access maps the
/// buffer as it is. Write access first moves the buffer into a fresh sample and drops the
/// pulled one, so that when nothing else holds the buffer, making it writable costs no copy
/// (the pulled sample's reference alone would force one).
///
/// Used only on the worker thread, for one frame.
final class SamplePixels: FramePixels {
    /// The sample to push on: the pulled one, or the fresh one after write access.
    private(set) var sample: OpaquePointer

    init(taking sample: OpaquePointer) { self.sample = sample }
    deinit { gst_sample_unref(sample) }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let buffer = gst_sample_get_buffer(sample)!
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        defer { gst_buffer_unmap(buffer, &map) }
        return try body(UnsafeRawBufferPointer(start: map.data, count: Int(map.size)))
    }

    func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        makeBufferWritable()
        let buffer = gst_sample_get_buffer(sample)!
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GstMapFlags(GST_MAP_READ.rawValue | GST_MAP_WRITE.rawValue)) != 0 else {
            return try body(UnsafeMutableRawBufferPointer(start: nil, count: 0))
        }
        defer { gst_buffer_unmap(buffer, &map) }
        return try body(UnsafeMutableRawBufferPointer(start: map.data, count: Int(map.size)))
    }

    /// The negotiated frame size: regions are normalised to it on the meta (DL Streamer's layout).
    var frameSize = (width: 0, height: 0)

    /// Where every region enters and leaves the buffer: bounded to the frame here
    /// (`FrameBounds`), whichever stage, model or upstream element made it.
    private var bounds: FrameBounds { FrameBounds(width: frameSize.width, height: frameSize.height) }

    func addRegionOfInterest(_ region: RegionOfInterest) {
        let region = bounds.clamp(region)
        makeBufferWritable()
        Self.withCRegion(region) { r, keypoints, names, values, results in
            sl_buffer_add_region(gst_sample_get_buffer(sample), guint(frameSize.width), guint(frameSize.height), r, keypoints, names, values, results)
        }
    }

    func updateRegionOfInterest(_ region: RegionOfInterest, at index: Int) -> Bool {
        guard index >= 0 else { return false }
        let region = bounds.clamp(region)
        makeBufferWritable()
        return Self.withCRegion(region) { r, keypoints, names, values, results in
            sl_buffer_set_region(gst_sample_get_buffer(sample), guint(index), guint(frameSize.width), guint(frameSize.height),
                                 r, keypoints, names, values, results) != 0
        }
    }

    /// The region as the C fence takes it: the struct, its keypoints as x, y pairs, its
    /// attributes as two arrays of C strings (sorted by name, so the meta is the same every run),
    /// and what second models found (classifications, landmarks).
    private static func withCRegion<R>(_ region: RegionOfInterest,
                                       _ body: (UnsafePointer<SLRegion>, UnsafePointer<Double>?, UnsafePointer<UnsafePointer<CChar>?>?,
                                                UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<SLRegionResults>?) -> R) -> R {
        withCResults(region) { results in withCRegionOnly(region) { body($0, $1, $2, $3, results) } }
    }

    private static func withCResults<R>(_ region: RegionOfInterest, _ body: (UnsafePointer<SLRegionResults>?) -> R) -> R {
        guard !region.classifications.isEmpty || region.landmarks != nil else { return body(nil) }
        let c = region.classifications
        let names = c.map { strdup(RegionOfInterest.attributeName($0.name)) }, labels = c.map { strdup($0.label) }
        let landmarkName = strdup(region.landmarks?.name ?? "landmarks")
        defer { (names + labels + [landmarkName]).forEach { free($0) } }
        let ids = c.map { gint(clamping: $0.labelId) }, confidences = c.map(\.confidence)
        let dims = region.landmarks?.points.first?.count ?? 0
        let points = (region.landmarks?.points ?? []).filter { $0.count == dims }
        let flat = points.flatMap { $0 }
        let cNames = names.map { UnsafePointer($0) }, cLabels = labels.map { UnsafePointer($0) }
        return cNames.withUnsafeBufferPointer { n in cLabels.withUnsafeBufferPointer { l in ids.withUnsafeBufferPointer { i in
            confidences.withUnsafeBufferPointer { cf in flat.withUnsafeBufferPointer { p in
                var results = SLRegionResults(classification_count: guint(c.count), classification_names: n.baseAddress,
                                              classification_labels: l.baseAddress, classification_ids: i.baseAddress,
                                              classification_confidences: cf.baseAddress, landmark_count: guint(points.count),
                                              landmark_dims: guint(dims), landmarks: p.baseAddress, landmark_name: UnsafePointer(landmarkName),
                                              landmark_presence: region.landmarks?.presence ?? -1)
                return withUnsafePointer(to: &results) { body($0) }
            } }
        } } }
    }

    private static func withCRegionOnly<R>(_ region: RegionOfInterest,
                                           _ body: (UnsafePointer<SLRegion>, UnsafePointer<Double>?, UnsafePointer<UnsafePointer<CChar>?>?,
                                                    UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        var r = SLRegion()
        withUnsafeMutableBytes(of: &r.label) { raw in
            let bytes = Array(region.label.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        r.x = region.x; r.y = region.y; r.width = region.width; r.height = region.height
        r.confidence = region.confidence ?? -1
        r.label_id = gint(clamping: region.labelId)
        r.object_id = gint(clamping: region.objectId)
        withUnsafeMutableBytes(of: &r.estimate) { raw in
            let bytes = Array((region.estimate?.rawValue ?? "").utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        r.keypoint_count = guint(region.keypoints.count)
        let attributes = region.attributes.sorted { $0.key < $1.key }
        r.attribute_count = guint(attributes.count)
        let keypoints = region.keypoints.flatMap { [$0.x, $0.y] }
        let names = attributes.map { strdup(RegionOfInterest.attributeName($0.key)) }
        let values = attributes.map { strdup($0.value) }
        defer { (names + values).forEach { free($0) } }
        let cNames = names.map { UnsafePointer($0) }, cValues = values.map { UnsafePointer($0) }
        return keypoints.withUnsafeBufferPointer { kp in
            cNames.withUnsafeBufferPointer { n in
                cValues.withUnsafeBufferPointer { v in
                    withUnsafePointer(to: &r) { body($0, kp.baseAddress, n.baseAddress, v.baseAddress) }
                }
            }
        }
    }

    func withSample<R>(_ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawPointer(sample))
    }

    /// Every region on the buffer (no cap), with its keypoints and attributes.
    func regionsOfInterest() -> [RegionOfInterest] {
        let buffer = gst_sample_get_buffer(sample)
        let (w, h) = (guint(frameSize.width), guint(frameSize.height))
        let count = Int(sl_buffer_get_regions(buffer, w, h, nil, 0))
        guard count > 0 else { return [] }
        var regions = [SLRegion](repeating: SLRegion(), count: count)
        let n = min(count, Int(sl_buffer_get_regions(buffer, w, h, &regions, guint(count))))
        let bounds = self.bounds
        return (0..<n).map { i in
            var r = regions[i]
            let label = withUnsafeBytes(of: &r.label) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            var keypoints: [Point] = []
            if r.keypoint_count > 0 {
                var xy = [Double](repeating: 0, count: Int(r.keypoint_count) * 2)
                let got = Int(sl_region_keypoints(&r, w, h, &xy, r.keypoint_count))
                keypoints = (0..<got).map { Point(x: xy[2 * $0], y: xy[2 * $0 + 1]) }
            }
            var attributes: [String: String] = [:]
            for a in 0..<r.attribute_count {
                var name: UnsafePointer<CChar>?, value: UnsafePointer<CChar>?
                if sl_region_attribute(&r, a, &name, &value) != 0, let name, let value {
                    attributes[String(cString: name)] = String(cString: value)
                }
            }
            let estimate = withUnsafeBytes(of: &r.estimate) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            var region = RegionOfInterest(label: label, labelId: Int(r.label_id), x: r.x, y: r.y, width: r.width, height: r.height,
                                          confidence: r.confidence >= 0 ? r.confidence : nil, objectId: Int(r.object_id),
                                          keypoints: keypoints, attributes: attributes, estimate: RegionOfInterest.Estimate(rawValue: estimate))
            for n in 0..<r.classification_count {
                var name: UnsafePointer<CChar>?, label: UnsafePointer<CChar>?, id: gint = -1, confidence = 0.0
                if sl_region_classification(&r, n, &name, &label, &id, &confidence) != 0, let name, let label {
                    region.classifications.append(.init(name: String(cString: name), label: String(cString: label), labelId: Int(id), confidence: confidence))
                }
            }
            if r.landmark_count > 0 {
                let d = Int(r.landmark_dims)
                var values = [Double](repeating: 0, count: Int(r.landmark_count) * d)
                var name: UnsafePointer<CChar>?
                let got = Int(sl_region_landmarks(&r, w, h, &values, r.landmark_count, &name))
                region.landmarks = .init(name: name.map { String(cString: $0) } ?? "landmarks",
                                         points: (0..<got).map { Array(values[($0 * d)..<($0 * d + d)]) },
                                         presence: r.landmark_presence >= 0 ? r.landmark_presence : nil)
            }
            return bounds.clamp(region)
        }
    }

    func frameRecord(_ kind: String) -> String? {
        sl_buffer_frame_field(gst_sample_get_buffer(sample), kind).map { String(cString: $0) }
    }

    func setFrameRecord(_ kind: String, json: String) {
        makeBufferWritable()
        sl_buffer_set_frame_field(gst_sample_get_buffer(sample), kind, json)
    }

    /// The frame's events when it reached the stage (`StageWorker.postEvents` posts the ones the
    /// stage added).
    var eventsOnArrival: String?

    private var writable = false
    private func makeBufferWritable() {
        guard !writable else { return }
        writable = true
        let buffer = gst_buffer_ref(gst_sample_get_buffer(sample))
        let fresh = gst_sample_new(nil, gst_sample_get_caps(sample), gst_sample_get_segment(sample), nil)!
        gst_sample_unref(sample)
        sample = fresh
        let own = sl_buffer_make_writable(buffer) // copies only if someone else still holds it
        gst_sample_set_buffer(fresh, own)
        gst_buffer_unref(own)
    }
}
