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
public final class WatchdogStage: Stage, SourceRestarting {
    public static let descriptor = StageDescriptor(
        name: "lenswatchdog",
        summary: "Restart the source part of a live pipeline when it fails, ends or stalls (with back-off)",
        example: "videotestsrc num-buffers=30 ! lenswatchdog restart-on-eos=false ! fakesink",
        restartsUpstream: true,
        properties: RestartPolicy.table)

    public let restartPolicy: RestartPolicy

    public init(settings: RestartPolicy) throws { restartPolicy = settings }
    public func process(_ frame: Frame) -> FrameOutcome { .forward }
}
