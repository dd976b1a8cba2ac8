import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lenspass and lenswatchdog, driven in memory: both hand every frame on untouched; what they
/// add is a delay (lenspass) and a restart policy for the bridge (lenswatchdog).
@Suite struct PassAndWatchdogStageTests {
    /// Frames of a 16×8 BGRx picture that differs per frame.
    static func frame(_ n: Int) -> [UInt8] { (0..<(16 * 8 * 4)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ n &* 31) } }

    @Test func lenspassHandsOnEveryFrameUnchangedAndReportsItsDelay() throws {
        let driver = try StageDriver(PassStage.self)
        try driver.start(.packed("BGRx", width: 16, height: 8))
        var out: [StageDriver<PassStage>.Delivered] = []
        for n in 0..<12 { out += driver.push(Self.frame(n)) }
        out += driver.finish()
        #expect(out.map(\.index) == Array(0..<12))
        #expect(out.allSatisfy { $0.outcome == .forward })
        #expect(out.map(\.pixels.bytes) == (0..<12).map(Self.frame))
        #expect(driver.stage.latencyNanoseconds == 0)
        // delay is live: downstream is told the latency it adds.
        try driver.change(["delay": .int(40)])
        #expect(driver.settings.delay == 40 && driver.stage.latencyNanoseconds == 40_000_000)
        #expect(throws: StageError("property delay=20000 is out of range 0…10000")) { try driver.change(["delay": .int(20_000)]) }
        #expect(driver.settings.delay == 40)
    }

    @Test func lenswatchdogHandsOnEveryFrameAndGivesTheBridgeItsPolicy() throws {
        let driver = try StageDriver(WatchdogStage.self, settings: ["timeout": .double(2.5), "retries": .int(3), "backoff": .double(0.5),
                                                                  "restart-on-eos": .bool(false)])
        #expect(WatchdogStage.descriptor.restartsUpstream)
        let policy = try #require(driver.stage as SourceRestarting?).restartPolicy
        #expect(policy.timeout == 2.5 && policy.retries == 3 && policy.backoff == 0.5 && policy.maxBackoff == 30 && !policy.restartOnEOS)
        try driver.start(.packed("BGRx", width: 16, height: 8))
        var out: [StageDriver<WatchdogStage>.Delivered] = []
        for n in 0..<5 { out += driver.push(Self.frame(n)) }
        out += driver.finish()
        #expect(out.map(\.index) == Array(0..<5) && out.allSatisfy { $0.outcome == .forward })
        #expect(out.map(\.pixels.bytes) == (0..<5).map(Self.frame))
        // A policy the bridge could not follow is refused when the stage is made.
        #expect(throws: StageError("property timeout=0.1 is out of range 0.5…3600.0")) {
            try StageDriver(WatchdogStage.self, settings: ["timeout": .double(0.1)])
        }
    }
}
