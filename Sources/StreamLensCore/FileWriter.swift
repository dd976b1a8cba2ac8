import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Records to a file, a named pipe or standard output, written from the writer's own
/// `OutputQueue` so that a destination that stalls — a FIFO whose reader stopped reading, a
/// standard output piped to a program that never reads — costs records, never frames: `write`
/// never waits. Files are opened non-blocking (opening a FIFO never waits for its reader) and
/// written with poll(2) on the queue's thread.
///
/// An output may fail — a full disk, a pipe whose reader went away — without taking the process
/// down: Foundation's `FileHandle.write` traps on any write error, so StreamLens writes with
/// write(2) and keeps the first failure for the user; after it, nothing more is written.
public final class FileWriter: Sendable {
    /// The path, or "standard output".
    public let name: String
    private let fd: Int32
    private let ownsDescriptor: Bool
    private let nonBlocking: Bool
    private let queue: OutputQueue
    private let failure = Mutex<(text: String?, said: Bool)>((nil, false))

    private init(name: String, fd: Int32, owns: Bool) {
        self.name = name
        self.fd = fd
        ownsDescriptor = owns
        nonBlocking = fcntl(fd, F_GETFL) & O_NONBLOCK != 0
        queue = OutputQueue(name: "streamlens.writer")
    }

    /// Standard output. A pipe is opened anew, non-blocking (/proc/self/fd/1: a file
    /// description of our own, so the flag does not reach the other programs on that pipe);
    /// anything else (a file, whose offset is shared; a terminal) is written as the shell gave it.
    public static func standardOutput() -> FileWriter {
        var s = stat()
        if fstat(1, &s) == 0, (s.st_mode & S_IFMT) == S_IFIFO {
            let fd = open("/proc/self/fd/1", O_WRONLY | O_CLOEXEC | O_NONBLOCK)
            if fd >= 0 { return FileWriter(name: "standard output", fd: fd, owns: true) }
        }
        return FileWriter(name: "standard output", fd: 1, owns: false)
    }

    /// Creates `path`, or empties it (a named pipe is opened as it is); the reason when it
    /// cannot be opened, the file called `what` ("metadata file"). A named pipe that nobody has
    /// open for reading is refused: writing into it would wait for ever.
    public static func create(_ path: String, what: String = "file") -> Result<FileWriter, StageError> {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0o666)
        guard fd >= 0 else {
            if errno == ENXIO {
                return .failure(StageError("\(what) \(path) is a named pipe (FIFO) that nobody has open for reading; start its reader first"))
            }
            return .failure(StageError("cannot write \(what) \(path): \(String(cString: strerror(errno)))"))
        }
        return .success(FileWriter(name: path, fd: fd, owns: true))
    }

    deinit { if ownsDescriptor { close(fd) } }

    /// Queues all of `data` for writing; never waits. `.dropped` when the queue is full (the
    /// reader is not keeping up); after a failure nothing more is written.
    @discardableResult
    public func write(_ data: Data) -> OutputQueue.Submission {
        // The job keeps the writer (and its descriptor) until it has run.
        queue.submit { [self] queue in
            guard failure.withLock({ $0.text == nil }) else { return }
            if let error = Self.writeAll(fd, data, nonBlocking: nonBlocking, givingUp: { queue.givingUp }), error != ECANCELED {
                failure.withLock { $0.text = String(cString: strerror(error)) }
            }
        }
    }

    /// The first write error, e.g. "No space left on device", once (nil while all is well or
    /// after it was taken).
    public func takeFailure() -> String? {
        failure.withLock { f in
            guard let text = f.text, !f.said else { return nil }
            f.said = true
            return text
        }
    }

    public var counts: OutputQueue.Counts { queue.counts }

    /// End: waits (bounded, `OutputQueue.finish`) for the queued records to be written.
    @discardableResult
    public func finish(quiet: Double = 2, atMost: Double = 10) -> OutputQueue.Counts { queue.finish(quiet: quiet, atMost: atMost) }

    /// write(2) until all of `data` is out; the errno of a failure, ECANCELED when `givingUp`
    /// turned true. A non-blocking descriptor is written first and waited for in poll(2) when
    /// full (poll alone can say "full" while a pipe's last page still has room). A blocking one
    /// (standard output as the shell gave it: a file, a terminal) is waited for first and
    /// written at most PIPE_BUF at a time, which fits whenever poll says it does.
    /// `givingUp` nil: blocking writes, never waiting in poll (standard error).
    static func writeAll(_ fd: Int32, _ data: Data, nonBlocking: Bool = false, givingUp: (() -> Bool)? = nil) -> Int32? {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int32? in
            guard let base = bytes.baseAddress else { return nil }
            var offset = 0
            var full = false
            while offset < bytes.count {
                if let givingUp, full || !nonBlocking {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    let ready = poll(&p, 1, 100)
                    if ready == 0 || (ready < 0 && errno == EINTR) {
                        if givingUp() { return ECANCELED }
                        continue
                    }
                }
                let n = Glibc.write(fd, base + offset, givingUp != nil && !nonBlocking ? min(bytes.count - offset, Int(PIPE_BUF)) : bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN, givingUp != nil { full = true; continue }
                    return errno
                }
                full = false
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
