import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The POSIX socket chores the control channel, the metrics server, the inference client and
/// the preview's X server check each need.
public enum Sockets {
    /// A stream socket (socket(2)), closed on exec: a child a pipeline starts never inherits it.
    /// -1 with errno set when none could be made.
    public static func stream(family: Int32, protocol: Int32 = 0) -> Int32 {
        socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), `protocol`)
    }

    /// Turns an on/off option on (SO_REUSEADDR, TCP_NODELAY); failures are ignored (the socket
    /// works without it).
    public static func enable(_ fd: Int32, level: Int32, option: Int32) {
        var one: Int32 = 1
        setsockopt(fd, level, option, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// A Unix socket's address (sockaddr_un) for a path.
public struct UnixSocketAddress {
    private var address = sockaddr_un()

    /// The longest path an address holds, in bytes (the rest of sun_path is its final NUL).
    public static var maxPathBytes: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    /// nil when the path is longer than `maxPathBytes`.
    public init?(path: String) {
        guard path.utf8.count <= Self.maxPathBytes else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
    }

    /// connect(2) to this address; 0 when connected, else -1 with errno set.
    public func connect(_ fd: Int32) -> Int32 { withSockaddr { Glibc.connect(fd, $0, $1) } }

    /// bind(2) to this address; 0 when bound, else -1 with errno set.
    public func bind(_ fd: Int32) -> Int32 { withSockaddr { Glibc.bind(fd, $0, $1) } }

    private func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Whether a process listens at `path` (a connection is made and closed at once); nil when
    /// that cannot be told: the path is too long, or no socket could be made.
    public static func someoneListens(at path: String) -> Bool? {
        guard let address = UnixSocketAddress(path: path) else { return nil }
        let fd = Sockets.stream(family: AF_UNIX)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return address.connect(fd) == 0
    }
}
