import Foundation
import StreamLensCore

/// lenssnapshot's `path=`: a file name pattern with strftime fields (`%Y%m%d-%H%M%S`, from the
/// wall clock in local time, when the snapshot was triggered) and the snapshot's own fields in
/// braces. Checked once, at start; expanded for every snapshot.
struct SnapshotPattern: Equatable {
    /// What the braces may name.
    static let fields = ["frame", "id", "label", "event", "n"]

    /// The values of one snapshot's fields.
    struct Values {
        /// The frame's number (since the stage started).
        var frame: Int
        /// The object's id, "untracked" for a crop of a region without one, "frame" for a full frame.
        var id: String
        /// The region's label (a frame: the triggering regions' labels joined by +, "frame" if none).
        var label: String
        /// What triggered it: track, zone event type (crossed, entered, left), label, interval (+ joined).
        var event: String
        /// The stage's snapshot counter, 1 for the first.
        var n: Int
    }

    let text: String

    init(property text: String) throws {
        guard !text.isEmpty else { throw StageError("property path is empty: give a pattern such as snapshots/%Y%m%d-%H%M%S-{id}.jpg") }
        let name = Folders.name(text).lowercased()
        guard !text.hasSuffix("/"), name.hasSuffix(".jpg") || name.hasSuffix(".jpeg"), name != ".jpg", name != ".jpeg" else {
            throw StageError("property path=\(text) must name a .jpg (or .jpeg) file; the JSON goes beside it, .json")
        }
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw StageError("property path=\(text): a { without its }")
            }
            let field = String(rest[rest.index(after: open)..<close])
            guard Self.fields.contains(field) else {
                throw StageError("property path=\(text): unknown field {\(field)}; the fields are \(Self.fields.map { "{\($0)}" }.joined(separator: ", ")) and strftime's %Y, %m, %d, %H, %M, %S…")
            }
            rest = rest[rest.index(after: close)...]
        }
        self.text = text
    }

    /// The path for one snapshot: strftime first (so nothing a label holds is read as a `%`
    /// field), then the braces, whose values lose any `/` (a label never makes a folder).
    func expand(_ values: Values, at date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = strftime(&buffer, buffer.count, text, &parts)
        // strftime returns 0 for an empty result and for one that does not fit: keep the text then.
        var out = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : text
        func clean(_ s: String) -> String {
            let t = s.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "\0", with: "")
            return t.isEmpty ? "_" : t
        }
        for (field, value) in [("frame", String(values.frame)), ("id", values.id), ("label", values.label), ("event", values.event), ("n", String(values.n))] {
            out = out.replacingOccurrences(of: "{\(field)}", with: clean(value))
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
