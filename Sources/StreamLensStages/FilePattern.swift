import Foundation
import StreamLensCore

/// A file name pattern (lenssnapshot's `path=`, lensrecord's `location=`): strftime fields
/// (`%Y%m%d-%H%M%S`, from the wall clock in local time, when the file was triggered) and the
/// file's own fields in braces; for lensrecord also a counter written as splitmuxsink and
/// multifilesink write it (`%05d`: `%d` with a width; a bare `%d` stays strftime's day of the
/// month). Checked once, at start; expanded for every file.
struct FilePattern: Equatable {
    /// The values of one file's fields, by name (`n`: the stage's counter, 1 for the first).
    typealias Values = [String: String]

    let text: String
    let property: String
    /// What the braces may name.
    let fields: [String]
    /// Whether `%05d` (a width) is the counter `n`.
    let counter: Bool

    /// `extensions`: the names the file may end with (lower case, the first is the one said).
    init(_ text: String, property: String, extensions: [String], fields: [String], counter: Bool = false, example: String) throws {
        guard !text.isEmpty else { throw StageError("property \(property) is empty: give a pattern such as \(example)") }
        let name = Folders.name(text).lowercased()
        guard !text.hasSuffix("/"), extensions.contains(where: { name.hasSuffix(".\($0)") && name != ".\($0)" }) else {
            throw StageError("property \(property)=\(text) must name a .\(extensions[0])\(extensions.count > 1 ? " (or .\(extensions.dropFirst().joined(separator: ", .")))" : "") file; the JSON goes beside it, .json")
        }
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw StageError("property \(property)=\(text): a { without its }")
            }
            let field = String(rest[rest.index(after: open)..<close])
            guard fields.contains(field) else {
                throw StageError("property \(property)=\(text): unknown field {\(field)}; the fields are \(fields.map { "{\($0)}" }.joined(separator: ", ")) and strftime's %Y, %m, %d, %H, %M, %S…\(counter ? "; %05d (a width) is the counter {n}" : "")")
            }
            rest = rest[rest.index(after: close)...]
        }
        self.text = text
        self.property = property
        self.fields = fields
        self.counter = counter
    }

    /// Whether the pattern holds the counter (`{n}`, or `%05d` where it counts): each file then
    /// has a new name without a suffix.
    var counts: Bool { text.contains("{n}") || (counter && Self.counterRange(in: text) != nil) }

    /// `%` then digits then `d`: the counter's conversion (its width).
    private static func counterRange(in text: String) -> (range: Range<String.Index>, width: Int, zeros: Bool)? {
        var i = text.startIndex
        while let percent = text[i...].firstIndex(of: "%") {
            var j = text.index(after: percent)
            if j < text.endIndex, text[j] == "%" { i = text.index(after: j); continue }
            let digits = text[j...].prefix { $0.isASCII && $0.isNumber }
            j = digits.endIndex
            if !digits.isEmpty, j < text.endIndex, text[j] == "d" {
                return (percent..<text.index(after: j), Int(digits) ?? 0, digits.hasPrefix("0"))
            }
            i = text.index(after: percent)
        }
        return nil
    }

    /// The path for one file: the counter, then strftime (so nothing a label holds is read as
    /// a `%` field), then the braces, whose values lose any `/` (a label never makes a folder).
    func expand(_ values: Values, at date: Date) -> String {
        var pattern = text
        if counter, let c = Self.counterRange(in: pattern) {
            let n = values["n"] ?? "0"
            let padded = String(repeating: c.zeros ? "0" : " ", count: max(0, min(c.width, 20) - n.count)) + n
            pattern.replaceSubrange(c.range, with: padded)
        }
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = strftime(&buffer, buffer.count, pattern, &parts)
        // strftime returns 0 for an empty result and for one that does not fit: keep the text then.
        var out = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : pattern
        func clean(_ s: String) -> String {
            // A control character (a line break) in a file name would break every log line and
            // listing that shows it.
            let t = String(String.UnicodeScalarView(s.unicodeScalars.map { $0 == "/" || $0.properties.generalCategory == .control ? "_" : $0 }))
            return t.isEmpty ? "_" : t
        }
        for field in fields {
            out = out.replacingOccurrences(of: "{\(field)}", with: clean(values[field] ?? ""))
        }
        return out
    }
}

/// Paths taken apart, and folders made as `mkdir -p` makes them. (Not NSString's path methods:
/// swift-corelibs-foundation's deletingLastPathComponent traps on some relative paths.)
enum Folders {
    /// What is before the last `/` ("" for a bare name, "/" for a file at the root).
    static func folder(_ path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.hasSuffix("/") { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/") else { return "" }
        if slash == p.startIndex { return "/" }
        var f = p[..<slash]
        while f.count > 1, f.hasSuffix("/") { f = f.dropLast() }
        return String(f)
    }

    /// What is after the last `/`.
    static func name(_ path: String) -> String {
        path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
    }

    /// The extension of the name, without its dot ("" when none).
    static func fileExtension(_ path: String) -> String {
        let n = name(path)
        guard let dot = n.lastIndex(of: "."), dot != n.startIndex else { return "" }
        return String(n[n.index(after: dot)...])
    }

    /// Makes the folder and those above it; nil when it exists or was made, else what failed.
    static func make(_ path: String) -> String? {
        guard !path.isEmpty else { return nil }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            return isFolder.boolValue ? nil : "\(path) is a file, not a folder"
        }
        let parent = Folders.folder(path)
        if parent != path, !parent.isEmpty, parent != "/", let problem = make(parent) { return problem }
        if mkdir(path, 0o777) != 0 && errno != EEXIST {
            return "cannot make folder \(path) (\(String(cString: strerror(errno))))"
        }
        return nil
    }
}

/// The files a stage wrote with one pattern, found again in a folder (an earlier run's too): a
/// .json whose `stage` and `pattern` are the given ones and whose `fileKey` names the file
/// beside it (same name, its own extension). lenssnapshot's folder limit and lensrecord's
/// retention delete only these; nothing else in the folder is counted or touched.
enum OwnedFiles {
    struct Entry {
        /// The file (folder included) and its JSON.
        var file: String
        var json: String
        /// Both together.
        var bytes: Int
        /// The JSON's modification time, seconds since 1970.
        var time: Double
    }

    /// Oldest first (by the JSON's modification time, then name).
    static func index(_ folder: String, stage: String, pattern: String, fileKey: String) -> [Entry] {
        let dir = folder.isEmpty ? "." : folder
        let prefix = folder.isEmpty ? "" : folder + "/"
        var entries: [Entry] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] where name.hasSuffix(".json") {
            let json = prefix + name
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: json),
                  (attributes[.size] as? Int ?? .max) < 10_000_000,
                  let data = FileManager.default.contents(atPath: json),
                  let marker = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
                  marker["stage"] as? String == stage, marker["pattern"] as? String == pattern,
                  let own = marker[fileKey] as? String, !own.contains("/"),
                  String(name.dropLast(5)) + "." + Folders.fileExtension(own) == own else { continue }
            let file = prefix + own
            guard let size = (try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int else { continue }
            let time = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            entries.append(Entry(file: file, json: json, bytes: size + data.count, time: time))
        }
        return entries.sorted { ($0.time, $0.file) < ($1.time, $1.file) }
    }
}
