// Privacy: pixelate every face — the smallest custom stage worth writing (the built-in lensblur
// does this and more: tracking-aware hold, blur, fill). A custom stage, `lenspixelate`, that follows `lensdetect` and
// reads its results from the regions of interest the detector attached to each frame.
//
//     swift run face-blur 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx
//         ! lensdetect draw=false ! lenspixelate block=16 ! videoconvert ! autovideosink'
//
// With no argument it pixelates the astronaut photo that set-up puts in .deps/media and writes
// out/face-blur.png.
import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensBackends
import StreamLensStages

final class BlurStage: Stage {
    static let descriptor = StageDescriptor(
        name: "lenspixelate",
        summary: "Pixelate the regions of interest (faces found by lensdetect upstream)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false ! lenspixelate ! fakesink",
        sinkCaps: "video/x-raw,format={BGRx,BGRA,RGBx,RGBA,RGB,BGR}",
        properties: Settings.table)

    /// The properties: each a field, declared once against it.
    struct Settings: StageSettings {
        var block = 16
        var margin = 0.1
        static let properties: [Property<Settings>] = [
            .int("block", \.block, 2...256, live: true, help: "pixel block size"),
            .double("margin", \.margin, 0...1, help: "grow each region by this fraction on every side"),
        ]
    }

    private var block: Int
    private let margin: Double

    init(settings: Settings) throws {
        block = settings.block
        margin = settings.margin
    }

    func settingsChanged(_ settings: Settings) { block = settings.block }

    func process(_ frame: Frame) -> FrameOutcome {
        let regions = frame.pixels.regionsOfInterest()
        guard !regions.isEmpty else { return .forward }
        let f = frame.format
        let bpp = f.pixelFormat.count == 3 ? 3 : 4
        frame.pixels.withMutableBytes { bytes in
            for r in regions {
                let grow = max(r.width, r.height) * margin
                let x0 = max(0, Int((r.x - grow).rounded(.down))), y0 = max(0, Int((r.y - grow).rounded(.down)))
                let x1 = min(f.width, Int((r.x + r.width + grow).rounded(.up))), y1 = min(f.height, Int((r.y + r.height + grow).rounded(.up)))
                guard x1 > x0, y1 > y0 else { continue }
                for by in stride(from: y0, to: y1, by: block) {
                    for bx in stride(from: x0, to: x1, by: block) {
                        let ex = min(bx + block, x1), ey = min(by + block, y1)
                        var sum = [Int](repeating: 0, count: bpp)
                        for y in by..<ey { for x in bx..<ex { for c in 0..<bpp { sum[c] += Int(bytes[y * f.strides[0] + x * bpp + c]) } } }
                        let n = (ex - bx) * (ey - by)
                        for y in by..<ey { for x in bx..<ex { for c in 0..<bpp { bytes[y * f.strides[0] + x * bpp + c] = UInt8(sum[c] / n) } } }
                    }
                }
            }
        }
        return .forward
    }
}

let spec = CommandLine.arguments.dropFirst().first
    ?? "filesrc location=.deps/media/astronaut.png ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! video/x-raw,format=BGRx " +
       "! lensdetect draw=false ! lenspixelate ! videoconvert ! pngenc ! filesink location=out/face-blur.png"
do {
    StandardBackends.register() // lensdetect's model runs on OpenVINO
    try GStreamer.initialize(stages: builtinStages + [BlurStage.self])
    let pipeline = try Pipeline(description: spec)
    exit(pipeline.run().exitCode)
} catch let error as HostError {
    FileHandle.standardError.write("face-blur: \(error.message)\n".data(using: .utf8)!)
    exit(error.exitCode)
}
