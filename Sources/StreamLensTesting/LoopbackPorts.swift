import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 that was free a moment ago, from the kernel's ephemeral range: what a
/// test gives a server it starts, so that tests running side by side never share a port.
public func freeLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : 0
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (true), at most `timeout`
/// seconds: a test waits for a server to listen, never for a fixed time.
public func waitUntilListening(port: Int, timeout: Double) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    repeat {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        close(fd)
        if connected { return true }
        usleep(50_000)
    } while Date() < deadline
    return false
}

/// `count` different ports from freeLoopbackPort, for a test that starts several servers side by
/// side (a camera and a relay of it, two servers at once).
public func freeLoopbackPorts(_ count: Int) -> [Int] {
    var ports: [Int] = []
    while ports.count < count {
        let port = freeLoopbackPort()
        // 0 (no socket to ask with) is passed on: the server refuses it, and the test says so.
        if port == 0 || !ports.contains(port) { ports.append(port) }
    }
    return ports
}
