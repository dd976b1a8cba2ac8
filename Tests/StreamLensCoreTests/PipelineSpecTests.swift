import Foundation
import Testing
@testable import StreamLensCore

@Suite struct PipelineSpecTests {
    @Test func commandLineBeatsEnvironmentBeatsDefault() throws {
        let spec = PipelineSpec(text: "videotestsrc num-buffers=${N:-10} ! ${SINK:-fakesink} name=${NAME}")
        #expect(try spec.expanded(variables: ["NAME": "out"]) == "videotestsrc num-buffers=10 ! fakesink name=out")
        #expect(try spec.expanded(variables: ["NAME": "a", "N": "3"], environment: ["STREAMLENS_VAR_N": "7", "STREAMLENS_VAR_SINK": "filesink"])
                == "videotestsrc num-buffers=3 ! filesink name=a")
        #expect(try spec.expanded(variables: ["NAME": "a"], environment: ["STREAMLENS_VAR_N": "7"]) == "videotestsrc num-buffers=7 ! fakesink name=a")
        // A plain N in the environment (an ambient PORT, ADDRESS…) fills nothing.
        #expect(try spec.expanded(variables: ["NAME": "a"], environment: ["N": "7"]) == "videotestsrc num-buffers=10 ! fakesink name=a")
        #expect(spec.sources(variables: ["NAME": "a"], environment: ["STREAMLENS_VAR_N": "7"]).map { "\($0.name)=\($0.value ?? "-") (\($0.from))" }
                == ["N=7 (STREAMLENS_VAR_N)", "SINK=fakesink (default)", "NAME=a (command line)"])
        #expect(spec.variableNames == ["N", "SINK", "NAME"])
    }

    @Test func unsetVariableNamesItself() {
        let spec = PipelineSpec(text: "filesrc location=${INPUT} ! fakesink", origin: "Pipelines/x.pipeline")
        #expect(throws: SpecError("variable INPUT is not set: pass INPUT=value after the spec (or set STREAMLENS_VAR_INPUT) (used in Pipelines/x.pipeline)")) {
            try spec.expanded()
        }
    }

    @Test func badReferencesAreErrors() throws {
        #expect(throws: SpecError.self) { try PipelineSpec(text: "a ${NOPE").expanded() }
        #expect(throws: SpecError.self) { try PipelineSpec(text: "a ${1X}").expanded() }
        // A lone $ is left alone (it is valid in gst-launch values).
        #expect(try PipelineSpec(text: "textoverlay text=$5").expanded() == "textoverlay text=$5")
    }

    @Test func emptyDefaultIsAllowed() throws {
        #expect(try PipelineSpec(text: "x ${A:-}y").expanded() == "x y")
    }

    @Test func filesJoinLinesAndDropComments() {
        let raw = """
            # a comment
            videotestsrc ! \\
              # another
              lenspass

            ! fakesink  # not a comment: gst-launch would see it
            """
        #expect(PipelineSpec.joinLines(raw) == "videotestsrc ! lenspass ! fakesink  # not a comment: gst-launch would see it")
    }

    @Test func loadFindsPipelineFilesByName() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("specs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "# t\nvideotestsrc\n! fakesink\n".write(to: dir.appendingPathComponent("t.pipeline"), atomically: true, encoding: .utf8)
        let byName = try PipelineSpec.load("t", searchDirectories: [dir.path])
        #expect(byName.text == "videotestsrc ! fakesink")
        #expect(byName.origin == dir.appendingPathComponent("t.pipeline").path)
        let byPath = try PipelineSpec.load(dir.appendingPathComponent("t.pipeline").path, searchDirectories: [])
        #expect(byPath.text == "videotestsrc ! fakesink")
        #expect(try PipelineSpec.load("videotestsrc ! fakesink", searchDirectories: [dir.path]).origin == "command line")
        #expect(throws: SpecError.self) { try PipelineSpec.load("nothere.pipeline", searchDirectories: [dir.path]) }
    }

    @Test func assignments() throws {
        #expect(try PipelineSpec.parseAssignments(["A=1", "B_2=x=y", "C="]) == ["A": "1", "B_2": "x=y", "C": ""])
        #expect(throws: SpecError.self) { try PipelineSpec.parseAssignments(["fakesink"]) }
        #expect(throws: SpecError.self) { try PipelineSpec.parseAssignments(["9A=1"]) }
    }
}
