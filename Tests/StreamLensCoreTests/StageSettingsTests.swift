import Testing
@testable import StreamLensCore

@Suite struct StageSettingsTests {
    struct Settings: StageSettings {
        enum Look: String, Sendable, CaseIterable { case a, b }
        var level = 3
        var gain = 0.5
        var look = Look.a
        var name = ""
        static let properties: [Property<Settings>] = [
            .int("level", \.level, 0...10, help: "a level"),
            .double("gain", \.gain, 0...1, live: true, help: "a gain"),
            .choice("look", \.look, help: "a look"),
            .string("name", \.name, help: "a name"),
            .reading("count", help: "counted so far"),
        ]
    }

    static let descriptor = StageDescriptor(name: "lenstest", summary: "test", example: "videotestsrc ! lenstest ! fakesink", properties: Settings.table)

    /// The defaults are the struct's; the table's rows carry them, their kinds and ranges.
    @Test func defaultsComeFromTheSettingsStruct() {
        #expect(Self.descriptor.properties.map(\.name) == ["level", "gain", "look", "name", "count", "mode", "thread"])
        let rows = Dictionary(uniqueKeysWithValues: Self.descriptor.properties.map { ($0.name, $0) })
        #expect(rows["level"]?.defaultValue == .int(3) && rows["level"]?.kind == .int(0...10))
        #expect(rows["gain"]?.defaultValue == .double(0.5) && rows["gain"]?.live == true)
        #expect(rows["look"]?.defaultValue == .string("a") && rows["look"]?.kind == .choice(["a", "b"]))
        #expect(rows["count"]?.readOnly == true)
        #expect(rows["mode"]?.defaultValue == .string("auto")) // the bridge's rows are in every table
    }

    /// Values by name (what GStreamer and the API carry) fill the fields through the rows, and
    /// the fields read back as the same values.
    @Test func valuesByNameFillTheFields() {
        let values = PropertyValues(descriptor: Self.descriptor, values: ["level": .int(7), "look": .string("b"), "name": .string("door")])
        let s = Settings(values)
        #expect(s.level == 7 && s.gain == 0.5 && s.look == .b && s.name == "door")
        #expect(s.values["level"] == .int(7) && s.values["look"] == .string("b") && s.values["gain"] == .double(0.5))
        #expect(Settings(PropertyValues(descriptor: Self.descriptor, values: s.values)) == s)
        let bridge = BridgeSettings(PropertyValues(descriptor: Self.descriptor, values: ["thread": .string("own"), "mode": .string("lossless")]))
        #expect(bridge.thread == .own && bridge.mode == .lossless && bridge.placement(of: Self.descriptor) == .ownThread)
    }

    @Test func validationNamesThePropertyAndTheRange() {
        #expect(throws: StageError("property level=11 is out of range 0…10")) {
            try PropertyValues(descriptor: Self.descriptor, values: ["level": .int(11)]).validate(against: Self.descriptor)
        }
        #expect(throws: StageError("property look=c is not one of a, b")) {
            try PropertyValues(descriptor: Self.descriptor, values: ["look": .string("c")]).validate(against: Self.descriptor)
        }
        #expect(throws: StageError("property mode=fast is not one of auto, lossless, live")) {
            try PropertyValues(descriptor: Self.descriptor, values: ["mode": .string("fast")]).validate(against: Self.descriptor)
        }
        #expect(throws: Never.self) {
            try PropertyValues(descriptor: Self.descriptor, values: ["gain": .double(1)]).validate(against: Self.descriptor)
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
