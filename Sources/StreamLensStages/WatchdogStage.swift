import StreamLensCore

/// `lenswatchdog`: keeps a live pipeline up when its source fails. Everything upstream of the
/// stage is the source part (a camera, an RTSP client, a file played as a live source); when it
/// posts an error, ends, or delivers no frame for `timeout` seconds, the host restarts it with
/// back-off while everything downstream (detection, an RTSP server and its clients) keeps
/// running and sees the stream resume. `retries` failed restarts in a row end the run.
///
///     streamlens run 'rtspsrc location=rtsp://camera/stream ! rtph264depay ! avdec_h264 ! videoconvert ! lenswatchdog timeout=5 ! lensdetect ! lensrtsp mount=/faces'
///
/// Frames pass through untouched; they leave stamped with the pipeline's running time, so the
/// timeline continues across restarts (a file played again starts at 0 otherwise).
public final class WatchdogStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lenswatchdog",
        summary: "Restart the source part of a live pipeline when it fails, ends or stalls (with back-off)",
        example: "videotestsrc num-buffers=30 ! lenswatchdog restart-on-eos=false ! fakesink",
        restartsUpstream: true,
        properties: [
            PropertySpec("timeout", .double(0.5...3600), default: .double(5),
                         help: "seconds without a frame after which the source counts as stalled"),
            PropertySpec("retries", .int(0...1_000_000), default: .int(10),
                         help: "failed restarts in a row before the run ends with an error (0: never give up)"),
            PropertySpec("backoff", .double(0...600), default: .double(1),
                         help: "seconds before the first restart; doubled after each failed one, up to max-backoff"),
            PropertySpec("max-backoff", .double(0...3600), default: .double(30),
                         help: "longest wait between two restarts, seconds (how soon a source that is back is noticed)"),
            PropertySpec("restart-on-eos", .bool, default: .bool(true),
                         help: "an end of stream from the source is an outage (a file then plays in a loop); false: end the run"),
        ])

    public init(settings: StageSettings) throws {}
    public func process(_ frame: Frame) -> FrameOutcome { .forward }
}
