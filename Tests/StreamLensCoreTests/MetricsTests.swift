import Foundation
import StreamLensCore
import StreamLensMetrics
import Testing

/// The Prometheus text a registry renders. (The server is HTTPServerTests'; the page as a whole is checked by Prometheus' own promtool in CLITests/MetricsTests,
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
}

private final class Counter: @unchecked Sendable {
    private var n = 0
    private let lock = NSLock()
    func next() -> Int { lock.lock(); defer { lock.unlock() }; n += 1; return n }
}
