import Foundation
import Testing
@testable import StreamLensCore

/// Core's toolkit for the chores stages and hosts share (Sources/StreamLensCore/Toolkit).
@Suite struct ToolkitTests {
    @Test func commaListsLoseSpacesAndEmptyItems() {
        #expect(commaList(" person, car,,bus ,") == ["person", "car", "bus"])
        #expect(commaList("") == [])
        #expect(commaList(" , ") == [])
    }

    @Test func labelFiltersLetThroughTheirLabelsOrEverything() {
        struct Settings: StageSettings {
            var labels = ""
            static let properties: [Property<Settings>] = [LabelFilter.property(\.labels, "keep", live: true)]
        }
        let descriptor = StageDescriptor(name: "lenslabels", summary: "", example: "", properties: Settings.table)
        let some = LabelFilter(text: Settings(PropertyValues(descriptor: descriptor, values: ["labels": .string(" face, car,")])).labels)
        #expect(some.labels == ["face", "car"])
        #expect(some.admits("face") && some.admits("car") && !some.admits("person") && !some.admits("Face"))
        let every = LabelFilter(text: Settings().labels)
        #expect(every.admits("face") && every.admits(""))
        #expect(descriptor.ownProperties[0].help == "keep, comma-separated (empty: every region)" && descriptor.ownProperties[0].live)
    }

    @Test func timingWindowsKeepTheirRecentValues() {
        var halving = TimingWindow(capacity: 4)
        for v in 1...5 { halving.record(Double(v)) }
        #expect(halving.values == [3, 4, 5])   // past 4 the oldest 2 went
        var sliding = TimingWindow(capacity: 3, dropping: 1)
        for v in 1...5 { sliding.record(Double(v)) }
        #expect(sliding.values == [3, 4, 5])
        #expect(TimingWindow().median == nil)
        var w = TimingWindow()
        for v in (1...20).reversed() { w.record(Double(v)) }
        // The sorted values' element at count × p / 100: 20 × 95 / 100 = 19 → 20; 20 / 2 = 10 → 11.
        #expect(w.percentile(95) == 20 && w.median == 11 && w.percentile(100) == 20 && w.percentile(0) == 1)
        #expect(w.last == 1 && w.count == 20)
    }

    @Test func coloursAreSixHexDigits() throws {
        #expect(RGBColour(hex: "#ff8000") == RGBColour(red: 255, green: 128, blue: 0))
        let green = try #require(RGBColour(hex: "00FF00")).unit
        #expect(green.0 == 0 && green.1 == 1 && green.2 == 0)
        for bad in ["", "#fff", "#gg0000", "#ff00001", "red"] { #expect(RGBColour(hex: bad) == nil, "\(bad)") }
    }

    @Test func takingNoticesLeavesNone() {
        var notices = [StageNotice(.info, "a"), StageNotice(.warning, "b")]
        #expect(notices.take().map(\.text) == ["a", "b"])
        #expect(notices.isEmpty && notices.take().isEmpty)
    }

    @Test func stableJSONSortsKeysAndKeepsSlashes() throws {
        let text = String(decoding: try JSONEncoder.stable().encode(["b": "x/y", "a": "z"]), as: UTF8.self)
        #expect(text == #"{"a":"z","b":"x/y"}"#)
    }

    @Test func userAndPasswordFromAFileOrTheEnvironment() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("toolkit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("auth").path
        try "viewer:s3:cret\nignored\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try UserPassword.resolve(file: file, fileName: "auth-file", variables: "X", environment: ["X_USER": "other"], basic: true)
                == UserPassword(user: "viewer", password: "s3:cret"))
        try "viewer:\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try UserPassword.resolve(file: file, fileName: "credentials file", variables: "X", environment: [:])?.password == "")
        #expect(throws: StageError("auth-file \(file) must hold user:password on its first line")) {
            try UserPassword.resolve(file: file, fileName: "auth-file", variables: "X", environment: [:], basic: true)
        }
        #expect(try UserPassword.resolve(file: "", fileName: "f", variables: "X", environment: [:]) == nil)
        #expect(try UserPassword.resolve(file: "", fileName: "f", variables: "X", environment: ["X_USER": "u", "X_PASSWORD": "p"])
                == UserPassword(user: "u", password: "p"))
        #expect(throws: StageError("X_USER is set but X_PASSWORD is not: set both, or neither")) {
            try UserPassword.resolve(file: "", fileName: "f", variables: "X", environment: ["X_USER": "u"])
        }
        #expect(throws: StageError("X_PASSWORD is set but X_USER is not: set both for authentication, or neither")) {
            try UserPassword.resolve(file: "", fileName: "f", variables: "X", environment: ["X_PASSWORD": "p"], basic: true)
        }
        #expect(throws: StageError("X_USER must not contain ':' (Basic authentication separates user and password with it)")) {
            try UserPassword.resolve(file: "", fileName: "f", variables: "X", environment: ["X_USER": "a:b", "X_PASSWORD": "p"], basic: true)
        }
    }

    @Test func unixSocketAddressesFitTheirPath() {
        #expect(UnixSocketAddress(path: String(repeating: "a", count: UnixSocketAddress.maxPathBytes)) != nil)
        #expect(UnixSocketAddress(path: String(repeating: "a", count: UnixSocketAddress.maxPathBytes + 1)) == nil)
        #expect(UnixSocketAddress.maxPathBytes == 107)
        #expect(UnixSocketAddress.someoneListens(at: "/nonexistent/streamlens-toolkit.sock") == false)
    }
}
