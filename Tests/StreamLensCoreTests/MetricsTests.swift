import Foundation
import StreamLensCore
import StreamLensMetrics
import Testing

/// The Prometheus text a registry renders, and the metrics server's answers to requests good
/// and bad. (The page as a whole is checked by Prometheus' own promtool in CLITests/MetricsTests,
/// scraped from a running pipeline.)
@Suite struct MetricsTests {
    @Test func histogramBucketsAreCumulativeWithSumAndCount() {
        var h = Histogram(bounds: [0.01, 0.1, 1])
        for v in [0.005, 0.01, 0.05, 0.5, 2, .nan] { h.observe(v) }
        #expect(h.cumulative == [2, 3, 4])
        #expect(h.count == 5)
        #expect(abs(h.sum - 2.565) < 1e-12)
        let text = MetricsRegistry.exposition([.histogram("streamlens_x_seconds", "x", labels: [("stage", "a")], h)])
        #expect(text == """
            # HELP streamlens_x_seconds x
            # TYPE streamlens_x_seconds histogram
            streamlens_x_seconds_bucket{stage="a",le="0.01"} 2
            streamlens_x_seconds_bucket{stage="a",le="0.1"} 3
            streamlens_x_seconds_bucket{stage="a",le="1"} 4
            streamlens_x_seconds_bucket{stage="a",le="+Inf"} 5
            streamlens_x_seconds_sum{stage="a"} 2.565
            streamlens_x_seconds_count{stage="a"} 5

            """)
    }

    @Test func familiesAreGroupedSortedEscapedAndNeverInvalid() {
        let text = MetricsRegistry.exposition([
            .counter("streamlens_b_total", "second\nline", labels: [("stage", "s1")], 3),
            .gauge("streamlens_a", "first", labels: [("model", "C:\\m \"q\"\nx")], 1.5),
            .counter("streamlens_b_total", "", labels: [("stage", "s2")], 4),
            .counter("streamlens_b_total", "", labels: [("stage", "s2")], 9), // same labels again: left out
            .gauge("streamlens_b_total", "another type", 1), // the family is a counter: left out
            .gauge("bad name", "", 1), .gauge("streamlens_c", "", labels: [("__reserved", "x")], 1),
        ])
        #expect(text == """
            # HELP streamlens_a first
            # TYPE streamlens_a gauge
            streamlens_a{model="C:\\\\m \\"q\\"\\nx"} 1.5
            # HELP streamlens_b_total second\\nline
            # TYPE streamlens_b_total counter
            streamlens_b_total{stage="s1"} 3
            streamlens_b_total{stage="s2"} 4

            """)
    }

    @Test func publishingReplacesASourceAndCollectorsAreAskedAtEachScrape() {
        let registry = MetricsRegistry()
        let source = registry.newSource()
        registry.publish([.counter("streamlens_n_total", "n", 1)], source: source)
        registry.publish([.counter("streamlens_n_total", "n", 2)], source: source)
        let asked = Counter()
        _ = registry.addCollector { [.gauge("streamlens_asked", "asked", Double(asked.next()))] }
        #expect(registry.exposition().contains("streamlens_n_total 2\n"))
        #expect(!registry.exposition().contains("streamlens_n_total 1\n"))
        #expect(registry.exposition().contains("streamlens_asked 3\n"))
        registry.remove(source: source)
        #expect(!registry.exposition().contains("streamlens_n_total"))
    }

    @Test func addressesParseOrSayWhatIsWrong() throws {
        #expect(try MetricsServer.Address(parsing: "9464") == MetricsServer.Address(parsing: "127.0.0.1:9464"))
        let any = try MetricsServer.Address(parsing: "0.0.0.0:9100")
        #expect(any.host == "0.0.0.0" && any.port == 9100 && !any.isLoopback)
        let v6 = try MetricsServer.Address(parsing: "[::1]:9464")
        #expect(v6.host == "::1" && v6.isLoopback && v6.url == "http://[::1]:9464/metrics")
        for (text, message) in [("0", "the port must be a number from 1 to 65535"), ("70000", "the port must be"),
                                ("::1:9464", "an IPv6 address goes in brackets"), (":9464", "the address is empty"),
                                ("[::1]9464", "an IPv6 address goes in brackets")] {
            #expect(throws: MetricsServerError.self, "\(text)") { try MetricsServer.Address(parsing: text) }
            do { _ = try MetricsServer.Address(parsing: text) } catch { #expect("\(error)".contains(message), "\(text): \(error)") }
        }
    }

    /// Real requests over loopback, good and hostile; the server keeps answering after each.
    @Test func theServerAnswersOnlyWhatItServesAndSurvivesBadClients() throws {
        let registry = MetricsRegistry()
        registry.publish([.gauge("streamlens_up", "up", 1)], source: registry.newSource())
        var server: MetricsServer?
        for _ in 0..<20 where server == nil {
            server = try? MetricsServer(address: MetricsServer.Address(parsing: "\(Int.random(in: 20000...40000))"), registry: registry)
        }
        let s = try #require(server)
        defer { s.stop() }
        let port = s.address.port
        // A second server on the same port: refused, with the reason.
        #expect(throws: MetricsServerError.self) { try MetricsServer(address: s.address, registry: registry) }
        do { _ = try MetricsServer(address: s.address, registry: registry) } catch { #expect("\(error)".contains("the port is in use")) }

        let ok = try exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(ok)")
        #expect(ok.contains("Content-Type: text/plain; version=0.0.4"))
        #expect(ok.hasSuffix("streamlens_up 1\n"))
        let head = try exchange(port, "HEAD /metrics HTTP/1.0\r\n\r\n")
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.hasSuffix("\r\n\r\n"), "\(head)")
        #expect(try exchange(port, "GET /metrics?x=1 HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 200 OK"))
        #expect(try exchange(port, "GET /other HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 404 "))
        #expect(try exchange(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").hasPrefix("HTTP/1.1 405 "))
        #expect(try exchange(port, "hello\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        #expect(try exchange(port, "GET /metrics HTTP/1.1\r\nX: " + String(repeating: "a", count: 20000) + "\r\n\r\n").hasPrefix("HTTP/1.1 431 "))
        // Clients that connect and say nothing: the others are still answered meanwhile, and
        // beyond maxConnections at once a client is told so at once.
        var silent: [Int32] = []
        defer { silent.forEach { close($0) } }
        for _ in 0..<MetricsServer.maxConnections { silent.append(try connectTo(port)) }
        // The silent ones are accepted in order; wait until the server holds all of them.
        let deadline = Date().addingTimeInterval(10)
        var busy = ""
        while Date() < deadline {
            busy = try exchange(port, "GET /metrics HTTP/1.1\r\n\r\n")
            if busy.hasPrefix("HTTP/1.1 503 ") { break }
            usleep(20_000)
        }
        #expect(busy.hasPrefix("HTTP/1.1 503 "), "\(busy)")
        silent.forEach { close($0) }
        silent = []
        var back = ""
        while Date() < deadline.addingTimeInterval(10) {
            back = try exchange(port, "GET /metrics HTTP/1.1\r\n\r\n")
            if back.hasPrefix("HTTP/1.1 200 ") { break }
            usleep(20_000)
        }
        #expect(back.hasPrefix("HTTP/1.1 200 "), "\(back)")
    }

    private final class Counter: @unchecked Sendable {
        private var n = 0
        private let lock = NSLock()
        func next() -> Int { lock.lock(); defer { lock.unlock() }; n += 1; return n }
    }

    private func connectTo(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard r == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    /// Sends `request`, reads until the server closes (it answers once per connection).
    private func exchange(_ port: Int, _ request: String) throws -> String {
        let fd = try connectTo(port)
        defer { close(fd) }
        var t = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            answer += chunk[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}
