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

/// The control channel: changes element properties of a running pipeline from text commands
/// (see `ControlCommand`). A StreamLens stage's property is checked against its table first
/// (exists, may change while playing, type and range), then set with g_object_set like any
/// element's; the stage picks the new value up between two frames. A bad command changes
/// nothing and is answered with an error; a `set` of several properties is all or nothing.
///
/// The socket is this user's alone (mode 0600, the peer's uid checked with SO_PEERCRED), or a
/// chosen group's too; at most `maxClients` at once, lines of at most `maxLine` bytes.
///
/// @unchecked Sendable: the pipeline is a reference-counted GstObject (held until deinit) whose
/// properties GObject lets any thread set; `listener` is written before the accept thread
/// starts and closed once by `stop()`; `clients` is atomic.
final class ControlChannel: @unchecked Sendable {
    private let pipeline: UnsafeMutablePointer<GstElement>
    private let echo: Bool
    private let access: ControlAccess
    private var listener: Int32 = -1
    private var socketPath: String?
    private let clients = Atomic<Int>(0)
    /// The group's id when `access.group` is set.
    private var groupID: gid_t?
    static let maxClients = 8
    static let maxLine = 4096

    init(pipeline: UnsafeMutablePointer<GstElement>, echo: Bool, access: ControlAccess = ControlAccess()) {
        self.pipeline = pipeline
        self.echo = echo
        self.access = access
        gst_object_ref(pipeline)
    }

    deinit { gst_object_unref(pipeline) }

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
                        Self.send(client, "error: too many control clients at once (at most \(Self.maxClients))")
                        clients.subtract(1, ordering: .relaxed)
                        close(client)
                        continue
                    }
                    Thread.detachNewThread { [self] in
                        defer { clients.subtract(1, ordering: .relaxed) }
                        serve(client)
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

    /// Writes one reply line; false when the client is gone (MSG_NOSIGNAL: a client that hung up
    /// makes the write fail, it does not end the process with SIGPIPE).
    @discardableResult
    private static func send(_ client: Int32, _ line: String) -> Bool {
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let w = bytes[sent...].withUnsafeBytes { Glibc.send(client, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if w < 0 && errno == EINTR { continue }
            if w <= 0 { return false }
            sent += w
        }
        return true
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

    /// One client: a reply line for every command line, until it hangs up.
    private func serve(_ client: Int32) {
        defer { close(client) }
        guard allowed(client) else {
            Self.send(client, "error: not allowed: the control socket takes commands from its owner only" + (access.group.map { " and group \($0)" } ?? ""))
            return
        }
        var pending = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(client, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            pending.append(contentsOf: chunk[0..<n])
            while let newline = pending.firstIndex(of: 0x0A) {
                guard newline - pending.startIndex <= Self.maxLine else {
                    Self.send(client, "error: a command line longer than \(Self.maxLine) bytes")
                    return
                }
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                let reply = execute(line)
                if echo || reply.hasPrefix("error") {
                    writeStderr("control: \(reply.hasPrefix("error") ? reply : line.trimmingCharacters(in: .whitespaces))\n")
                }
                guard Self.send(client, reply) else { return }
            }
            if pending.count > Self.maxLine {
                Self.send(client, "error: a command line longer than \(Self.maxLine) bytes")
                return
            }
        }
    }

    /// Carries out one command line and returns the reply (also used by tests).
    func execute(_ line: String) -> String {
        do {
            guard let command = try ControlCommand.parse(line) else { return "ok" }
            switch command {
            case .help:
                return ControlCommand.usage.replacingOccurrences(of: "\n", with: " ")
            case .list:
                return stageElements().map { describe($0) }.joined(separator: "; ")
            case .get(let name, let property):
                let element = try target(name)
                defer { gst_object_unref(element) }
                guard sl_object_property_flags(element, property) != 0 else {
                    throw ControlError("\(objectName(element)) has no property \(property)")
                }
                if stageDescriptor(of: element) == nil, Self.looksSecret(property) {
                    throw ControlError("property \(property) of \(objectName(element)) is not shown (it may hold a secret)")
                }
                return takeString(sl_object_get_as_string(element, property)) ?? ""
            case .set(let name, let assignments):
                let element = try target(name)
                defer { gst_object_unref(element) }
                let elementName = objectName(element)
                // Check every assignment before applying any: a bad line changes nothing.
                let descriptor = stageDescriptor(of: element)
                for (property, value) in assignments {
                    let flags = sl_object_property_flags(element, property)
                    guard flags != 0 else {
                        let live = descriptor.map { " (live properties: \($0.properties.filter(\.live).map(\.name).joined(separator: ", ")))" } ?? ""
                        throw ControlError("\(elementName) has no property \(property)\(live)")
                    }
                    guard flags & UInt32(SL_PROPERTY_WRITABLE) != 0 else { throw ControlError("property \(property) of \(elementName) cannot be set") }
                    if let descriptor, let spec = descriptor.properties.first(where: { $0.name == property }) {
                        guard !spec.readOnly else { throw ControlError("property \(property) of \(elementName) is a reading: get it, it cannot be set") }
                        guard spec.live else {
                            let live = descriptor.properties.filter(\.live).map(\.name).joined(separator: ", ")
                            throw ControlError("property \(property) of \(elementName) cannot change while the pipeline runs (live: \(live))")
                        }
                        do { _ = try spec.parse(value) } catch let e as StageError { throw ControlError("\(elementName): \(e.message)") }
                    } else if flags & UInt32(SL_PROPERTY_MUTABLE_PLAYING) == 0 {
                        throw ControlError("property \(property) of \(elementName) cannot change while the pipeline runs (GStreamer marks it neither changeable while playing nor controllable)")
                    }
                    guard sl_object_value_valid(element, property, value) != 0 else {
                        throw ControlError("'\(value)' is not a valid value for property \(property) of \(elementName)")
                    }
                }
                for (property, value) in assignments { _ = sl_object_set_checked(element, property, value) }
                return "ok"
            }
        } catch let error as ControlError {
            return "error: \(error.message)"
        } catch {
            return "error: \(error)"
        }
    }

    /// Property names that usually hold a password or a key: never read back to a client.
    static func looksSecret(_ property: String) -> Bool {
        let p = property.lowercased()
        return ["pass", "pw", "secret", "token", "credential", "key"].contains { p.contains($0) } && !p.contains("key-int")
    }

    /// The element a command names (a new reference), or the only StreamLens stage. Without
    /// --control-elements only stages are reached; a stage's inner parts (its bridge's appsink
    /// and appsrc) never.
    private func target(_ name: String?) throws -> UnsafeMutablePointer<GstElement> {
        let bin = UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self)
        if let name {
            guard let element = gst_bin_get_by_name(bin, name), !isInsideAStage(element) else {
                let names = stageElements().map { objectName($0) }
                throw ControlError("no element named \(name)" + (names.isEmpty ? "" : " (stages: \(names.joined(separator: ", ")))"))
            }
            if sl_is_stage(element) == 0 && !access.otherElements {
                gst_object_unref(element)
                throw ControlError("\(name) is not a StreamLens stage: other elements' properties are reached only with --control-elements (and only those GStreamer marks as changeable while playing or controllable)")
            }
            return element
        }
        let stages = stageElements()
        guard stages.count == 1 else {
            throw ControlError(stages.isEmpty ? "the pipeline has no StreamLens stage; name the element"
                                              : "the pipeline has \(stages.count) stages (\(stages.map { objectName($0) }.joined(separator: ", "))); name one")
        }
        gst_object_ref(stages[0])
        return stages[0]
    }

    /// An element that is part of a stage's bridge (found by gst_bin_get_by_name, which looks
    /// into every bin).
    private func isInsideAStage(_ element: UnsafeMutablePointer<GstElement>) -> Bool {
        var parent = gst_object_get_parent(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self))
        while let current = parent {
            defer { gst_object_unref(current) }
            if sl_is_stage(UnsafeMutableRawPointer(current).assumingMemoryBound(to: GstElement.self)) != 0 {
                gst_object_unref(element)
                return true
            }
            parent = gst_object_get_parent(current)
        }
        return false
    }

    /// The pipeline's StreamLens stages (borrowed references: the pipeline holds them).
    private func stageElements() -> [UnsafeMutablePointer<GstElement>] {
        var result: [UnsafeMutablePointer<GstElement>] = []
        let it = gst_bin_iterate_recurse(UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self))
        defer { gst_iterator_free(it) }
        var value = GValue()
        while gst_iterator_next(it, &value) == GST_ITERATOR_OK {
            if let object = g_value_get_object(&value) {
                let element = object.assumingMemoryBound(to: GstElement.self)
                if sl_is_stage(element) != 0 { result.append(element) }
            }
            g_value_unset(&value)
        }
        return result.sorted { objectName($0) < objectName($1) }
    }

    private func stageDescriptor(of element: UnsafeMutablePointer<GstElement>) -> StageDescriptor? {
        guard sl_is_stage(element) != 0, let factory = sl_element_factory_name(element).map({ String(cString: $0) }) else { return nil }
        return StageElements.registry.withLock { $0.first { $0.descriptor.name == factory }?.descriptor }
    }

    private func describe(_ element: UnsafeMutablePointer<GstElement>) -> String {
        let name = objectName(element)
        guard let d = stageDescriptor(of: element) else { return name }
        let values = d.properties.filter(\.live).map { "\($0.name)=\(takeString(sl_object_get_as_string(element, $0.name)) ?? "")" }
        return "\(name) (\(d.name)): " + values.joined(separator: " ")
    }

    /// A listening Unix socket at `path`, this user's only (0600), or also `group`'s (0660).
    /// Something already at the path is replaced only when it is a socket of this user that
    /// nobody listens on (left by a process that died); anything else — a file, a folder, a
    /// socket in use or someone else's — is an error and stays as it is.
    static func listen(at path: String, group: gid_t? = nil) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else { throw HostError(.runtime, "control socket path \(path) is longer than \(capacity - 1) bytes") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.size)
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw HostError(.runtime, "control socket path \(path) exists and is not a socket; it is left alone (choose another path)")
            }
            guard info.st_uid == getuid() else {
                throw HostError(.runtime, "control socket \(path) belongs to another user; it is left alone (choose another path)")
            }
            // Someone listening, or a socket left by a process that died?
            let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, length) } }
            close(probe)
            if connected == 0 { throw HostError(.runtime, "control socket \(path) is in use by another process") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HostError(.runtime, "cannot make a control socket: \(String(cString: strerror(errno)))") }
        // The file is made by bind() under the umask: made private from the start (a umask of
        // 000 would otherwise leave it open to everyone for a moment), then given its mode.
        let mask = umask(0o177)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
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
        guard Glibc.listen(fd, 8) == 0 else {
            let e = errno
            close(fd)
            unlink(path)
            throw HostError(.runtime, "cannot listen on control socket \(path): \(String(cString: strerror(e)))")
        }
        return fd
    }
}
