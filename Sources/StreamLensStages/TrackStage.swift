import Foundation
import StreamLensCore

/// `lenstrack`: gives every object an id that stays with it (by default ByteTrack's association
/// on SORT's Kalman filter, `MultiObjectTracker`; `tracker=` picks another from
/// `TrackerRegistry`), written on its region (meta `object_id`, JSON Lines
/// `object_id`) for the stages after it — lenszone counts by it, lensblur holds by it,
/// lensoverlay colours by it (`color=id`).
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect draw=false interval=3 ! lenstrack ! lensoverlay color=id ! videoconvert ! autovideosink'
///
/// On a frame the detector looked at, each detection keeps its own box and gets its track's id
/// (tentative tracks: -1 until `min-hits` detections confirm them); a confirmed track the
/// detector missed is reported at its predicted place, marked `estimate: predicted`, for up to
/// `max-age` frames. On a frame it did not look at (lensdetect `interval`: its boxes come marked
/// held), each held box moves to its track's predicted place.
public final class TrackStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lenstrack",
        summary: "Track objects across frames (tracker=" + TrackerRegistry.names.joined(separator: "|") + "; bytetrack, the default: Kalman filter, two-pass IoU association): an id on every region, predicted boxes between detector runs and through short occlusions",
        example: "videotestsrc num-buffers=30 ! videoconvert ! lensdetect draw=false interval=2 ! lenstrack ! lensoverlay color=id ! fakesink",
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var tracker = TrackerRegistry.trackers[0].name
        /// The tracker's own settings (`lowMatchIoU` follows `matchIoU`: see `Tracking`).
        public var tuning = TrackerSettings()
        public var labels = ""
        public init() {}

        public static let properties: [Property<Settings>] = [
            .choice("tracker", \.tracker, TrackerRegistry.names,
                    help: "how objects are followed: " + TrackerRegistry.trackers.map { "\($0.name), \($0.help)" }.joined(separator: "; ")),
            .double("high-score", \.tuning.highScore, 0...1, live: true, help: "bytetrack only: detections scoring at least this are matched first and may start tracks"),
            .double("low-score", \.tuning.lowScore, 0...1, live: true,
                    help: "bytetrack only: weaker detections (down to this) only continue tracks found on the last frame (an object partly hidden); below it they are ignored"),
            .double("match-iou", \.tuning.matchIoU, 0.01...1, live: true,
                    help: "minimum overlap (IoU) of a track's box (bytetrack: its predicted box) and a detection to pair them"),
            .int("min-hits", \.tuning.minHits, 1...100, live: true, help: "detections before a track is confirmed and gets its id"),
            .int("max-age", \.tuning.maxAge, 0...10000, live: true,
                 help: "frames a confirmed track lives on without a detection (reported where the tracker expects it, then forgotten)"),
            .bool("per-class", \.tuning.perClass, live: true, help: "a track pairs only with detections of its own label"),
            LabelFilter.property(\.labels, "track only regions with these labels (others pass untouched)", live: true),
        ]
    }

    /// The settings as the tracker takes them, checked.
    struct Tracking {
        var kind: any ObjectTracker.Type
        var tracker: TrackerSettings
        var labels: LabelFilter

        init(_ settings: Settings) throws {
            guard let kind = TrackerRegistry.tracker(named: settings.tracker) else {
                throw StageError("property tracker=\(settings.tracker) is not one of \(TrackerRegistry.names.joined(separator: ", "))")
            }
            self.kind = kind
            var t = settings.tuning
            guard t.lowScore <= t.highScore else {
                throw StageError("property low-score=\(t.lowScore) is above high-score=\(t.highScore)")
            }
            t.lowMatchIoU = max(t.matchIoU, 0.5)
            tracker = t
            labels = LabelFilter(text: settings.labels)
        }
    }

    private var settings: Tracking
    private let tracker: any ObjectTracker
    private var notices: [StageNotice] = []
    private var updateTimes: [Double] = []
    private var predictedReported = 0
    /// Ids are given in order: those above this one are new (a `track` event each).
    private var announcedUpTo = 0
    private var newTracks: [FrameEvent] = []

    public init(settings: Settings) throws {
        self.settings = try Tracking(settings)
        tracker = self.settings.kind.init(settings: self.settings.tracker, firstId: 1)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let start = DispatchTime.now().uptimeNanoseconds
        let all = frame.pixels.regionsOfInterest()
        let tracked = all.indices.filter { settings.labels.admits(all[$0].label) }
        let held = !tracked.isEmpty && tracked.allSatisfy { all[$0].estimate == .held }
        var added: [RegionOfInterest] = []
        if held {
            // The detector did not run: its boxes are the last ones again. Each moves to the
            // predicted place of the track it was paired with (found by the box it had then).
            var predictions = tracker.predict()
            for i in tracked {
                var region = all[i]
                guard let p = predictions.firstIndex(where: { $0.lastDetected.iou(region.box) > 0.9 && $0.report.labelId == region.labelId }) else { continue }
                let report = predictions.remove(at: p).report
                region.box = report.box
                region.objectId = report.id
                region.estimate = .predicted
                frame.pixels.updateRegionOfInterest(region, at: i)
            }
            // Confirmed tracks missed on the last detector frame go on at their predicted places.
            for (report, _) in predictions where report.id >= 0 && report.missed > 0 { added.append(predicted(report)) }
        } else {
            let inputs = tracked.map { i in
                TrackerInput(box: all[i].box, score: all[i].confidence, labelId: all[i].labelId, label: all[i].label)
            }
            for report in tracker.update(inputs) {
                if let d = report.detection {
                    var region = all[tracked[d]]
                    guard region.objectId != report.id else { continue }
                    if report.id > announcedUpTo {
                        announcedUpTo = report.id
                        newTracks.append(FrameEvent(type: "track", zone: "", objectId: report.id, label: region.label,
                                                    time: frame.pts.map { Double($0) / 1e9 }))
                    }
                    region.objectId = report.id
                    frame.pixels.updateRegionOfInterest(region, at: tracked[d])
                } else if report.id >= 0 {
                    added.append(predicted(report))
                }
            }
        }
        for region in added { frame.pixels.addRegionOfInterest(region) }
        predictedReported += added.count
        tracker.forgetOutside(width: Double(frame.format.width), height: Double(frame.format.height))
        updateTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3)
        if updateTimes.count > 4096 { updateTimes.removeFirst(2048) }
        return .forward
    }

    public func takeEvents() -> [FrameEvent] {
        defer { newTracks = [] }
        return newTracks
    }

    /// A confirmed track the detector did not find here, at its predicted place (clipped to the
    /// frame by the stages that draw or blur it).
    private func predicted(_ report: TrackReport) -> RegionOfInterest {
        RegionOfInterest(label: report.label, labelId: report.labelId, x: report.box.xMin, y: report.box.yMin,
                         width: report.box.width, height: report.box.height, confidence: report.score, objectId: report.id,
                         estimate: .predicted)
    }

    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws { _ = try Tracking(settings) }

    public func settingsChanged(_ settings: Settings) {
        do {
            self.settings = try Tracking(settings)
            tracker.settings = self.settings.tracker
        } catch {
            notices.append(StageNotice(.warning, "\(error); keeping the previous settings"))
        }
    }

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var metrics: [Metric] {
        [.counter("streamlens_tracks_confirmed_total", "Object ids given (tracks confirmed)", tracker.confirmedCount),
         .gauge("streamlens_tracks", "Tracks alive now (tentative and confirmed)", Double(tracker.trackCount)),
         .counter("streamlens_tracks_predicted_boxes_total", "Boxes reported at a track's predicted place (the detector missed it)", predictedReported)]
    }

    public var summary: String? {
        guard !updateTimes.isEmpty else { return nil }
        let sorted = updateTimes.sorted()
        return String(format: "%d ids given, %d tracks now, %d predicted boxes reported, %.0f µs a frame (median)",
                      tracker.confirmedCount, tracker.trackCount, predictedReported, sorted[sorted.count / 2])
    }
}
