import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An output that may fail — a full disk, a pipe whose reader went away — without taking the
/// process down. Foundation's `FileHandle.write` traps on any write error, so StreamLens writes
/// its own outputs (a stage's metadata file, standard error) with write(2) and keeps the first
/// failure for the user; after it, nothing more is written.
///
/// @unchecked Sendable: used by one thread at a time (a stage's worker), like a FileHandle.
public final class FileWriter: @unchecked Sendable {
    /// The path, or "standard output".
    public let name: String
    private let fd: Int32
    private let ownsDescriptor: Bool
    /// The first write error, e.g. "No space left on device"; nil while all is well.
    public private(set) var failure: String?

    private init(name: String, fd: Int32, owns: Bool) {
        self.name = name
        self.fd = fd
        ownsDescriptor = owns
    }

    /// Standard output (not closed when done).
    public static func standardOutput() -> FileWriter { FileWriter(name: "standard output", fd: 1, owns: false) }

    /// Creates `path`, or empties it; nil with the reason when it cannot be opened.
    public static func create(_ path: String) -> Result<FileWriter, StageError> {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { return .failure(StageError("cannot write \(path): \(String(cString: strerror(errno)))")) }
        return .success(FileWriter(name: path, fd: fd, owns: true))
    }

    deinit { if ownsDescriptor { close(fd) } }

    /// Writes all of `data`; false once a write has failed (now or before).
    @discardableResult
    public func write(_ data: Data) -> Bool {
        guard failure == nil else { return false }
        if let error = Self.writeAll(fd, data) {
            failure = String(cString: strerror(error))
            return false
        }
        return true
    }

    /// write(2) until all of `data` is out; the errno of a failure.
    static func writeAll(_ fd: Int32, _ data: Data) -> Int32? {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int32? in
            guard let base = bytes.baseAddress else { return nil }
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, base + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return nil
        }
    }
}

/// Text to standard error. When stderr is closed or full (`streamlens run … 2>&1 | head`) the
/// text is lost, never the run.
public func writeStandardError(_ text: String) {
    _ = FileWriter.writeAll(2, Data(text.utf8))
}
