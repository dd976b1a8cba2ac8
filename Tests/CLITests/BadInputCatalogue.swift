import Foundation
import Testing

/// The table in docs/bad-inputs.md, read as test cases: one row, one run of the built
/// `streamlens` binary. The doc cannot drift from the tests because it is the tests' input.
///
/// Columns: `# | input | what is wrong | command | exit | message | output`.
/// - command: `[NAME=value …] streamlens ARGS…` with shell quoting (double or single quotes);
///   `<<< 'LINE'` at the end sends LINE on standard input (the control channel's `--control -`).
/// - message: one line of stderr, exactly; a trailing `…` matches a line that starts with the
///   rest (for text that depends on the machine); `(none)` means stderr stays empty.
/// - output: `{name}: N frames` — the file the run wrote is decoded (ffprobe) and holds exactly N
///   frames; `{name}: unchanged` — a file that was there before the run (the fixture, made afresh
///   for the row) has the same bytes after it; `{name}: absent` — no such file after the run;
///   `—` when nothing is written.
/// - `{name}` anywhere: a fixture the test makes (see `Fixtures`), or `{busy-port}`, a TCP port
///   on 127.0.0.1 another socket listens on during the run.
struct CatalogueRow: CustomTestStringConvertible, Sendable {
    /// What the row says of the file the run writes.
    enum Output: Sendable {
        case frames(file: String, count: Int)
        case unchanged(file: String)
        case absent(file: String)
        var file: String {
            switch self {
            case .frames(let file, _), .unchanged(let file), .absent(let file): return file
            }
        }
    }

    var number: String
    var input: String
    var problem: String
    var environment: [String: String]
    var arguments: [String]
    var standardInput: String?
    var exitCode: Int32
    var message: String
    var output: Output?
    var testDescription: String { "\(number). \(input): \(problem)" }

    static let documentPath = CLI.packageRoot.appendingPathComponent("docs/bad-inputs.md").path

    /// The rows of the doc's table, or the reason they cannot be read.
    static func load() -> Result<[CatalogueRow], CatalogueError> {
        guard let text = try? String(contentsOfFile: documentPath, encoding: .utf8) else {
            return .failure(CatalogueError("cannot read \(documentPath)"))
        }
        let lines = tables(text).first ?? []
        guard lines.count >= 3 else { return .failure(CatalogueError("no table in \(documentPath)")) }
        let header = cells(lines[0])
        guard header == ["#", "input", "what is wrong", "command", "exit", "message", "output"] else {
            return .failure(CatalogueError("unexpected header \(header)"))
        }
        guard cells(lines[1]).allSatisfy({ $0.allSatisfy { "-: ".contains($0) } }) else {
            return .failure(CatalogueError("the second table line is not a separator"))
        }
        var rows: [CatalogueRow] = []
        for line in lines.dropFirst(2) {
            let c = cells(line)
            guard c.count == header.count else { return .failure(CatalogueError("row with \(c.count) cells: \(line)")) }
            do {
                rows.append(try row(c))
            } catch let e as CatalogueError {
                return .failure(CatalogueError("\(e.message) in row \(line)"))
            } catch {
                return .failure(CatalogueError("\(error) in row \(line)"))
            }
        }
        return .success(rows)
    }

    /// The doc's tables: each a run of consecutive lines starting with `|`. The first is the
    /// catalogue; the second (`PeerRow`) lists what is tested by suites of its own.
    static func tables(_ text: String) -> [[String]] {
        var tables: [[String]] = [], current: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("|") { current.append(line) } else if !current.isEmpty { tables.append(current); current = [] }
        }
        if !current.isEmpty { tables.append(current) }
        return tables
    }

    private static func row(_ c: [String]) throws -> CatalogueRow {
        var command = codeSpan(c[3])
        var input: String?
        if let r = command.range(of: " <<< ") {
            input = try words(String(command[r.upperBound...])).first
            command = String(command[..<r.lowerBound])
        }
        var args = try words(command)
        var environment: [String: String] = [:]
        while let first = args.first, first != "streamlens", let eq = first.firstIndex(of: "=") {
            environment[String(first[..<eq])] = String(first[first.index(after: eq)...])
            args.removeFirst()
        }
        guard args.first == "streamlens" else { throw CatalogueError("the command does not run streamlens") }
        args.removeFirst()
        guard let exit = Int32(c[4]) else { throw CatalogueError("exit '\(c[4])' is not a number") }
        var output: Output?
        let out = codeSpan(c[6])
        if out != "—" {
            let parts = out.components(separatedBy: ": ")
            guard parts.count == 2 else { throw CatalogueError("output '\(out)' is not '{file}: N frames', '{file}: unchanged' or '{file}: absent'") }
            if parts[1] == "unchanged" {
                output = .unchanged(file: parts[0])
            } else if parts[1] == "absent" {
                output = .absent(file: parts[0])
            } else if parts[1].hasSuffix(" frames") || parts[1].hasSuffix(" frame"), let n = Int(parts[1].split(separator: " ")[0]) {
                output = .frames(file: parts[0], count: n)
            } else {
                throw CatalogueError("output '\(out)' is not '{file}: N frames', '{file}: unchanged' or '{file}: absent'")
            }
        }
        return CatalogueRow(number: c[0], input: c[1], problem: c[2], environment: environment, arguments: args,
                            standardInput: input, exitCode: exit, message: codeSpan(c[5]), output: output)
    }

    /// A table line's cells, trimmed; `\|` is a literal bar.
    static func cells(_ line: String) -> [String] {
        var cells: [String] = []
        var current = ""
        var escaped = false
        for ch in line.dropFirst() {
            if escaped { current.append(ch); escaped = false; continue }
            if ch == "\\" { escaped = true; continue }
            if ch == "|" { cells.append(current.trimmingCharacters(in: .whitespaces)); current = ""; continue }
            current.append(ch)
        }
        if escaped { current.append("\\") }
        return cells
    }

    /// The text of a Markdown code span (`x` or `` x ``); other text as it is.
    static func codeSpan(_ cell: String) -> String {
        let ticks = cell.prefix { $0 == "`" }
        guard !ticks.isEmpty, cell.hasSuffix(ticks), cell.count > 2 * ticks.count else { return cell }
        var inner = String(cell.dropFirst(ticks.count).dropLast(ticks.count))
        if inner.hasPrefix(" ") && inner.hasSuffix(" ") && inner.count >= 2 { inner = String(inner.dropFirst().dropLast()) }
        return inner
    }

    /// Shell-like words: spaces separate, "…" and '…' group (quotes removed).
    static func words(_ text: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for ch in text {
            if let q = quote {
                if ch == q { quote = nil } else { current.append(ch) }
                continue
            }
            switch ch {
            case "\"", "'":
                quote = ch
                inWord = true
            case " ":
                if inWord { words.append(current); current = ""; inWord = false }
            default:
                current.append(ch)
                inWord = true
            }
        }
        guard quote == nil else { throw CatalogueError("unclosed quote in \(text)") }
        if inWord { words.append(current) }
        return words
    }

    /// Every `{name}` replaced by the fixture's value.
    func substituted(_ text: String, _ values: [String: String]) -> String {
        var result = text
        for (name, value) in values { result = result.replacingOccurrences(of: "{\(name)}", with: value) }
        return result
    }
}

struct CatalogueError: Error, CustomStringConvertible, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// The files the table's rows name, made once per test run in a scratch directory: media cut,
/// damaged or mislabelled on purpose, broken model manifests, credential files. Everything is
/// made by real tools (gst-launch-1.0 encodes the clips) and then damaged byte by byte here.
struct Fixtures: Sendable {
    let directory: String
    let values: [String: String]
    let problems: [String]

    static let shared = Fixtures()

    /// What `{existing.mp4}` and `{existing.jsonl}` hold before each row: a good clip and a line
    /// of text (the row's "unchanged" compares with these).
    func existingContents(_ name: String) -> Data? {
        switch name {
        case "existing.mp4": return values["clip.mp4"].flatMap { FileManager.default.contents(atPath: $0) }
        case "existing.jsonl": return Data("{\"frame\":0,\"detections\":[]} written by an earlier run\n".utf8)
        case "existing.txt": return Data("notes the user keeps\n".utf8)
        default: return nil
        }
    }

    private init() {
        // One folder per test process; those of test processes that have ended are removed.
        let temporary = FileManager.default.temporaryDirectory
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix("streamlens-bad-inputs-") {
            if let pid = Int32(name.dropFirst("streamlens-bad-inputs-".count)), kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
            }
        }
        let dir = temporary.appendingPathComponent("streamlens-bad-inputs-\(getpid())")
        try? FileManager.default.removeItem(at: dir)
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directory = dir.path
        var values: [String: String] = [:]
        var problems: [String] = []
        func path(_ name: String) -> String {
            let p = dir.appendingPathComponent(name).path
            values[name] = p
            return p
        }
        func gst(_ args: String) {
            let r = try? CLI.spawn(URL(fileURLWithPath: "/usr/bin/gst-launch-1.0"), ["-q"] + args.split(separator: " ").map(String.init), timeout: 60)
            if r?.status != 0 { problems.append("gst-launch-1.0 \(args): \(r?.stderr ?? "did not run")") }
        }
        func write(_ name: String, _ data: Data) {
            if !FileManager.default.createFile(atPath: path(name), contents: data) { problems.append("cannot write \(name)") }
        }
        func read(_ name: String) -> Data {
            guard let p = values[name], let d = FileManager.default.contents(atPath: p) else {
                problems.append("cannot read \(name)")
                return Data()
            }
            return d
        }

        // A good clip, 60 frames of 320x240 I420 at 30 fps, H.264 in MP4: the index (moov) at the
        // end as mp4mux writes it, and at the front (faststart) as players prefer.
        let video = "videotestsrc num-buffers=60 ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 ! x264enc key-int-max=15"
        gst("\(video) ! mp4mux ! filesink location=\(path("clip.mp4"))")
        gst("\(video) ! mp4mux faststart=true ! filesink location=\(path("clip-faststart.mp4"))")
        gst("videotestsrc num-buffers=1 ! video/x-raw,width=320,height=240 ! pngenc ! filesink location=\(path("picture.mp4"))")
        gst("audiotestsrc num-buffers=40 ! avenc_aac ! mp4mux ! filesink location=\(path("audio-only.mp4"))")
        gst("audiotestsrc num-buffers=20 ! wavenc ! filesink location=\(path("tone.wav"))")

        let clip = read("clip.mp4"), faststart = read("clip-faststart.mp4")
        write("empty.mp4", Data())
        write("notes.mp4", Data(String(repeating: "these are notes, not a video\n", count: 40).utf8))
        // Noise from a fixed generator: the same bytes every run, so the same answer.
        var state: UInt32 = 12345
        write("noise.mp4", Data((0..<20_000).map { _ in
            state = state &* 1_103_515_245 &+ 12345
            return UInt8(truncatingIfNeeded: state >> 16)
        }))
        write("cut.mp4", clip.prefix(clip.count / 2))
        write("cut-faststart.mp4", faststart.prefix(faststart.count / 2))
        // The index's size of sample 41 (stsz entry 40) and its first chunk offset (stco), made
        // impossible: qtdemux fails at that sample, or finds no data where the chunk should be.
        func patched(_ data: Data, box: String, entryOffset: Int) -> Data {
            var d = data
            guard let r = d.range(of: Data(box.utf8)) else {
                problems.append("no \(box) box")
                return d
            }
            let at = r.lowerBound + entryOffset
            d.replaceSubrange(at..<(at + 4), with: [0x7F, 0xFF, 0xFF, 0xF0])
            return d
        }
        // stsz: type, version/flags, sample size, count, then one size per sample.
        write("bad-sample-size.mp4", patched(faststart, box: "stsz", entryOffset: 4 + 4 + 4 + 4 + 4 * 40))
        // stco: type, version/flags, count, then one offset per chunk.
        write("bad-chunk-offset.mp4", patched(faststart, box: "stco", entryOffset: 4 + 4 + 4))
        // The middle 40% of the clip overwritten with noise (the frames' data: the index is at
        // the end).
        var damaged = clip
        for i in (clip.count * 3 / 10)..<(clip.count * 7 / 10) {
            state = state &* 1_103_515_245 &+ 12345
            damaged[i] = UInt8(truncatingIfNeeded: state >> 16)
        }
        write("damaged.mp4", damaged)

        // Model manifests, from the shipped short-range one.
        let manifestPath = CLI.packageRoot.appendingPathComponent("Models/face-short-range.json").path
        let manifestText = (try? String(contentsOfFile: manifestPath, encoding: .utf8)) ?? ""
        write("truncated.json", Data(manifestText.prefix(300).utf8))
        func variant(_ name: String, _ change: (inout [String: Any]) -> Void) {
            guard var json = (try? JSONSerialization.jsonObject(with: Data(manifestText.utf8))) as? [String: Any] else {
                problems.append("cannot parse \(manifestPath)")
                return
            }
            change(&json)
            write(name, (try? JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])) ?? Data())
        }
        variant("version-2.json") { $0["schema_version"] = 2 }
        variant("yolo.json") { json in
            var decoder = json["decoder"] as? [String: Any] ?? [:]
            decoder["name"] = "yolo"
            json["decoder"] = decoder
        }
        variant("no-model-file.json") { $0["model"] = "face_detection_nothere.tflite" }
        variant("not-a-model.json") { $0["model"] = "not-a-model.tflite" }
        variant("bad-reference.json") { $0["model"] = "catalogue:../../etc/passwd" }
        write("not-a-model.tflite", Data("this is not a model\n".utf8))

        // Files a run must leave alone, or not make, when it fails to start: each row that names
        // one gets its own copy (BadInputTests), so these paths are only placeholders.
        _ = path("existing.mp4")
        _ = path("existing.jsonl")
        _ = path("existing.txt")
        _ = path("new.mp4")
        // Ten frames' worth of 64x48 RGB for a source that cuts them into 100-byte buffers, and a
        // named pipe (reading it would block until someone writes).
        write("short.raw", Data(repeating: 0x80, count: 1000))
        if mkfifo(path("fifo"), 0o600) != 0 { problems.append("mkfifo: \(String(cString: strerror(errno)))") }
        write("auth-no-user", Data("just-a-password\n".utf8))
        write("auth-empty", Data())
        values["scratch"] = directory
        _ = path("out.mp4")
        self.values = values
        self.problems = problems
    }
}

/// A TCP socket listening on 127.0.0.1 at a port the system picked: "the port is in use".
final class BusyPort {
    let port: Int
    private let fd: Int32

    init?() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            return nil
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

/// A row of the doc's second table: a hostile peer, a stuck writer or a failing disk, which a
/// command line cannot show (it needs a server, a reader, a second client, a full disk), with
/// the test that shows it. Columns: `# | what | what happens | test`, the test as
/// `` `Suite/testName` ``.
struct PeerRow: Sendable {
    var number: String
    var what: String
    var test: (suite: String, name: String)

    static func load() throws -> [PeerRow] {
        let text = try String(contentsOfFile: CatalogueRow.documentPath, encoding: .utf8)
        let tables = CatalogueRow.tables(text)
        guard tables.count == 2 else { throw CatalogueError("\(tables.count) tables in \(CatalogueRow.documentPath), expected 2") }
        let lines = tables[1]
        guard lines.count >= 3, CatalogueRow.cells(lines[0]) == ["#", "what", "what happens", "test"] else {
            throw CatalogueError("the second table's header is \(lines.first ?? "missing")")
        }
        return try lines.dropFirst(2).map { line in
            let c = CatalogueRow.cells(line)
            let test = CatalogueRow.codeSpan(c.count == 4 ? c[3] : "").split(separator: "/").map(String.init)
            guard c.count == 4, test.count == 2 else { throw CatalogueError("row \(line): expected 4 cells, the last `Suite/testName`") }
            return PeerRow(number: c[0], what: c[1], test: (test[0], test[1]))
        }
    }
}
