import CGStreamer
import CGstShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import StreamLensCore
import Synchronization

/// Where control commands come from (`streamlens run --control -|PATH`).
public enum ControlSource: Sendable, Equatable {
    /// Lines typed on standard input; results and errors go to stderr.
    case standardInput
    /// A Unix stream socket at this path: a few clients at once, one command per line, one
    /// reply per command ("ok", "error: …", or the value asked for).
    case socket(path: String)
}

/// Linux's `struct ucred` (pid, uid, gid), which Glibc's module leaves out without _GNU_SOURCE:
/// what getsockopt(SO_PEERCRED) fills in.
private struct PeerCredentials {
    var pid: Int32 = 0
    var uid: uid_t = 0
    var gid: gid_t = 0
}

/// Who may use the control channel, and what it reaches.
public struct ControlAccess: Sendable, Equatable {
    /// Other elements' properties too — those GStreamer marks changeable while playing or
    /// controllable — besides the StreamLens stages' live ones (`--control-elements`). Off by
    /// default: a sink's `location` or a source's credentials are not the control channel's
    /// business.
    public var otherElements = false
    /// A group whose members may connect as well (`--control-group`): the socket is then 0660
    /// and owned by that group. nil: only this user (0600).
    public var group: String?
    public init(otherElements: Bool = false, group: String? = nil) {
        self.otherElements = otherElements
        self.group = group
    }
}

/// The control channel: command lines from standard input or a Unix socket, each answered by
/// its handler with one line — a pipeline's `PipelineCommands`, or `streamlens serve`'s
/// `SourceSet`.
///
/// The socket is this user's alone (mode 0600, the peer's uid checked with SO_PEERCRED), or a
/// chosen group's too; at most `maxClients` at once, lines of at most `maxLine` bytes, and each
/// client under `deadlines` (`PeerConnection`): closed with a line saying so when it sends nothing
/// for 10 s, or takes more than 10 s over one command line or its reply — so idle clients cannot
/// hold every slot for good.
///
/// @unchecked Sendable: `listener` is written before the accept thread starts and closed once
/// by `stop()`; `clients` is atomic; the handler is Sendable.
final class ControlChannel: @unchecked Sendable {
    private let handler: @Sendable (String) -> String
    private let echo: Bool
    private let access: ControlAccess
    private var listener: Int32 = -1
    private var socketPath: String?
    private let clients = Atomic<Int>(0)
    private let refusals = PeerRefusals(limit: ControlChannel.maxClients)
    /// The group's id when `access.group` is set.
    private var groupID: gid_t?
    static let maxClients = 8
    static let maxLine = 4096
    static let deadlines = PeerDeadlines(idle: .seconds(10), exchange: .seconds(10))
    /// Connections the kernel holds until accepted (each then answered, if only with "too many").
    static let backlog: Int32 = 32

    /// A channel whose lines `handler` answers (one reply line each).
    init(echo: Bool, access: ControlAccess = ControlAccess(), handler: @escaping @Sendable (String) -> String) {
        self.handler = handler
        self.echo = echo
        self.access = access
    }

    /// A channel for one pipeline's elements (`PipelineCommands`).
    convenience init(pipeline: UnsafeMutablePointer<GstElement>, echo: Bool, access: ControlAccess = ControlAccess()) {
        let commands = PipelineCommands(pipeline: pipeline, access: access)
        self.init(echo: echo, access: access, handler: { commands.execute($0) })
    }

    /// Starts reading commands on their own thread(s). Throws when the socket cannot be made.
    func start(_ source: ControlSource) throws {
        switch source {
        case .standardInput:
            Thread.detachNewThread { [self] in
                while let line = readLine() {
                    let reply = execute(line)
                    if reply.hasPrefix("error") || !reply.hasPrefix("ok") || echo {
                        writeStderr("control: \(reply.hasPrefix("ok") ? line.trimmingCharacters(in: .whitespaces) : reply)\n")
                    }
                }
            }
        case .socket(let path):
            if let group = access.group {
                guard let entry = getgrnam(group) else { throw HostError(.spec, "--control-group \(group): no such group") }
                groupID = entry.pointee.gr_gid
            }
            listener = try Self.listen(at: path, group: groupID)
            socketPath = path
            let fd = listener
            Thread.detachNewThread { [self] in
                while true {
                    let client = accept(fd, nil, nil)
                    if client < 0 {
                        if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE { usleep(10_000); continue }
                        return // closed by stop()
                    }
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    if clients.add(1, ordering: .relaxed).newValue > Self.maxClients {
                        clients.subtract(1, ordering: .relaxed)
                        refusals.refuse(client, answer: Array("error: too many control clients at once (at most \(Self.maxClients)); one idle for \(Self.deadlines.idle.components.seconds) s is closed\n".utf8), drainingAtMost: Self.maxLine)
                        continue
                    }
                    Thread.detachNewThread { [self] in
                        defer { clients.subtract(1, ordering: .relaxed) }
                        serve(PeerConnection(fd: client, deadlines: Self.deadlines))
                    }
                }
            }
        }
    }

    func stop() {
        if listener >= 0 {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
            listener = -1
        }
        if let socketPath { unlink(socketPath) }
        socketPath = nil
    }

    /// Whether the peer of `client` may use the channel: this user (SO_PEERCRED), or with
    /// --control-group a member of that group.
    private func allowed(_ client: Int32) -> Bool {
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(client, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return false }
        if credentials.uid == getuid() { return true }
        guard let groupID else { return false }
        if credentials.gid == groupID { return true }
        guard let user = getpwuid(credentials.uid)?.pointee.pw_name else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        guard getgrouplist(user, credentials.gid, &groups, &count) >= 0 else { return false }
        return groups.prefix(Int(count)).contains(groupID)
    }

    /// One client: a reply line for every command line, until it hangs up or a deadline passes.
    /// An exchange is a command line's bytes and then its reply's; our own work on the command
    /// (a serve source's `add` waits for it to play) is not the client's time.
    private func serve(_ peer: PeerConnection) {
        guard allowed(peer.fd) else {
            peer.send("error: not allowed: the control socket takes commands from its owner only" + (access.group.map { " and group \($0)" } ?? "") + "\n")
            return
        }
        var pending = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            switch peer.receive(into: &chunk) {
            case .bytes(let n):
                if !peer.inExchange { peer.startExchange() }
                pending += chunk[0..<n]
            case .closed:
                return
            case .idle:
                peer.send("closing: idle for \(Self.deadlines.idle.components.seconds) s\n")
                return
            case .overtime:
                peer.send("closing: a command line not finished within \(Self.deadlines.exchange.components.seconds) s\n")
                return
            }
            while let newline = pending.firstIndex(of: 0x0A) {
                guard newline <= Self.maxLine else {
                    peer.send("error: a command line longer than \(Self.maxLine) bytes\n")
                    return
                }
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                let reply = execute(line)
                if echo || reply.hasPrefix("error") {
                    writeStderr("control: \(reply.hasPrefix("error") ? reply : line.trimmingCharacters(in: .whitespaces))\n")
                }
                peer.startExchange()
                guard peer.send(reply + "\n") else { return }
                peer.startExchange() // the next line's bytes, if some are here already
            }
            if pending.isEmpty { peer.endExchange() }
            if pending.count > Self.maxLine {
                peer.send("error: a command line longer than \(Self.maxLine) bytes\n")
                return
            }
        }
    }

    /// Carries out one command line and returns the reply.
    func execute(_ line: String) -> String { handler(line) }

    /// A listening Unix socket at `path`, this user's only (0600), or also `group`'s (0660).
    /// Something already at the path is replaced only when it is a socket of this user that
    /// nobody listens on (left by a process that died); anything else — a file, a folder, a
    /// socket in use or someone else's — is an error and stays as it is.
    static func listen(at path: String, group: gid_t? = nil) throws -> Int32 {
        guard let address = UnixSocketAddress(path: path) else {
            throw HostError(.runtime, "control socket path \(path) is longer than \(UnixSocketAddress.maxPathBytes) bytes")
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw HostError(.runtime, "control socket path \(path) exists and is not a socket; it is left alone (choose another path)")
            }
            guard info.st_uid == getuid() else {
                throw HostError(.runtime, "control socket \(path) belongs to another user; it is left alone (choose another path)")
            }
            // Someone listening, or a socket left by a process that died?
            if UnixSocketAddress.someoneListens(at: path) == true { throw HostError(.runtime, "control socket \(path) is in use by another process") }
            unlink(path)
        }
        let fd = Sockets.stream(family: AF_UNIX)
        guard fd >= 0 else { throw HostError(.runtime, "cannot make a control socket: \(String(cString: strerror(errno)))") }
        // The file is made by bind() under the umask: made private from the start (a umask of
        // 000 would otherwise leave it open to everyone for a moment), then given its mode.
        let mask = umask(0o177)
        let bound = address.bind(fd)
        let bindError = errno
        umask(mask)
        guard bound == 0 else {
            close(fd)
            throw HostError(.runtime, "cannot listen on control socket \(path): \(String(cString: strerror(bindError)))")
        }
        if let group {
            guard chown(path, uid_t.max, group) == 0, chmod(path, 0o660) == 0 else {
                let e = errno
                close(fd)
                unlink(path)
                throw HostError(.runtime, "control socket \(path): cannot give it to the group (\(String(cString: strerror(e))))")
            }
        } else {
            chmod(path, 0o600)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            unlink(path)
            throw HostError(.runtime, "cannot listen on control socket \(path): \(String(cString: strerror(e)))")
        }
        return fd
    }
}
