import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Metrics: the stage's and the host's figures for Prometheus, and as values (`StageFigures`) for
/// `streamlens serve`.
extension FramePath {
    static let metricsInterval: UInt64 = 250_000_000
    static let rateSpan: UInt64 = 5_000_000_000

    /// The stage's and the host's figures into the process's metrics registry, at most every
    /// `metricsInterval` (and at end of stream), on this thread: the stage's state is read
    /// where it lives. A scrape sees the last publish.
    func publishMetrics(force: Bool = false) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard force || now - lastMetrics >= Self.metricsInterval else { return }
        lastMetrics = now
        let arrived = Int(sl_stage_buffers_arrived(element))
        rateWindow.append((now, statistics.framesIn))
        while let first = rateWindow.first, now - first.time > Self.rateSpan { rateWindow.removeFirst() }
        var rate = 0.0
        if let first = rateWindow.first, now > first.time { rate = Double(statistics.framesIn - first.frames) / (Double(now - first.time) / 1e9) }
        let errors = inbox.droppedForErrors.load(ordering: .relaxed)
        // Frames that arrived but were not pulled yet are mostly still queued in the stage's
        // input, not dropped: while running, only what exceeds its capacity (1 frame live, 4
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
            .counter("streamlens_stage_frame_copies_total", "Frames whose pixels the stage copied before writing into them (another element held them: a tee's other branch)",
                     labels: s, statistics.copies),
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
        StageFigures.publish(StageFigures(source: metricsSourceName, stage: name, framesReceived: statistics.framesIn + queueDrops,
                                          framesPerSecond: rate, framesDropped: queueDrops + errors + max(0, statistics.dropped - errors),
                                          restarts: watchdog?.restarts ?? 0,
                                          latencyMs: statistics.ageQuantile(0.5).map { (Double($0) / 1e5).rounded() / 10 }),
                             key: metricsSource)
    }
}
