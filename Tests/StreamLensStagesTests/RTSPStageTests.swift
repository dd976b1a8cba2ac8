import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lensrtsp driven in memory: frames pushed by the test reach a real player (ffmpeg over
/// RTSP/TCP) through the stage's own server, on a free loopback port.
@Suite(.serialized) struct RTSPStageTests {
    static let (width, height) = (160, 120)

    /// Red on the left half, blue on the right, packed RGB.
    static let picture: [UInt8] = (0..<(width * height)).flatMap { i in i % width < width / 2 ? [220, 30, 30] : [30, 30, 220] }

    @Test func lensrtspServesWhatItIsGivenToARealPlayer() throws {
        let port = freeLoopbackPort()
        let driver = try StageDriver(RTSPStage.self, settings: ["port": .int(port), "mount": .string("/driven"), "key-int": .int(10)])
        #expect(driver.notices.map(\.text) == ["serving rtsp://127.0.0.1:\(port)/driven (H.264, x264enc 2000 kbit/s)"])
        try driver.start(.packed("RGB", width: Self.width, height: Self.height))
        // Nobody watching: the frame is dropped, and said why.
        #expect(driver.push(Self.picture).map(\.outcome) == [.drop(reason: "no client watching")])
        #expect(waitUntilListening(port: port, timeout: 10))

        let out = FileManager.default.temporaryDirectory.appendingPathComponent("sl-rtsp-\(UUID().uuidString).rgb")
        defer { try? FileManager.default.removeItem(at: out) }
        let player = Process()
        player.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        player.arguments = ["-v", "error", "-rtsp_transport", "tcp", "-i", "rtsp://127.0.0.1:\(port)/driven", "-frames:v", "10",
                            "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", out.path]
        player.standardInput = FileHandle.nullDevice
        try player.run()
        // Frames at 30 a second until the player has its ten (or 30 s pass).
        var outcomes: [FrameOutcome] = []
        let deadline = Date().addingTimeInterval(30)
        while player.isRunning, Date() < deadline {
            outcomes += driver.push(Self.picture).map(\.outcome)
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        if player.isRunning { player.terminate() }
        player.waitUntilExit()
        _ = driver.finish()

        #expect(player.terminationStatus == 0)
        let bytes = [UInt8]((try? Data(contentsOf: out)) ?? Data())
        let size = Self.width * Self.height * 3
        try #require(bytes.count == 10 * size, "ffmpeg decoded \(bytes.count) bytes, not 10 frames of \(size)")
        // The last frame decoded, sampled inside each half (H.264 at 2 Mbit/s: within 40 a channel).
        let last = Array(bytes[(9 * size)...])
        for (x, expected) in [(Self.width / 4, Self.picture[0..<3]), (3 * Self.width / 4, Self.picture[(Self.width - 1) * 3..<Self.width * 3])] {
            let i = (Self.height / 2 * Self.width + x) * 3
            #expect(zip(last[i..<i + 3], expected).allSatisfy { abs(Int($0) - Int($1)) <= 40 }, "pixel at x \(x): \(Array(last[i..<i + 3])), pushed \(Array(expected))")
        }
        #expect(outcomes.contains(.forward), "no frame reached the player's encoder")
        #expect(driver.notices.map(\.text).contains("1 client"), "\(driver.notices.map(\.text))")
        #expect(driver.stage.summary == "at most 1 client at once")
    }

    @Test func lensrtspRefusesAMountThatIsNoPath() {
        #expect(throws: StageError("property mount=driven must be a URL path such as /stream")) {
            try StageDriver(RTSPStage.self, settings: ["port": .int(freeLoopbackPort()), "mount": .string("driven")])
        }
    }
}
