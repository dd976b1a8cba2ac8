import Foundation
import Testing
import StreamLensCore

/// lenstrack tracker=iou on synthetic boxes whose right answers are known by construction.
@Suite struct IoUTrackerTests {
    static func det(_ cx: Double, _ cy: Double, label: Int = 0, size: Double = 40) -> TrackerInput {
        TrackerInput(box: KalmanBoxTests.box(cx, cy, size, size), score: 0.9, labelId: label, label: "l\(label)")
    }

    @Test func theRegistryNamesIt() {
        #expect(TrackerRegistry.names == ["bytetrack", "iou"])
        #expect(TrackerRegistry.tracker(named: "iou") == IoUTracker.self)
        #expect(TrackerRegistry.tracker(named: "sort") == nil)
    }

    /// TrackingTests' crossing: each one's last box overlaps its own next detection more than the
    /// other's, so plain IoU keeps both ids too, and reports the detections' own boxes.
    @Test func idsAppearAfterMinHitsAndStayThroughACrossing() {
        let tracker = IoUTracker()
        let (idsOfA, idsOfB) = MultiObjectTrackerTests.crossing(tracker, reportsDetectedBoxes: true)
        #expect(idsOfA.allSatisfy { $0 >= 1 } && idsOfB.allSatisfy { $0 >= 1 })
        #expect(tracker.confirmedCount == 2)
    }

    /// Where IoU does not allow it: an object that jumps its own width each frame never
    /// overlaps its last box, so every detection starts a track of its own and none is confirmed.
    @Test func anObjectFasterThanItsBoxGetsNoId() {
        let tracker = IoUTracker()
        for n in 0..<10 {
            let reports = tracker.update([Self.det(40 + 41 * Double(n), 100)])
            #expect(reports.count == 1 && reports[0].id == -1, "frame \(n): \(reports)")
        }
        #expect(tracker.confirmedCount == 0 && tracker.trackCount == 1)
    }

    /// max-age 5: a gap of 5 frames keeps the id (the track reported where it was last seen,
    /// missed 1…5); a gap of 6 forgets it, and the object comes back under a new id after
    /// min-hits.
    @Test func aGapLongerThanMaxAgeGivesANewId() throws {
        var settings = TrackerSettings()
        settings.maxAge = 5
        let tracker = IoUTracker(settings: settings)
        var id = -1
        for _ in 0..<3 { id = try #require(tracker.update([Self.det(100, 100)]).first).id }
        #expect(id == 1)
        for k in 1...5 {
            let r = try #require(tracker.update([]).first, "the missed track was not reported \(k) frames on")
            #expect(r.id == id && r.detection == nil && r.missed == k && r.box == Self.det(100, 100).box)
        }
        #expect(tracker.update([Self.det(102, 100)]).first?.id == id, "a gap of max-age frames lost the id")
        for _ in 0..<6 { _ = tracker.update([]) }
        #expect(tracker.trackCount == 0)
        let back = (0..<3).map { _ in tracker.update([Self.det(102, 100)]).first?.id }
        #expect(back == [-1, -1, 2], "after a gap longer than max-age: \(back)")
        #expect(tracker.confirmedCount == 2)
    }

    /// Two classes on the same box are two tracks; a detection of another class never takes a
    /// track's id (unless per-class is off).
    @Test func classesAreTrackedApart() throws {
        let tracker = IoUTracker()
        for _ in 0..<3 { _ = tracker.update([Self.det(100, 100, label: 0), Self.det(100, 100, label: 1)]) }
        let both = tracker.update([Self.det(100, 100, label: 1), Self.det(100, 100, label: 0)])
        let cat = try #require(both.first { $0.detection == 0 }), dog = try #require(both.first { $0.detection == 1 })
        #expect(cat.labelId == 1 && dog.labelId == 0 && cat.id >= 1 && dog.id >= 1 && cat.id != dog.id, "\(both)")

        let alone = IoUTracker()
        for _ in 0..<3 { _ = alone.update([Self.det(100, 100, label: 0)]) }
        let other = alone.update([Self.det(100, 100, label: 1)])
        #expect(other.first { $0.detection == 0 }?.id == -1, "a detection of class 1 took class 0's id: \(other)")
        #expect(other.contains { $0.detection == nil && $0.labelId == 0 && $0.id == 1 }, "class 0's track was not kept as missed")

        var settings = TrackerSettings()
        settings.perClass = false
        let mixed = IoUTracker(settings: settings)
        for _ in 0..<3 { _ = mixed.update([Self.det(100, 100, label: 0)]) }
        #expect(mixed.update([Self.det(100, 100, label: 1)]).first?.id == 1, "per-class off: the id did not carry over")
    }

    /// A frame the detector skipped: every track stays where it was last detected; one missed
    /// on the last detector frame ages, and is forgotten past max-age.
    @Test func skippedFramesKeepTheBoxes() throws {
        var settings = TrackerSettings()
        settings.maxAge = 2
        let tracker = IoUTracker(settings: settings)
        for _ in 0..<3 { _ = tracker.update([Self.det(100, 100)]) }
        let held = try #require(tracker.predict().first)
        #expect(held.report.id == 1 && held.report.box == Self.det(100, 100).box && held.lastDetected == held.report.box)
        _ = tracker.update([])          // missed: 1
        #expect(tracker.predict().first?.report.missed == 2)
        #expect(tracker.predict().isEmpty, "kept past max-age on skipped frames")
        #expect(tracker.trackCount == 0)
    }
}
