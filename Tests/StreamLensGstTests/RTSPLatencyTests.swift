import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensGst
import StreamLensTesting
import StreamLensStages
import Synchronization
import Testing

/// Monotonic clock in microseconds (the same clock in both pipelines: one process).
private func nowMicroseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000 + UInt64(t.tv_nsec) / 1000
}

/// Block layout of the time stamp: 48 bits, each a 16×16 block (black 0, white 1), 20 a row.
private let stampBits = 48, stampBlock = 16

/// Writes the time the worker handled the frame into its pixels (GRAY8), just upstream of lensrtsp.
final class StampStage: Stage {
    static let descriptor = StageDescriptor(name: "lensteststamp", summary: "stamps the time into the pixels (test)", example: "",
                                            sinkCaps: "video/x-raw,format=GRAY8", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        let stamp = nowMicroseconds(), stride = frame.format.strides[0], perRow = frame.format.width / stampBlock
        frame.pixels.withMutableBytes { bytes in
            for bit in 0..<stampBits {
                let value: UInt8 = (stamp >> UInt64(bit)) & 1 == 1 ? 255 : 0
                let x0 = (bit % perRow) * stampBlock, y0 = (bit / perRow) * stampBlock
                for y in y0..<y0 + stampBlock { for x in x0..<x0 + stampBlock { bytes[y * stride + x] = value } }
            }
        }
        return .forward
    }
}

/// Reads the stamp back from decoded frames (a player's end) and records now minus stamp.
final class StampReaderStage: Stage {
    static let descriptor = StageDescriptor(name: "lensteststampread", summary: "reads the time stamp back (test)", example: "",
                                            sinkCaps: "video/x-raw,format=GRAY8", isSink: true, properties: [])
    static let latencies = Mutex<[Double]>([])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        let now = nowMicroseconds(), stride = frame.format.strides[0], perRow = frame.format.width / stampBlock
        let stamp = frame.pixels.withBytes { bytes -> UInt64 in
            var stamp: UInt64 = 0
            for bit in 0..<stampBits {
                let x = (bit % perRow) * stampBlock + stampBlock / 2, y = (bit / perRow) * stampBlock + stampBlock / 2
                if bytes[y * stride + x] > 128 { stamp |= 1 << UInt64(bit) }
            }
            return stamp
        }
        // A frame decoded from a damaged picture would give nonsense: keep plausible values only.
        if stamp <= now, now - stamp < 5_000_000 { Self.latencies.withLock { $0.append(Double(now - stamp) / 1000) } }
        return .forward
    }
}

@Suite(.serialized) struct RTSPLatencyTests {
    static let serverOutcome = Mutex<Pipeline.Outcome?>(nil)

    /// A time stamp written into each frame by the worker just upstream of lensrtsp, read back
    /// after a real player (rtspsrc latency=0 → depay → avdec_h264 with one thread, so the
    /// decoder holds no frames) decoded it: worker → player, both in this process.
    @Test(arguments: ["tcp", "udp"])
    func workerToPlayerLatency(_ transport: String) throws {
        StandardBackends.register() // lensdetect's models run on OpenVINO
        try GStreamer.initialize(stages: builtinStages + [StampStage.self, StampReaderStage.self])
        let port = freeLoopbackPort()
        Self.serverOutcome.withLock { $0 = nil }
        StampReaderStage.latencies.withLock { $0 = [] }
        let server = Thread {
            guard let p = try? Pipeline(description: "videotestsrc is-live=true num-buffers=180 pattern=ball ! video/x-raw,format=GRAY8,width=640,height=360,framerate=30/1 ! lensteststamp ! lensrtsp port=\(port) mount=/latency") else { return }
            p.log = { _ in }
            var options = Pipeline.Options()
            options.handleSignals = false
            let outcome = p.run(options)
            Self.serverOutcome.withLock { $0 = outcome }
        }
        server.start()
        #expect(waitUntilListening(port: port, timeout: 30), "the RTSP server did not listen")
        let player = try makePipeline("rtspsrc location=rtsp://127.0.0.1:\(port)/latency latency=0 protocols=\(transport) ! rtph264depay ! avdec_h264 max-threads=1 ! videoconvert ! video/x-raw,format=GRAY8 ! identity eos-after=121 ! lensteststampread")
        #expect(player.run(quietOptions()) == .finished(interrupted: false))
        while Self.serverOutcome.withLock({ $0 }) == nil { usleep(50_000) }
        #expect(Self.serverOutcome.withLock { $0 } == .finished(interrupted: false))
        let values = StampReaderStage.latencies.withLock { $0 }.sorted()
        try #require(values.count >= 110, "\(values.count) stamps read")
        let median = values[values.count / 2], p95 = values[values.count * 95 / 100]
        print("lensrtsp worker → \(transport) player: median \(String(format: "%.1f", median)) ms, p95 \(String(format: "%.1f", p95)) ms, max \(String(format: "%.1f", values.last!)) ms over \(values.count) frames")
        // Generous: the figure is printed above; this only catches a stream that lags by frames.
        #expect(median < 50, "median \(median) ms")
    }
}
