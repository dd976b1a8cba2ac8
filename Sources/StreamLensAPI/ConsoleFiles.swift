import Foundation

/// The browser console's static files (Sources/StreamLensAPI/Console: HTML, CSS and JavaScript,
/// no build step), read once at start. SwiftPM copies them beside the binary, into
/// `StreamLens_StreamLensAPI.resources/Console`; `STREAMLENS_CONSOLE=DIR` names another place
/// (a binary installed without them). Looked up here rather than through `Bundle.module`,
/// which stops the process when the directory is missing: without its files the API still
/// serves, and `/` says what is missing.
struct ConsoleFiles: Sendable {
    struct File: Sendable {
        var bytes: [UInt8]
        var type: String
    }
    private(set) var files: [String: File] = [:]
    /// Where they were read from, or where they were looked for (none found).
    let directory: String
    let found: Bool

    static let types = ["html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
                        "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon"]

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        var candidates: [String] = []
        if let dir = environment["STREAMLENS_CONSOLE"], !dir.isEmpty { candidates.append(dir) }
        if let main = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(main.deletingLastPathComponent().appendingPathComponent("StreamLens_StreamLensAPI.resources/Console").path)
        }
        let fm = FileManager.default
        let dir = candidates.first { fm.fileExists(atPath: $0 + "/index.html") }
        directory = dir ?? candidates.first ?? "StreamLens_StreamLensAPI.resources/Console"
        found = dir != nil
        guard let dir, let names = try? fm.contentsOfDirectory(atPath: dir) else { return }
        for name in names {
            let ext = (name as NSString).pathExtension.lowercased()
            guard let type = Self.types[ext], let data = fm.contents(atPath: dir + "/" + name), data.count <= 4 << 20 else { continue }
            files[name] = File(bytes: Array(data), type: type)
        }
    }

    func file(_ name: String) -> File? { files[name] }
}
