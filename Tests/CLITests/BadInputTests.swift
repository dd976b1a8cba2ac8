import Foundation
import Testing

/// Every bad input gets one clear message naming the problem and the right exit code, never a
/// hang (each run has a time limit) or a crash; where a file was being written, what was
/// written so far stays playable. The cases are the table in docs/bad-inputs.md (see
/// `CatalogueRow`), so the doc and the tests cannot disagree.
@Suite struct BadInputTests {
    static let rows: [CatalogueRow] = (try? CatalogueRow.load().get()) ?? []

    /// The table itself: readable, one table, enough rows, every row's fixtures known. (If the
    /// doc could not be read, the parameterized test below would have no cases: this one fails.)
    @Test func theCatalogueIsReadable() throws {
        let rows = try CatalogueRow.load().get()
        #expect(rows.count >= 25, "only \(rows.count) rows")
        #expect(Set(rows.map(\.number)).count == rows.count, "row numbers repeat")
        let text = try String(contentsOfFile: CatalogueRow.documentPath, encoding: .utf8)
        let tables = CatalogueRow.tables(text)
        #expect(tables.first?.count == rows.count + 2 && tables.count == 2, "lines starting with | outside the two tables")
        let fixtures = Fixtures.shared
        #expect(fixtures.problems.isEmpty, "\(fixtures.problems)")
        let known = Set(fixtures.values.keys).union(["busy-port"])
        for row in rows {
            let all = ([row.message, row.standardInput ?? "", row.output?.file ?? ""] + row.arguments + Array(row.environment.values)).joined(separator: " ")
            for name in placeholders(all) { #expect(known.contains(name), "row \(row.number) names an unknown fixture {\(name)}") }
        }
        // The kinds of input the catalogue must cover.
        let kinds = Set(rows.map(\.input))
        for kind in ["pipeline spec", "command line", "stage property", "caps", "model manifest", "model", "media file", "camera",
                     "port", "credentials", "control command"] {
            #expect(kinds.contains(kind), "no row for \(kind)")
        }
    }

    /// The second table's rows each name a test that exists: a `func NAME(` in the suite's
    /// `struct SUITE` somewhere under Tests/ (those suites run in `make test` like this one).
    @Test func everyPeerRowNamesARealTest() throws {
        let rows = try PeerRow.load()
        #expect(rows.count >= 9)
        #expect(Set(rows.map(\.number)).count == rows.count, "row numbers repeat")
        let tests = CLI.packageRoot.appendingPathComponent("Tests")
        let sources = (FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String } ?? [])
            .filter { $0.hasSuffix(".swift") }
            .compactMap { try? String(contentsOf: tests.appendingPathComponent($0), encoding: .utf8) }
        for row in rows {
            let found = sources.contains { $0.contains("struct \(row.test.suite)") && $0.contains("func \(row.test.name)(") }
            #expect(found, "row \(row.number) (\(row.what)) names \(row.test.suite)/\(row.test.name), which is not a test under Tests/")
        }
    }

    @Test(arguments: rows) func badInput(_ row: CatalogueRow) throws {
        let fixtures = Fixtures.shared
        try #require(fixtures.problems.isEmpty, "\(fixtures.problems)")
        var values = fixtures.values
        var busy: BusyPort?
        if (row.arguments + [row.message]).contains(where: { $0.contains("{busy-port}") }) {
            let occupied: BusyPort = try #require(BusyPort(), "no port to occupy")
            values["busy-port"] = String(occupied.port)
            busy = occupied
        }
        defer { withExtendedLifetime(busy) {} }
        // The file the row writes (or must leave alone, or must not make) is the row's own, so
        // rows run at the same time cannot meet.
        if let file = row.output?.file {
            let name = String(file.dropFirst().dropLast())
            let path = fixtures.directory + "/row\(row.number)-" + name
            values[name] = path
            try? FileManager.default.removeItem(atPath: path)
            if case .unchanged? = row.output {
                try #require(FileManager.default.createFile(atPath: path, contents: fixtures.existingContents(name)), "cannot write \(path)")
            }
        }
        let args = row.arguments.map { row.substituted($0, values) }
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in row.environment { environment[name] = row.substituted(value, values) }
        let input = row.standardInput.map { [(after: 0.3, line: row.substituted($0, values))] } ?? []
        let r = try CLI.spawn(CLI.binary, args, environment: environment, timeout: 40, input: input)

        #expect(!r.timedOut, "hung: \(r.stderr)")
        #expect(!r.stderr.contains("Fatal error") && r.status < 128, "crashed (\(r.status)): \(r.stderr)")
        #expect(r.status == row.exitCode, "exit \(r.status), not \(row.exitCode): \(r.stderr)")
        let lines = r.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let message = row.substituted(row.message, values)
        if message == "(none)" {
            #expect(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "stderr: \(r.stderr)")
        } else if message.hasSuffix("…") {
            let prefix = String(message.dropLast())
            #expect(lines.contains { $0.hasPrefix(prefix) }, "no line starting with\n\(prefix)\nin\n\(r.stderr)")
        } else {
            #expect(lines.contains(message), "no line\n\(message)\nin\n\(r.stderr)")
        }
        switch row.output {
        case .frames(let file, let count)?:
            let path = row.substituted(file, values)
            // Decoded to the end by ffprobe: the file is complete (its index written) and playable.
            #expect(countFrames(path) == count, "\(path): \(countFrames(path).map(String.init) ?? "not playable") frames, not \(count)")
        case .unchanged(let file)?:
            let path = row.substituted(file, values)
            let name = String(file.dropFirst().dropLast())
            #expect(FileManager.default.contents(atPath: path) == fixtures.existingContents(name), "\(path) was changed by a run that failed to start")
        case .absent(let file)?:
            let path = row.substituted(file, values)
            #expect(!FileManager.default.fileExists(atPath: path), "\(path) was made by a run that failed to start")
            let folder = (path as NSString).deletingLastPathComponent
            let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".partial") }
            #expect(leftovers.isEmpty, "temporary files left in \(folder): \(leftovers)")
        case nil:
            break
        }
    }

    private func placeholders(_ text: String) -> [String] {
        var names: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            let name = String(rest[rest.index(after: open)..<close])
            // Caps and formats use braces too ({BGRx, BGRA}); fixture names have no spaces or
            // commas. ${NAME} is a pipeline file's variable, not a fixture.
            let variable = open > text.startIndex && text[text.index(before: open)] == "$"
            if !name.contains(" "), !name.contains(","), !variable { names.append(name) }
            rest = rest[rest.index(after: close)...]
        }
        return names
    }
}
