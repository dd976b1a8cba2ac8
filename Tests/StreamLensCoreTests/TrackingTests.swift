import Foundation
import Testing
@testable import StreamLensCore

/// The tracker's parts: the assignment against brute force, the filter against a known motion,
/// and the tracker on synthetic boxes whose right answers are known by construction.
@Suite struct AssignmentTests {
    /// Every assignment of rows to columns (with "unassigned"), the cheapest by (pairs made, cost).
    static func bruteForce(_ cost: [[Double]], maxCost: Double) -> (pairs: Int, cost: Double) {
        let rows = cost.count, columns = cost[0].count
        var best = (pairs: 0, cost: 0.0)
        func visit(_ row: Int, _ used: Set<Int>, _ pairs: Int, _ total: Double) {
            if row == rows {
                if pairs > best.pairs || (pairs == best.pairs && total < best.cost - 1e-12) { best = (pairs, total) }
                return
            }
            visit(row + 1, used, pairs, total)
            for c in 0..<columns where !used.contains(c) && cost[row][c] <= maxCost {
                visit(row + 1, used.union([c]), pairs + 1, total + cost[row][c])
            }
        }
        visit(0, [], 0, 0)
        return best
    }

    @Test func matchesBruteForceOnRandomMatrices() {
        var rng = SystemRandomNumberGenerator()
        for trial in 0..<400 {
            let rows = Int.random(in: 1...5, using: &rng), columns = Int.random(in: 1...5, using: &rng)
            let cost = (0..<rows).map { _ in (0..<columns).map { _ in Double(Int.random(in: 0...20, using: &rng)) / 20 } }
            let maxCost = [1.0, 0.8, 0.5][trial % 3]
            let pairs = Assignment.solve(cost, maxCost: maxCost)
            #expect(Set(pairs.map(\.row)).count == pairs.count && Set(pairs.map(\.column)).count == pairs.count, "a row or column used twice")
            #expect(pairs.allSatisfy { cost[$0.row][$0.column] <= maxCost }, "a pair over the threshold")
            let best = Self.bruteForce(cost, maxCost: maxCost)
            let total = pairs.map { cost[$0.row][$0.column] }.reduce(0, +)
            #expect(pairs.count == best.pairs && abs(total - best.cost) < 1e-9, "\(cost) max \(maxCost): \(pairs) vs \(best)")
        }
    }

    @Test func emptyAndForbidden() {
        #expect(Assignment.solve([], maxCost: 1).isEmpty)
        #expect(Assignment.solve([[0.9, 0.95]], maxCost: 0.5).isEmpty)
        #expect(Assignment.solve([[0.1], [0.05]], maxCost: 0.5).map(\.row) == [1])
    }
}

@Suite struct KalmanBoxTests {
    static func box(_ cx: Double, _ cy: Double, _ w: Double = 40, _ h: Double = 40) -> Box {
        Box(xMin: cx - w / 2, yMin: cy - h / 2, xMax: cx + w / 2, yMax: cy + h / 2)
    }

    @Test func learnsAConstantVelocityAndPredictsIt() {
        var filter = KalmanBox(Self.box(100, 50))
        for n in 1...20 {
            filter.predict()
            filter.update(Self.box(100 + 4 * Double(n), 50 - 2 * Double(n)))
        }
        #expect(abs(filter.velocity.x - 4) < 0.1 && abs(filter.velocity.y + 2) < 0.1, "\(filter.velocity)")
        for _ in 1...10 { filter.predict(holdingSize: true) }
        let expected = Self.box(100 + 4 * 30, 50 - 2 * 30)
        #expect(abs(filter.box.center.x - expected.center.x) < 2 && abs(filter.box.center.y - expected.center.y) < 2, "\(filter.box)")
        #expect(abs(filter.box.width - 40) < 0.5, "the size drifted while held: \(filter.box.width)")
    }

    @Test func smoothsNoise() {
        var filter = KalmanBox(Self.box(0, 0))
        var worst = 0.0
        for n in 1...60 {
            filter.predict()
            let noise = n % 2 == 0 ? 3.0 : -3.0
            filter.update(Self.box(5 * Double(n) + noise, 0))
            if n > 20 { worst = max(worst, abs(filter.box.center.x - 5 * Double(n))) }
        }
        #expect(worst < 3, "the filter follows the noise: off by \(worst)")
    }
}

@Suite struct MultiObjectTrackerTests {
    typealias Input = MultiObjectTracker.Input
    static func det(_ cx: Double, _ cy: Double, score: Double = 0.9, label: Int = 0, size: Double = 40) -> Input {
        Input(box: KalmanBoxTests.box(cx, cy, size, size), score: score, labelId: label, label: "l\(label)")
    }

    /// A moves right on y=100, B left on y=120, 5 px a frame, detections in either order: their
    /// 40 px boxes overlap in the middle. Each keeps one id from min-hits on (any tracker).
    @discardableResult
    static func crossing(_ tracker: any ObjectTracker, reportsDetectedBoxes: Bool) -> (a: Set<Int>, b: Set<Int>) {
        var idsOfA: Set<Int> = [], idsOfB: Set<Int> = []
        for n in 0..<60 {
            let a = Self.det(20 + 5 * Double(n), 100), b = Self.det(320 - 5 * Double(n), 120)
            let reports = tracker.update(n % 2 == 0 ? [a, b] : [b, a])
            let ra = reports.first { $0.detection == (n % 2 == 0 ? 0 : 1) }, rb = reports.first { $0.detection == (n % 2 == 0 ? 1 : 0) }
            if n < 2 { #expect(ra?.id == -1 && rb?.id == -1, "confirmed before min-hits") }
            if n >= 2, let ra, let rb { idsOfA.insert(ra.id); idsOfB.insert(rb.id) }
            if reportsDetectedBoxes { #expect(ra?.box == a.box && rb?.box == b.box, "frame \(n): a report's box is not its detection's") }
        }
        #expect(idsOfA.count == 1 && idsOfB.count == 1 && idsOfA != idsOfB, "A \(idsOfA), B \(idsOfB)")
        return (idsOfA, idsOfB)
    }

    @Test func idsAppearAfterMinHitsAndStayThroughACrossing() {
        let tracker = MultiObjectTracker()
        Self.crossing(tracker, reportsDetectedBoxes: false)
        #expect(tracker.confirmedCount == 2)
    }

    @Test func aMissedObjectIsPredictedAndKeepsItsIdWhenItComesBack() throws {
        let tracker = MultiObjectTracker()
        var id = -1
        for n in 0..<10 { id = tracker.update([Self.det(50 + 4 * Double(n), 80)]).first!.id }
        #expect(id >= 0)
        for n in 10..<22 {   // hidden for 12 frames: reported where it should be, marked missed
            let reports = tracker.update([])
            let r = try #require(reports.first)
            #expect(r.id == id && r.detection == nil && r.missed == n - 9)
            #expect(abs(r.box.center.x - (50 + 4 * Double(n))) < 4, "predicted at \(r.box.center.x) for \(50 + 4 * Double(n))")
        }
        let back = tracker.update([Self.det(50 + 4 * 22, 80)])
        #expect(back.first?.id == id, "a new id after the occlusion: \(back)")
        #expect(tracker.confirmedCount == 1)
    }

    @Test func aTrackMissedLongerThanMaxAgeIsForgotten() {
        var settings = MultiObjectTracker.Settings()
        settings.maxAge = 5
        let tracker = MultiObjectTracker(settings: settings)
        for _ in 0..<5 { _ = tracker.update([Self.det(100, 100)]) }
        for _ in 0..<6 { _ = tracker.update([]) }
        #expect(tracker.trackCount == 0)
        for _ in 0..<3 { _ = tracker.update([Self.det(100, 100)]) }
        #expect(tracker.confirmedCount == 2, "the object came back as the old track after max-age")
    }

    @Test func tracksPairOnlyWithTheirOwnClass() {
        let tracker = MultiObjectTracker()
        for _ in 0..<5 { _ = tracker.update([Self.det(100, 100, label: 0)]) }
        let reports = tracker.update([Self.det(100, 100, label: 1)])
        #expect(reports.first { $0.detection == 0 }?.id == -1, "a cat took the dog's id")
        #expect(reports.contains { $0.detection == nil && $0.labelId == 0 }, "the dog's track was not kept as missed")
    }

    @Test func weakDetectionsContinueTracksButNeverStartThem() {
        let tracker = MultiObjectTracker()
        for n in 0..<5 { _ = tracker.update([Self.det(100 + 2 * Double(n), 100)]) }
        let continued = tracker.update([Self.det(110, 100, score: 0.3), Self.det(400, 300, score: 0.3)])
        #expect(continued.first { $0.detection == 0 }?.id == 1, "a weak detection of a tracked object lost its track")
        #expect(continued.first { $0.detection == 1 } == nil, "a weak detection started a track")
        for _ in 0..<5 { _ = tracker.update([Self.det(400, 300, score: 0.3)]) }
        #expect(tracker.confirmedCount == 1)
    }

    @Test func framesTheDetectorSkippedMoveTheTracksOn() throws {
        let tracker = MultiObjectTracker()
        for n in stride(from: 0, to: 30, by: 3) { // the detector every 3rd frame
            _ = tracker.update([Self.det(100 + 6 * Double(n), 100)])
            for k in 1...2 {
                let predicted = try #require(tracker.predict().first)
                #expect(predicted.lastDetected == Self.det(100 + 6 * Double(n), 100).box)
                if n >= 12 { #expect(abs(predicted.report.box.center.x - (100 + 6 * Double(n + k))) < 3, "\(n)+\(k): \(predicted.report.box)") }
            }
        }
    }
}
