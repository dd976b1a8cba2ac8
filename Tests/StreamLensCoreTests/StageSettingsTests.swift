import Testing
@testable import StreamLensCore

@Suite struct StageSettingsTests {
    static let descriptor = StageDescriptor(
        name: "lenstest", summary: "test", example: "videotestsrc ! lenstest ! fakesink",
        properties: [
            PropertySpec("level", .int(0...10), default: .int(3), help: "a level"),
            PropertySpec("gain", .double(0...1), default: .double(0.5), live: true, help: "a gain"),
            PropertySpec("look", .choice(["a", "b"]), default: .string("a"), help: "a look"),
        ])

    @Test func defaultsComeFromTheTable() {
        let s = StageSettings(descriptor: Self.descriptor)
        #expect(s.int("level") == 3)
        #expect(s.double("gain") == 0.5)
        #expect(s.string("look") == "a")
        #expect(s.string("mode") == "auto") // the bridge's row is in every table
        #expect(Self.descriptor.properties.map(\.name) == ["level", "gain", "look", "mode", "thread"])
    }

    @Test func validationNamesThePropertyAndTheRange() {
        #expect(throws: StageError("property level=11 is out of range 0…10")) {
            try StageSettings(descriptor: Self.descriptor, values: ["level": .int(11)]).validate(against: Self.descriptor)
        }
        #expect(throws: StageError("property look=c is not one of a, b")) {
            try StageSettings(descriptor: Self.descriptor, values: ["look": .string("c")]).validate(against: Self.descriptor)
        }
        #expect(throws: StageError("property mode=fast is not one of auto, lossless, live")) {
            try StageSettings(descriptor: Self.descriptor, values: ["mode": .string("fast")]).validate(against: Self.descriptor)
        }
        #expect(throws: Never.self) {
            try StageSettings(descriptor: Self.descriptor, values: ["gain": .double(1)]).validate(against: Self.descriptor)
        }
    }

    @Test func statisticsQuantilesAndWindow() {
        var stats = FrameStatistics()
        for i in 1...100 {
            stats.received()
            stats.forwarded(age: UInt64(i) * 1_000_000)
        }
        stats.addDropped(5)
        #expect(stats.ageQuantile(0.5) == 51_000_000 || stats.ageQuantile(0.5) == 50_000_000)
        #expect(stats.ageQuantile(0.95) == 95_000_000 || stats.ageQuantile(0.95) == 96_000_000)
        #expect(stats.summary.hasPrefix("100 frames in, 100 out, 5 dropped, 0 copies, frame age p50 5"))
        for _ in 0..<(FrameStatistics.window * 2) { stats.forwarded(age: 1) }
        #expect(stats.ageQuantile(0.95) == 1) // old ages left the window
        #expect(stats.maxAge == 100_000_000)
    }
}
