import Foundation
import Testing

/// Every `streamlens run` command line the documentation shows (README.md and docs/**/*.md, in
/// code blocks) runs as written, or says why it cannot run here.
///
/// A line runs in a scratch folder holding links to the checkout's Models/, Pipelines/ and
/// .deps/ (what set-up made: the astronaut photo), so relative paths mean what they mean in the
/// checkout and outputs (`OUTPUT=painted.mp4`, `metadata=faces.jsonl`) land in the scratch
/// folder. The placeholder inputs the docs use for "your video" (`clip.mp4`, `in.mp4`) are made
/// there too: a one-second clip of the astronaut photo with a tone, so the line runs verbatim.
/// A line passes when it exits 0 and every file it names as its output (`OUTPUT=`,
/// `filesink location=`) is there and not empty.
///
/// Not run, each with its reason: lines that need a camera, a display, a server (an RTSP
/// camera, an inference server, an MQTT broker), that serve RTSP or read a live source without
/// end (they run until Ctrl-C), that need Magenta's networks when they are not installed, or a
/// file the reader makes first (their own model, a style picture). Inline commands in prose are
/// not lines; docs/bad-inputs.md's table is run by BadInputTests, and the stage pages' own
/// examples (their generated blocks) by CommandTests/everyStagesExampleRuns.
@Suite struct DocExamplesTests {
    struct Example: Hashable {
        var file: String
        var line: Int
        var command: String
    }

    static let placeholders = ["clip.mp4", "in.mp4"]

    /// The documentation files: README.md and every Markdown file under docs/.
    static func documents() -> [String] {
        var files = ["README.md"]
        let docs = CLI.packageRoot.appendingPathComponent("docs")
        if let walker = FileManager.default.enumerator(atPath: docs.path) {
            for case let path as String in walker where path.hasSuffix(".md") { files.append("docs/" + path) }
        }
        return files.sorted()
    }

    /// The `streamlens run` lines of a Markdown text: in a fenced code block, or a line indented
    /// as a code block, continued over the next lines while a quote is open (a spec written over
    /// several lines) or the line ends with a backslash.
    static func examples(in text: String, file: String) -> (runnable: [Example], generated: Int) {
        let lines = text.components(separatedBy: "\n")
        var found: [Example] = [], generated = 0
        var inFence = false, inGenerated = false
        var i = 0
        while i < lines.count {
            let line = lines[i]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            defer { i += 1 }
            if line == StagePagesTests.begin { inGenerated = true; continue }
            if line == StagePagesTests.end { inGenerated = false; continue }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") { inFence.toggle(); continue }
            guard inFence || line.hasPrefix("    "), trimmed.hasPrefix("streamlens run ") else { continue }
            var command = trimmed
            let first = i + 1
            while case .incomplete = shellWords(command), i + 1 < lines.count,
                  !lines[i + 1].trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                i += 1
                command += "\n" + lines[i]
            }
            if inGenerated { generated += 1; continue }
            found.append(Example(file: file, line: first, command: command))
        }
        return (found, generated)
    }

    enum Words: Equatable {
        case words([String])
        case incomplete
        case unsupported(String)
    }

    /// A command line split as a POSIX shell splits it, for the quoting docs use: single and
    /// double quotes, backslashes, `#` comments. Expansions, redirections and pipes are refused:
    /// a line that needs them is not one command.
    static func shellWords(_ text: String) -> Words {
        var words: [String] = [], word = "", inWord = false
        var i = text.startIndex
        func next(_ j: String.Index) -> String.Index { text.index(after: j) }
        while i < text.endIndex {
            let c = text[i]
            switch c {
            case "'":
                guard let close = text[next(i)...].firstIndex(of: "'") else { return .incomplete }
                word += text[next(i)..<close]
                inWord = true
                i = next(close)
                continue
            case "\"":
                var j = next(i)
                while true {
                    guard j < text.endIndex else { return .incomplete }
                    let d = text[j]
                    if d == "\"" { break }
                    if d == "$" || d == "`" { return .unsupported("\(d) in double quotes") }
                    if d == "\\", next(j) < text.endIndex, "\"\\$`\n".contains(text[next(j)]) {
                        if text[next(j)] != "\n" { word.append(text[next(j)]) }
                        j = next(next(j))
                        continue
                    }
                    word.append(d)
                    j = next(j)
                }
                inWord = true
                i = next(j)
                continue
            case "\\":
                guard next(i) < text.endIndex else { return .incomplete }
                if text[next(i)] != "\n" { word.append(text[next(i)]); inWord = true }
                i = next(next(i))
                continue
            case "#" where !inWord:
                i = text[i...].firstIndex(of: "\n") ?? text.endIndex
                continue
            case _ where c.isWhitespace:
                if inWord { words.append(word); word = ""; inWord = false }
            case "|", "&", ";", "<", ">", "(", ")", "$", "`":
                return .unsupported(String(c))
            default:
                word.append(c)
                inWord = true
            }
            i = next(i)
        }
        if inWord { words.append(word) }
        return .words(words)
    }

    /// A usage line (`streamlens run [options] SPEC [NAME=value …]`): placeholders, not values.
    static func isSynopsis(_ command: String) -> Bool {
        command.contains(" SPEC") || command.contains(" [")
    }

    static var magentaInstalled: Bool {
        ["style_transfer_f16_384.tflite", "style_predict_quantized_256.tflite"]
            .allSatisfy { FileManager.default.fileExists(atPath: CLI.installedModel("magenta", $0)) }
    }

    /// Why a line cannot run here, or nil: it runs. `arguments` are the words after `streamlens run`.
    static func reasonNotToRun(_ arguments: [String], in folder: URL) -> String? {
        let text = arguments.joined(separator: " ")
        let pipelineName = arguments.first { !$0.hasPrefix("-") && !$0.contains(" ") && !$0.contains("=") } ?? ""
        if text.contains("v4l2src") || text.contains("/dev/video") { return "needs a camera" }
        if ["autovideosink", "ximagesink", "xvimagesink", "glimagesink"].contains(where: { text.contains($0) }) || pipelineName.hasPrefix("preview-") {
            return "opens a window: needs a display (PreviewTests run the preview pipelines under Xvfb)"
        }
        if text.contains("rtsp://") { return "needs an RTSP camera on the network" }
        if text.contains("device=remote") { return "needs an inference server (RemoteTests start one on loopback)" }
        if text.contains("mqtt://") || text.contains("mqtts://") { return "needs an MQTT broker (MQTTTests start one on loopback)" }
        if text.contains("kafka://") || text.contains("nats://") { return "needs a Kafka broker or a NATS server (BusTests start them on loopback)" }
        if text.contains("lensrtsp") || pipelineName.hasSuffix("-rtsp") {
            return "serves RTSP on a fixed port until Ctrl-C (RTSPTests run lensrtsp on free ports)"
        }
        if text.contains("is-live=true") && !text.contains("num-buffers") { return "a live source without an end: runs until Ctrl-C" }
        if text.contains("magenta") && !magentaInstalled { return "needs Magenta's networks (streamlens models fetch magenta)" }
        for input in inputs(arguments) where !placeholders.contains(input) {
            let path = input.hasPrefix("/") ? input : folder.appendingPathComponent(input).path
            if !FileManager.default.fileExists(atPath: path) { return "needs \(input), a file the reader makes or brings" }
        }
        return nil
    }

    /// Values naming files a line reads: models, style pictures, input files.
    static func inputs(_ arguments: [String]) -> [String] {
        values(arguments, keys: ["model", "MODEL", "style-image", "STYLE", "INPUT"])
            + values(arguments, keys: ["location"], after: ["filesrc", "multifilesrc"])
    }

    /// Values naming files a line writes.
    static func outputs(_ arguments: [String]) -> [String] {
        values(arguments, keys: ["OUTPUT"]) + values(arguments, keys: ["location"], after: ["filesink"])
    }

    /// `key=value` values among the words of the arguments and of the specs inside them;
    /// with `after`, only those of an element of one of those names.
    static func values(_ arguments: [String], keys: Set<String>, after elements: Set<String>? = nil) -> [String] {
        var found: [String] = []
        for argument in arguments {
            let words = argument.split(whereSeparator: \.isWhitespace).map(String.init)
            var element = ""
            for word in words {
                guard let eq = word.firstIndex(of: "=") else { element = word; continue }
                let key = String(word[..<eq]), value = String(word[word.index(after: eq)...])
                if keys.contains(key), !value.isEmpty, elements.map({ $0.contains(element) }) ?? true { found.append(value) }
            }
        }
        return found
    }

    /// A scratch folder that looks like the checkout to the lines (its path fixed per checkout,
    /// so compiled models and precision decisions cached for it are found again).
    static func scratchFolder() throws -> URL {
        let name = "streamlens-doc-examples-" + String(CLI.packageRoot.path.hashValueStable, radix: 16)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("out"), withIntermediateDirectories: true)
        for link in ["Models", "Pipelines", ".deps", "examples"] {
            try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(link),
                                                       withDestinationURL: CLI.packageRoot.appendingPathComponent(link))
        }
        return folder
    }

    /// The placeholder input: one second of the astronaut photo, 320x320 at 10 fps, with a tone
    /// (the file pipelines re-mux an audio track), H.264 and AAC in MP4.
    static func makePlaceholder(_ path: URL) throws {
        let photo = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), [
            "-v", "error", "-y", "-loop", "1", "-framerate", "10", "-i", photo,
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "1",
            "-vf", "scale=320:320", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", path.path,
        ])
        guard r.status == 0 else { throw CLIError("ffmpeg could not make \(path.lastPathComponent): \(r.stderr)") }
    }

    struct CLIError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test func shellWordsSplitAsAShellDoes() {
        #expect(Self.shellWords("streamlens run 'a ! b' X=1   # a comment") == .words(["streamlens", "run", "a ! b", "X=1"]))
        #expect(Self.shellWords("streamlens run \"a \\\"b\\\"\" C=\"x y\"") == .words(["streamlens", "run", "a \"b\"", "C=x y"]))
        #expect(Self.shellWords("streamlens run 'filesrc\n  ! fakesink'") == .words(["streamlens", "run", "filesrc\n  ! fakesink"]))
        #expect(Self.shellWords("streamlens run 'open") == .incomplete)
        #expect(Self.shellWords("streamlens run a \\") == .incomplete)
        #expect(Self.shellWords("streamlens run a | head") == .unsupported("|"))
        #expect(Self.shellWords("streamlens run $(pwd)") == .unsupported("$"))
        #expect(Self.isSynopsis("streamlens run [-q] [--mode auto|lossless|live] SPEC [NAME=value …]"))
        #expect(!Self.isSynopsis("streamlens run 'videotestsrc num-buffers=3 ! fakesink'"))
    }

    @Test func linesAreFoundInCodeBlocksAndJoinedWhileAQuoteIsOpen() {
        let text = """
            Prose with `streamlens run 'inline'`.
            ```
            streamlens run 'a
              ! b'     # two lines
            streamlens models list
            ```
                streamlens run indented
            \(StagePagesTests.begin)
            ```
            streamlens run 'generated'
            ```
            \(StagePagesTests.end)
            """
        let (found, generated) = Self.examples(in: text, file: "t.md")
        #expect(found.map(\.command) == ["streamlens run 'a\n  ! b'     # two lines", "streamlens run indented"])
        #expect(found.map(\.line) == [3, 7])
        #expect(generated == 1)
    }

    @Test func everyRunLineOfTheDocsRunsOrSaysWhyNot() throws {
        let folder = try Self.scratchFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var seen = Set<String>()
        var ran: [String] = [], skipped: [String] = [], generated = 0
        for file in Self.documents() {
            let text = try String(contentsOf: CLI.packageRoot.appendingPathComponent(file), encoding: .utf8)
            let (examples, inGenerated) = Self.examples(in: text, file: file)
            generated += inGenerated
            for example in examples where seen.insert(example.command).inserted {
                let place = "\(example.file):\(example.line)"
                if Self.isSynopsis(example.command) {
                    skipped.append("\(place): a synopsis (SPEC, [options]), not a command")
                    continue
                }
                guard case .words(let words) = Self.shellWords(example.command), words.count > 2 else {
                    Issue.record("\(place): not one command a test can run as written: \(example.command)")
                    continue
                }
                let arguments = Array(words.dropFirst(2))
                if let reason = Self.reasonNotToRun(arguments, in: folder) {
                    skipped.append("\(place): \(reason)")
                    continue
                }
                for input in Self.inputs(arguments) where Self.placeholders.contains(input) {
                    let path = folder.appendingPathComponent(input)
                    if !FileManager.default.fileExists(atPath: path.path) { try Self.makePlaceholder(path) }
                }
                let start = Date()
                let r = try CLI.spawn(CLI.binary, ["run"] + arguments, in: folder, timeout: 90)
                ran.append("\(place) (\(String(format: "%.1f", Date().timeIntervalSince(start))) s)")
                #expect(r.status == 0 && !r.timedOut, "\(place): \(example.command)\nexit \(r.status)\(r.timedOut ? " (killed at the deadline)" : ""): \(r.stderr.suffix(1500))")
                for output in Self.outputs(arguments) where !output.hasPrefix("/dev/") {
                    let path = output.hasPrefix("/") ? output : folder.appendingPathComponent(output).path
                    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
                    #expect(size > 0, "\(place): no output \(output) (\(example.command))")
                }
            }
        }
        print("doc examples run (\(ran.count)):\n  " + ran.joined(separator: "\n  "))
        print("doc examples not run (\(skipped.count)):\n  " + skipped.joined(separator: "\n  "))
        // The docs show runnable lines (the README's first pipeline among them) and the stage
        // pages their generated examples: finding none would mean this test looks in the wrong place.
        #expect(ran.count >= 10, "ran: \(ran)")
        #expect(generated >= 12, "stage pages' examples: \(generated)")
    }
}

fileprivate extension String {
    /// FNV-1a of the UTF-8 bytes: the same in every process (Swift's hashValue is seeded per run).
    var hashValueStable: UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
