import Foundation
import StreamLensCore

/// Runs one stage the way the GStreamer bridge does — settings from its property table, the
/// format before the first frame, every frame through `process`, pending frames finished in
/// order (`FrameDelivery`, the bridge's own rule), live changes between frames, the notices
/// after each call — with frames in memory, so a stage is tested without a pipeline.
///
///     let driver = try StageDriver(DetectStage.self, settings: ["model": .string("Models/face-short-range.json")])
///     try driver.start(.packed("RGB", width: 512, height: 512))
///     let out = driver.push(bytes)          // frames that left, in order
///     let rest = driver.finish()            // end of stream: every held frame
///
/// Used from one thread, like a stage.
public final class StageDriver<S: Stage> {
    /// A frame that left the stage, with what the stage said of it.
    public struct Delivered {
        public var index: Int
        public var outcome: FrameOutcome
        public var pixels: MemoryPixels
    }

    public let stage: S
    public private(set) var settings: S.Settings
    public private(set) var format: VideoFormat?
    /// Everything the stage said, in order.
    public private(set) var notices: [StageNotice] = []
    /// Properties the stage set back after a refused change (as the bridge does on the element).
    public private(set) var restored: [String: PropertyValue] = [:]
    private var delivery = FrameDelivery<(index: Int, pixels: MemoryPixels)>()
    private var nextIndex = 0
    private var pts: UInt64 = 0

    /// The stage built from its table's defaults and `settings` by name (checked against the
    /// table, as the bridge checks the element's properties when a pipeline starts).
    public convenience init(_ type: S.Type = S.self, settings values: [String: PropertyValue] = [:]) throws {
        try self.init(type, settings: values) { try S(settings: $0) }
    }

    /// The same, the stage made by `make` from the checked settings: a model stage given a
    /// `ModelLoader` of the test's own (an in-memory backend).
    public init(_ type: S.Type = S.self, settings values: [String: PropertyValue] = [:], make: (S.Settings) throws -> S) throws {
        settings = S.Settings(try Self.checked(values, over: [:]))
        stage = try make(settings)
        collectNotices()
    }

    /// `values` over `base`, every name a row of the table and every value within it.
    private static func checked(_ values: [String: PropertyValue], over base: [String: PropertyValue]) throws -> PropertyValues {
        for name in values.keys where !S.descriptor.properties.contains(where: { $0.name == name }) {
            throw StageError("\(S.descriptor.name) has no property \(name)")
        }
        let all = PropertyValues(descriptor: S.descriptor, values: base.merging(values) { $1 })
        try all.validate(against: S.descriptor)
        return all
    }

    /// The negotiated format (before the first frame, and at a caps change).
    public func start(_ format: VideoFormat) throws {
        self.format = format
        try stage.formatChanged(format)
        collectNotices()
    }

    /// One frame: the frames that left the stage after it, in order (none while it waits for a
    /// request in flight, several when earlier ones finished). `records`: the frame records
    /// (events, zones) stages before this one left on it, as `MemoryPixels.records`. Encoded
    /// video (`VideoFormat(encoded:…)`): `bytes` is one access unit, `keyframe` false for one
    /// that needs earlier ones (the bridge reads GStreamer's DELTA_UNIT flag).
    @discardableResult
    public func push(_ bytes: [UInt8], regions: [RegionOfInterest] = [], records: [String: String] = [:],
                     keyframe: Bool = true) -> [Delivered] {
        guard let format else { preconditionFailure("StageDriver.start(format) before the first frame") }
        precondition(bytes.count >= format.size, "a frame of \(bytes.count) bytes for \(format) (\(format.size) bytes)")
        let pixels = MemoryPixels(bytes: bytes, regions: regions)
        pixels.records = records
        let index = nextIndex
        nextIndex += 1
        let frame = Frame(format: format, pts: pts, duration: format.frameDurationNanoseconds, index: index, pixels: pixels, keyframe: keyframe)
        pts += format.frameDurationNanoseconds ?? 0
        let outcome = stage.process(frame)
        collectNotices()
        var out = delivery.add((index, pixels), outcome: outcome).map { Delivered(index: $0.0.index, outcome: $0.1, pixels: $0.0.pixels) }
        out += deliverReady(wait: false)
        return out
    }

    /// End of stream: every frame still held, waited for, in order; then the stage's
    /// `streamEnded`, as the bridge calls it before the summary.
    public func finish() -> [Delivered] {
        let out = deliverReady(wait: true)
        stage.streamEnded()
        return out
    }

    /// Frames whose outcomes are in now (what the bridge does while it waits for the next frame).
    public func poll() -> [Delivered] { deliverReady(wait: false) }

    /// Frames held: pending, or behind one that is.
    public var held: Int { delivery.count }

    /// A live change (only properties marked live), delivered between frames as the bridge
    /// delivers a control-socket `set` or an API PATCH: checked first (the stage's
    /// `checkLiveChange`: a refusal throws and nothing is set), then applied.
    public func change(_ values: [String: PropertyValue]) throws {
        for name in values.keys {
            if let spec = S.descriptor.properties.first(where: { $0.name == name }), !spec.live {
                throw StageError("property \(name) cannot change while playing")
            }
        }
        let next = S.Settings(try Self.checked(values, over: settings.values))
        try S.checkLiveChange(next, changing: Set(values.keys))
        settings = next
        stage.settingsChanged(settings)
        collectNotices()
    }

    /// Pushes copies of `bytes` until a notice containing `text` comes (a background load
    /// finishing), at most `frames` of them; the frames that left meanwhile. Event-driven: the
    /// stage applies finished loads between frames, so frames are what moves it on.
    public func pushUntilNotice(containing text: String, frames: Int = 600, bytes: [UInt8],
                                pause: TimeInterval = 0.01) -> (found: Bool, delivered: [Delivered]) {
        var delivered: [Delivered] = []
        let seen = notices.count
        for _ in 0..<frames {
            delivered += push(bytes)
            if notices[seen...].contains(where: { $0.text.contains(text) }) { return (true, delivered) }
            Thread.sleep(forTimeInterval: pause)
        }
        return (false, delivered)
    }

    private func deliverReady(wait: Bool) -> [Delivered] {
        var out: [Delivered] = []
        _ = delivery.deliverReady(from: stage, wait: wait, afterAsking: collectNotices) { item, outcome in
            out.append(Delivered(index: item.index, outcome: outcome, pixels: item.pixels))
            return true
        }
        return out
    }

    private func collectNotices() {
        let new = stage.takeNotices()
        notices += new
        let restore = new.reduce(into: [String: PropertyValue]()) { $0.merge($1.restore) { $1 } }
        guard !restore.isEmpty else { return }
        restored.merge(restore) { $1 }
        settings = S.Settings(PropertyValues(descriptor: S.descriptor, values: settings.values.merging(restore) { $1 }))
    }
}
