import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// Progress of a finite input on stderr: position/duration, frames, fps, ETA. On a terminal the
/// line is redrawn in place a few times a second; otherwise one line every `interval` seconds.
final class Progress {
    let interval: Double
    let terminal = isatty(STDERR_FILENO) != 0
    private var lastPrint = Date()
    private let started = Date()
    private var drawn = false

    init(interval: Double) { self.interval = interval }

    func update(pipeline: UnsafeMutablePointer<GstElement>, stage: UnsafeMutablePointer<GstElement>?, log: (String) -> Void) {
        let now = Date()
        guard now.timeIntervalSince(lastPrint) >= (terminal ? 0.25 : interval) else { return }
        var position: gint64 = -1, duration: gint64 = -1
        guard gst_element_query_duration(pipeline, GST_FORMAT_TIME, &duration) != 0, duration > 0,
              gst_element_query_position(pipeline, GST_FORMAT_TIME, &position) != 0, position >= 0
        else { return } // live or unknown length: no progress line
        lastPrint = now
        let elapsed = now.timeIntervalSince(started)
        let pos = Double(position) / 1e9, dur = Double(duration) / 1e9
        var line = "\(Self.clock(pos)) / \(Self.clock(dur)) (\(Int(100 * pos / dur))%)"
        if let stage {
            let frames = Int(sl_stage_buffers_arrived(stage))
            line += "  \(frames) frames  \(String(format: "%.1f", Double(frames) / max(elapsed, 0.001))) fps"
        }
        if pos > 0 { line += "  ETA \(Self.clock(max(0, (dur - pos) * elapsed / pos)))" }
        if terminal {
            writeStderr("\r\u{1B}[K" + line)
            drawn = true
        } else {
            log(line)
        }
    }

    /// Clears the in-place line before another message is printed.
    func clear() {
        guard drawn else { return }
        writeStderr("\r\u{1B}[K")
        drawn = false
    }

    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds)
        return String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
    }
}

func writeStderr(_ text: String) { writeStandardError(text) }
