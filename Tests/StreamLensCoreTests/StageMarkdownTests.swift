import Testing
@testable import StreamLensCore

/// `StageDescriptor.markdown`: the reference docs/stages/*.md holds (tools/gen-stage-docs.sh).
@Suite struct StageMarkdownTests {
    static let descriptor = StageDescriptor(
        name: "lenstest", summary: "A test stage", example: "videotestsrc num-buffers=3 ! lenstest ! fakesink",
        properties: [
            PropertySpec("level", .int(0...10), default: .int(3), help: "a level"),
            PropertySpec("gain", .double(0...1), default: .double(0.5), live: true, help: "a gain,\nthen more"),
            PropertySpec("look", .choice(["a", "b"]), default: .string("a"), help: "with look=a|b"),
            PropertySpec("path", .string, default: .string(""), help: "a file"),
            .reading("count", help: "counted so far"),
        ],
        keys: KeyBinding.numberKeys(property: "look", listProperty: "looks", help: "the n-th look"))

    static var lines: [String] { descriptor.markdown.components(separatedBy: "\n") }

    @Test func titleSummaryAndTheRunnableExample() {
        let lines = Self.lines
        #expect(lines.first == "# lenstest")
        #expect(lines.contains("A test stage"))
        #expect(lines.contains("streamlens run 'videotestsrc num-buffers=3 ! lenstest ! fakesink'"))
        #expect(lines.contains("Input caps: `video/x-raw`; output caps: the same as its input."))
    }

    @Test func oneRowPerPropertyEachOneLine() {
        let lines = Self.lines
        #expect(lines.contains("| `level` | int 0…10 | `3` | no | a level |"))
        // A line break in help would split the row; a `|` would end its cell.
        #expect(lines.contains("| `gain` | double 0.0…1.0 | `0.5` | yes | a gain, then more |"))
        #expect(lines.contains("| `look` | one of `a`, `b` | `a` | no | with look=a\\|b |"))
        #expect(lines.contains("| `path` | string | `\"\"` | no | a file |"))
        #expect(lines.contains("| `count` | reading (`get count`) | — | — | counted so far |"))
        // Every row of a table has the header's five cells (escaped bars do not count).
        let propertyRows = lines.filter { $0.hasPrefix("| `") && !$0.hasPrefix("| `1-9`") }
        #expect(propertyRows.count == 7)
        for row in propertyRows {
            #expect(row.replacingOccurrences(of: "\\|", with: "").filter { $0 == "|" }.count == 6, "\(row)")
        }
    }

    @Test func theBridgesPropertiesHaveATableOfTheirOwn() throws {
        let lines = Self.lines
        let own = try #require(lines.firstIndex(of: "## Properties"))
        let bridge = try #require(lines.firstIndex(of: "## Properties every stage has (the bridge)"))
        let mode = try #require(lines.firstIndex { $0.hasPrefix("| `mode` |") })
        let level = try #require(lines.firstIndex { $0.hasPrefix("| `level` |") })
        #expect(own < level && level < bridge && bridge < mode)
        #expect(lines[mode].contains("one of `auto`, `lossless`, `live`"))
    }

    @Test func keysOncePerLabel() {
        let rows = Self.lines.filter { $0.hasPrefix("| `1-9`") }
        #expect(rows == ["| `1-9` | the n-th look |"])
        let noKeys = StageDescriptor(name: "lensnokeys", summary: "s", example: "e", properties: [])
        #expect(!noKeys.markdown.contains("## Keys"))
        #expect(noKeys.markdown.contains("Only those every stage has (below)."))
    }

    @Test func aSinkSaysItEndsThePipeline() {
        let sink = StageDescriptor(name: "lenssinktest", summary: "s", example: "e", isSink: true, properties: [])
        #expect(sink.markdown.contains("output caps: none: a sink, it ends the pipeline."))
    }
}
