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
}
