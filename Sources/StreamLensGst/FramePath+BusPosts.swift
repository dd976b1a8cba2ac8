import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Bus posts: what the stage has to say (notices, events, readings, its figures) as messages
/// on the pipeline's bus, from the worker thread.
extension FramePath {
    func postNotices() {
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

    func postStatistics(kind: String = "stats") {
        let arrived = Int(sl_stage_buffers_arrived(element))
        var stats = statistics
        stats.addDropped(max(0, arrived - statistics.framesIn)) // dropped by the input queue in live mode
        let own = stage.summary.map { ", \($0)" } ?? ""
        let errors = inbox.droppedForErrors.load(ordering: .relaxed)
        let lost = errors > 0 ? ", \(errors) of them for errors" : ""
        sl_stage_post_info(element, kind, "\(name): \(stats.summary)\(lost)\(own) (\(placement == .inLine ? "lossless, in-line" : live ? "live" : "lossless"))")
    }

    /// The same figures while running, every `reportInterval` (printed with -v).
    static let reportInterval: UInt64 = 5_000_000_000
    func reportPeriodically() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastReport >= Self.reportInterval else { return }
        lastReport = now
        postStatistics(kind: "interval")
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

    /// The events the stage added to the frame, each as an element message `streamlens-event`
    /// from the stage (docs/metadata.md): applications watch the bus instead of parsing files.
    func postEvents(of pixels: SamplePixels) {
        postStageEvents()
        let now = pixels.frameRecord(FrameRecords.events)
        guard now != pixels.eventsOnArrival, let events = FrameRecords.decode([FrameEvent].self, now) else { return }
        let before = FrameRecords.decode([FrameEvent].self, pixels.eventsOnArrival)?.count ?? 0
        for event in events.dropFirst(before) {
            eventCounts[[event.type, event.zone, event.direction ?? ""], default: 0] += 1
            sl_stage_post_event(element, event.type, event.zone, event.label, gint(clamping: event.objectId), event.direction,
                                event.time ?? -1, event.dwell ?? -1, FrameRecords.encode(event))
        }
    }

    /// The stage's own events (`Stage.takeEvents`) and readings: after every frame, and at the
    /// end of the stream (lensrecord's last clip is finished after the last frame).
    func postStageEvents() {
        publishReadings()
        for event in stage.takeEvents() {
            sl_stage_post_event(element, event.type, event.zone, event.label, gint(clamping: event.objectId), event.direction,
                                event.time ?? -1, event.dwell ?? -1, FrameRecords.encode(event))
        }
    }
}
