import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

extension Pipeline {
    /// A pipeline that would not start, or not say why, refused before it tries (the reason
    /// logged); nil when nothing is seen.
    func refusalBeforeStart() -> Outcome? {
        // An MP4 cut off before its index is refused before it plays. qtdemux would say so too,
        // but decodebin may drop the errors of an element it is still setting up, and then the
        // run waits for the start timeout instead of failing at once.
        for element in allElements() where sl_element_factory_name(element).map({ String(cString: $0) }) == "filesrc" {
            guard let file = takeString(sl_object_get_as_string(element, "location")), Self.isMP4WithoutIndex(file) else { continue }
            let message = "\(objectName(element)): " + Self.noIndexMessage(file)
            log("error: \(message)")
            return .failed(message)
        }

        // A window sink without a display fails at its first state change with a message that
        // does not say what to do (and autovideosink may crash trying DirectFB): say it first.
        for element in allElements() {
            guard let factory = sl_element_factory_name(element).map({ String(cString: $0) }),
                  let problem = DisplayCheck.problem(factory: factory) else { continue }
            let message = "\(objectName(element)): \(problem)"
            log("error: \(message)")
            return .failed(message)
        }
        return nil
    }

    /// Sets the pipeline to PLAYING; a failed state change is the run's failure (its first error
    /// logged, the pipeline stopped), else nil. The change itself (where elements open their
    /// inputs) has the start timeout too, and an interrupt or `requestEnd` ends the wait at once:
    /// an element stuck opening its input (a FIFO nobody writes, an unresponsive mount) leaves
    /// the pipeline behind (Pipeline+StateChange), and the run fails (aborted when interrupted:
    /// nothing was written, nothing is to finalize).
    func startPlaying(_ bus: UnsafeMutablePointer<GstBus>, _ options: Options, started: Date) -> Outcome? {
        let end = changeState(to: GST_STATE_PLAYING,
                              cancelled: { Self.interruptsSeen > 0 || endRequested.load(ordering: .relaxed) },
                              overdue: { startDeadlinePassed(since: started, timeout: options.startTimeout) })
        switch end {
        case .returned(let result):
            guard result == GST_STATE_CHANGE_FAILURE else { return nil }
            let message = drainError(bus) ?? "the pipeline could not start (state change failed)"
            stop()
            return .failed(message)
        case .overdue:
            let message = "the pipeline did not reach PLAYING within \(Int(options.startTimeout)) s: \(leftBehind ?? "?") still opening its input (a FIFO nobody writes? an unresponsive network mount?); it is left behind"
            log("error: \(message)")
            return .failed(message)
        case .cancelled:
            log((Self.interruptsSeen > 0 ? "interrupt" : "ending") + ": the pipeline had not started (\(leftBehind ?? "?") still opening its input); nothing to finalize")
            return .aborted
        }
    }

    /// Whether the start timeout has passed since `started`. A stage setting up on its first
    /// format (a model compiling) is busy, not stuck: that time is not counted (the last set-up's
    /// end restarts the count; any stage of this pipeline).
    func startDeadlinePassed(since started: Date, timeout: Double) -> Bool {
        let shared = PipelineShared.of(pipeline)
        guard shared.formatSetups.load(ordering: .relaxed) == 0 else { return false }
        let sinceSetup = Double(DispatchTime.now().uptimeNanoseconds &- shared.lastFormatSetupEnd.load(ordering: .relaxed)) / 1e9
        return min(Date().timeIntervalSince(started), sinceSetup) > timeout
    }

    /// PLAYING not reached within the start timeout: the run fails, saying where it is stuck.
    /// With a watchdog, a source that does not come is its business (retries, then an error).
    func startOverdue(_ run: RunState) -> Outcome? {
        guard !run.playing, run.watchdogs.isEmpty, startDeadlinePassed(since: run.started, timeout: run.options.startTimeout) else { return nil }
        var state = GST_STATE_NULL, pending = GST_STATE_NULL
        gst_element_get_state(pipeline, &state, &pending, 0)
        let name = gst_element_state_get_name(state).map { String(cString: $0) } ?? "?"
        var message = "the pipeline did not reach PLAYING within \(Int(run.options.startTimeout)) s (stuck in \(name))"
        let waiting = allElements().filter { sl_is_stage($0) == 0 && sl_element_has_unlinked_sink_pad($0) != 0 }.map { objectName($0) }
        // A decodebin that never showed a stream failed on the input (an error it took
        // while setting up an element can be lost); otherwise a named pad never came.
        let silent = allElements().filter { e in
            let factory = sl_element_factory_name(e).map { String(cString: $0) } ?? ""
            return factory.hasSuffix("decodebin") && e.pointee.numsrcpads == 0
        }.map { objectName($0) }
        if let decodebin = silent.first {
            message += "; \(decodebin) found no stream in the input: is it a damaged or unfinished file?"
        } else if !waiting.isEmpty {
            message += "; nothing ever linked to \(waiting.joined(separator: ", ")): a demuxer pad named in the spec (e.g. demux.audio_0) never appeared — does the input have that stream?"
        }
        log("error: \(message)")
        return .failed(message)
    }

    static func noIndexMessage(_ file: String) -> String {
        "\(file) has no index (no moov box): the MP4 was cut short before it was finalized (a recording stopped without end-of-stream), so none of it can be played"
    }

    /// An ISO-BMFF file (an `ftyp` box first) whose top-level boxes hold no `moov`: the index a
    /// muxer writes at the end, missing when a recording was cut off. Regular files only: opening
    /// a FIFO would wait for its writer.
    static func isMP4WithoutIndex(_ path: String) -> Bool {
        guard InputFile.notAFile(path) == nil, let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        var offset: UInt64 = 0
        var boxes: [String] = []
        while offset + 8 <= size, boxes.count < 1000 {
            try? handle.seek(toOffset: offset)
            guard let header = try? handle.read(upToCount: 16), header.count >= 8 else { break }
            var length = header.prefix(4).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            boxes.append(String(decoding: header[4..<8], as: UTF8.self))
            if length == 1, header.count >= 16 { length = header[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            if length == 0 { break } // to the end of the file
            guard length >= 8 else { break }
            offset += length
        }
        return boxes.first == "ftyp" && !boxes.contains("moov")
    }
}
