import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files a run reads at start-up (manifests, models, style pictures, credentials) must be
/// regular files: reading a named pipe (FIFO) blocks until someone writes to it, so a FIFO given
/// as `style-image` or `model` would hang the start with no word. Each reader asks first.
public enum InputFile {
    /// Why `path` cannot be read as a file — "a named pipe (FIFO), not a file", "a folder, not a
    /// file", "a device, not a file" — or nil for a regular file or one that does not exist (the
    /// reader says "not found" in its own words).
    public static func notAFile(_ path: String) -> String? {
        guard let type = fileType(path) else { return nil }
        switch type {
        case S_IFREG: return nil
        case S_IFIFO: return "a named pipe (FIFO), not a file"
        case S_IFDIR: return "a folder, not a file"
        case S_IFSOCK: return "a socket, not a file"
        default: return "a device, not a file"
        }
    }

    /// Whether `path` is a named pipe (FIFO): an output written into one is opened without
    /// waiting for its reader (FileWriter).
    public static func isNamedPipe(_ path: String) -> Bool { fileType(path) == S_IFIFO }

    /// The file's type (`S_IFREG`, `S_IFIFO`…), following links; nil when it does not exist.
    static func fileType(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & S_IFMT
    }

    /// Throws `<what> <path> is …` when it is not a regular file.
    public static func check(_ path: String, what: String) throws {
        if let reason = notAFile(path) { throw StageError("\(what) \(path) is \(reason)") }
    }
}
