import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// A run's preview windows (see PreviewWindow.swift): keys pressed in them, and a window closed.
extension Pipeline {
    /// The keys of the run's windows, carried out through its control channel (a quiet one of
    /// their own when the run has none); their lines are logged unless the run is quiet.
    func previewKeys(control: ControlChannel?, options: Options) -> PreviewKeys {
        PreviewKeys(pipeline: pipeline, control: control ?? ControlChannel(pipeline: pipeline, echo: false), log: { [quiet = options.quiet, log] line in
            if !quiet { log(line) }
        })
    }

    /// A key pressed in a window, handed to the keys; FALSE for any other message.
    func pressKey(_ message: UnsafeMutablePointer<GstMessage>, _ run: RunState) -> Bool {
        guard let key = takeString(sl_navigation_key_press(message)) else { return false }
        run.progress.clear()
        run.keys.press(key, stages: stages)
        return true
    }

    /// The user closed the window: the end of the run, not a failure. End the stream
    /// (files written beside the window are finalized) and take the errors that follow
    /// (the source's "Internal data stream error") as part of it. TRUE for such an error.
    func windowClosing(_ message: UnsafeMutablePointer<GstMessage>, _ run: inout RunState) -> Bool {
        if run.firstError == nil, run.windowClosed == nil, sl_error_is_window_closed(message) != 0 {
            run.progress.clear()
            if !run.options.quiet { log("\(sourceName(message)): window closed: ending the run") }
            run.windowClosed = Date()
            sl_pipeline_set_ending(pipeline, 1)
            endStream()
            return true
        }
        if run.windowClosed != nil {
            if run.options.verbose { log("after the window closed: \(errorText(message))") }
            return true
        }
        return false
    }
}
