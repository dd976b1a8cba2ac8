import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// Where control commands come from (`streamlens run --control -|PATH`).
public enum ControlSource: Sendable, Equatable {
    /// Lines typed on standard input; results and errors go to stderr.
    case standardInput
    /// A Unix stream socket at this path: any number of clients, one command per line, one
    /// reply per command ("ok", "error: …", or the value asked for).
    case socket(path: String)
}

/// The control channel: changes element properties of a running pipeline from text commands
/// (see `ControlCommand`). A StreamLens stage's property is checked against its table first
/// (exists, may change while playing, type and range), then set with g_object_set like any
/// element's; the stage picks the new value up between two frames. A bad command changes
/// nothing and is answered with an error.
///
/// @unchecked Sendable: the pipeline is a reference-counted GstObject (held until deinit) whose
/// properties GObject lets any thread set; `listener` is written before the accept thread
/// starts and closed once by `stop()`.
final class ControlChannel: @unchecked Sendable {
    private let pipeline: UnsafeMutablePointer<GstElement>
    private let echo: Bool
    private var listener: Int32 = -1
    private var socketPath: String?

    init(pipeline: UnsafeMutablePointer<GstElement>, echo: Bool) {
        self.pipeline = pipeline
        self.echo = echo
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
            listener = try Self.listen(at: path)
            socketPath = path
            let fd = listener
            Thread.detachNewThread { [self] in
                while true {
                    let client = accept(fd, nil, nil)
                    if client < 0 {
                        if errno == EINTR { continue }
                        return // closed by stop()
                    }
                    Thread.detachNewThread { [self] in serve(client) }
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

    /// One client: a reply line for every command line, until it hangs up.
    private func serve(_ client: Int32) {
        defer { close(client) }
        var pending = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(client, &chunk, chunk.count)
            if n <= 0 { return }
            pending.append(contentsOf: chunk[0..<n])
            while let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                let reply = execute(line)
                if echo || reply.hasPrefix("error") {
                    writeStderr("control: \(reply.hasPrefix("error") ? reply : line.trimmingCharacters(in: .whitespaces))\n")
                }
                let bytes = Array((reply + "\n").utf8)
                var sent = 0
                while sent < bytes.count {
                    let w = bytes[sent...].withUnsafeBytes { write(client, $0.baseAddress!, $0.count) }
                    if w <= 0 { return }
                    sent += w
                }
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
                        guard spec.live else {
                            let live = descriptor.properties.filter(\.live).map(\.name).joined(separator: ", ")
                            throw ControlError("property \(property) of \(elementName) cannot change while the pipeline runs (live: \(live))")
                        }
                        do { _ = try spec.parse(value) } catch let e as StageError { throw ControlError("\(elementName): \(e.message)") }
                    }
                }
                for (property, value) in assignments {
                    guard sl_object_set_checked(element, property, value) != 0 else {
                        throw ControlError("'\(value)' is not a valid value for property \(property) of \(elementName)")
                    }
                }
                return "ok"
            }
        } catch let error as ControlError {
            return "error: \(error.message)"
        } catch {
            return "error: \(error)"
        }
    }

    /// The element a command names (a new reference), or the only StreamLens stage.
    private func target(_ name: String?) throws -> UnsafeMutablePointer<GstElement> {
        let bin = UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self)
        if let name {
            guard let element = gst_bin_get_by_name(bin, name) else {
                let names = stageElements().map { objectName($0) }
                throw ControlError("no element named \(name)" + (names.isEmpty ? "" : " (stages: \(names.joined(separator: ", ")))"))
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

    /// A listening Unix socket at `path`. A stale socket file (nobody listening) is replaced;
    /// one in use is an error.
    static func listen(at path: String) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else { throw HostError(.runtime, "control socket path \(path) is longer than \(capacity - 1) bytes") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.size)
        func attempt() -> (fd: Int32, error: Int32) {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return (-1, errno) }
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            if bound == 0, Glibc.listen(fd, 8) == 0 { return (fd, 0) }
            let e = errno
            close(fd)
            return (-1, e)
        }
        var (fd, error) = attempt()
        if fd < 0, error == EADDRINUSE {
            // Someone listening, or a file left by a process that died?
            let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, length) } }
            close(probe)
            if connected == 0 { throw HostError(.runtime, "control socket \(path) is in use by another process") }
            unlink(path)
            (fd, error) = attempt()
        }
        guard fd >= 0 else { throw HostError(.runtime, "cannot listen on control socket \(path): \(String(cString: strerror(error)))") }
        return fd
    }
}
