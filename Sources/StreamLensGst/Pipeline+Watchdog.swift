import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// A run's watchdog stages (lenswatchdog): their source parts are theirs to start and restart.
extension Pipeline {
    /// The source part of each watchdog stage is started by the watchdog itself, once the rest
    /// plays (a camera that is not there yet is then an outage, not a failed start): locked here
    /// out of the pipeline's state changes. Returns the watchdog stages (unlock them after the run).
    func lockWatchdogSources() -> [UnsafeMutablePointer<GstElement>] {
        let watchdogs = stages.filter { StageElements.descriptor(of: $0)?.restartsUpstream == true }
        for stage in watchdogs { sl_stage_lock_upstream(stage, 1) }
        return watchdogs
    }

    /// The watchdog stage whose source part `source` belongs to, if any.
    func watchdogStage(upstreamOf source: UnsafeMutablePointer<GstObject>?) -> UnsafeMutablePointer<GstElement>? {
        stages.first { stage in
            StageElements.worker(of: stage)?.isWatchdog == true && sl_stage_is_upstream(stage, source) != 0
        }
    }

    /// An error in the source part of a watchdog stage is an outage, not the end: its watchdog
    /// is told (and the error shown as a warning). TRUE for such an error.
    func sourceOutage(_ message: UnsafeMutablePointer<GstMessage>, text: String, progress: Progress) -> Bool {
        guard let watchdog = watchdogStage(upstreamOf: message.pointee.src), let worker = StageElements.worker(of: watchdog) else { return false }
        // A bin's "state change failed" follows its element's real error: say only that one.
        if !text.contains("failed to post a proper error message") {
            progress.clear()
            log("warning: \(text.split(separator: "\n").first ?? "")")
            worker.sourceFailed(String(text.split(separator: "\n").first ?? ""))
        }
        return true
    }
}
