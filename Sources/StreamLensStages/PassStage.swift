import Foundation
import StreamLensCore

/// `lenspass`: pushes every frame on unchanged — the same buffer, no map, no copy. It measures
/// what the bridge itself costs (`make bench-bridge`), and with `delay` it stands in for a slow
/// model (live-mode tests: frame age stays bounded, drops are counted).
///
///     streamlens run 'videotestsrc num-buffers=300 ! lenspass ! videoconvert ! autovideosink'
public final class PassStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lenspass",
        summary: "Pass frames through unchanged (bridge overhead; simulated slow stage with delay)",
        example: "videotestsrc num-buffers=100 ! lenspass ! fakesink",
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        /// Milliseconds each frame is held.
        public var delay = 0
        public init() {}
        public static let properties: [Property<Settings>] = [
            .int("delay", \.delay, 0...10_000, live: true,
                 help: "milliseconds to hold each frame, standing in for a slow model (with thread=own, where a model runs)"),
        ]
    }

    private var delay: Int

    public init(settings: Settings) throws {
        delay = settings.delay
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        if delay > 0 { usleep(useconds_t(delay * 1000)) }
        return .forward
    }

    public func settingsChanged(_ settings: Settings) {
        delay = settings.delay
    }

    public var latencyNanoseconds: UInt64 { UInt64(delay) * 1_000_000 }
}
