// An example program built on the StreamLens library: a stage of its own (mean brightness of
// every GRAY8 frame, printed once a second of stream time) registered beside the built-in
// ones, in a pipeline run to its end.
//
//     swift run brightness-meter
//     swift run brightness-meter 'videotestsrc num-buffers=90 pattern=ball ! video/x-raw,format=GRAY8 ! lensbrightness ! fakesink'
import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensStages

final class BrightnessStage: Stage {
    static let descriptor = StageDescriptor(
        name: "lensbrightness",
        summary: "Print the mean brightness of GRAY8 frames",
        example: "videotestsrc num-buffers=90 ! video/x-raw,format=GRAY8 ! lensbrightness ! fakesink",
        sinkCaps: "video/x-raw,format=GRAY8",
        properties: Settings.table)

    struct Settings: StageSettings {
        var every = 30
        static let properties: [Property<Settings>] = [.int("every", \.every, 1...10_000, help: "print every N frames")]
    }

    let every: Int
    init(settings: Settings) throws { every = settings.every }

    func process(_ frame: Frame) -> FrameOutcome {
        guard frame.index % every == 0 else { return .forward }
        let mean = frame.pixels.withBytes { bytes -> Double in
            var sum = 0
            for row in 0..<frame.format.height {
                let start = row * frame.format.strides[0]
                for x in 0..<frame.format.width { sum += Int(bytes[start + x]) }
            }
            return Double(sum) / Double(frame.format.width * frame.format.height)
        }
        let seconds = Double(frame.pts ?? 0) / 1e9
        print(String(format: "t=%.2fs frame %d: mean brightness %.1f", seconds, frame.index, mean))
        return .forward
    }
}

let spec = CommandLine.arguments.dropFirst().first
    ?? "videotestsrc num-buffers=90 pattern=ball ! video/x-raw,format=GRAY8,width=320,height=240 ! lensbrightness ! fakesink"
do {
    try GStreamer.initialize(stages: builtinStages + [BrightnessStage.self])
    let pipeline = try Pipeline(description: spec)
    exit(pipeline.run().exitCode)
} catch let error as HostError {
    FileHandle.standardError.write("brightness-meter: \(error.message)\n".data(using: .utf8)!)
    exit(error.exitCode)
}
