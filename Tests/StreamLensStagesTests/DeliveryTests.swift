import Foundation
import StreamLensCore
import StreamLensTesting
import Testing

/// A stage whose frames wait for "requests" the test finishes in any order: every third frame
/// is answered at once, the others are pending until `release` says so.
final class OutOfOrderStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestorder", summary: "pending frames (test)", example: "", properties: [])
    /// Frame indexes whose requests are done, and the frames waiting, oldest first.
    nonisolated(unsafe) static var done: Set<Int> = []
    private var waiting: [Int] = []
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        if frame.index % 3 == 2 { return frame.index % 2 == 0 ? .forward : .drop(reason: "odd") }
        waiting.append(frame.index)
        return .pending
    }
    func finishOldest(wait: Bool) -> FrameOutcome? {
        guard let oldest = waiting.first else { return .forward }
        guard wait || Self.done.contains(oldest) else { return nil }
        waiting.removeFirst()
        return .forward
    }
}

@Suite(.serialized) struct DeliveryTests {
    @Test func pendingFramesLeaveInOrderAndFramesBehindThemWait() throws {
        OutOfOrderStage.done = []
        let driver = try StageDriver(OutOfOrderStage.self)
        try driver.start(.packed("RGB", width: 4, height: 2))
        let bytes = [UInt8](repeating: 7, count: 24)
        // 0 and 1 pending; 2 answered at once but behind them.
        #expect(driver.push(bytes).isEmpty && driver.push(bytes).isEmpty && driver.push(bytes).isEmpty)
        #expect(driver.held == 3)
        // Frame 1's request finishes first: nothing may overtake frame 0.
        OutOfOrderStage.done = [1]
        #expect(driver.poll().isEmpty)
        OutOfOrderStage.done = [0, 1]
        let out = driver.poll()
        #expect(out.map(\.index) == [0, 1, 2] && out.map(\.outcome) == [.forward, .forward, .forward])
        // 3, 4 pending, 5 (odd) dropped behind them; end of stream waits for all.
        for _ in 0..<3 { _ = driver.push(bytes) }
        let rest = driver.finish()
        #expect(rest.map(\.index) == [3, 4, 5] && rest.map(\.outcome) == [.forward, .forward, .drop(reason: "odd")])
        #expect(driver.held == 0)
    }

    @Test func settingsAreCheckedAgainstTheTable() throws {
        #expect(throws: StageError("lenstestorder has no property nope")) { try StageDriver(OutOfOrderStage.self, settings: ["nope": .int(1)]) }
    }
}
