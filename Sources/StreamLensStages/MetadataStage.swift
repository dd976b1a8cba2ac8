import Foundation
import StreamLensCore

/// `lensmetadata`: writes the regions of interest of every frame as JSON Lines, one line per
/// frame (schema: docs/metadata.md), after any producer of regions. Frames go on unchanged.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect ! lensmetadata location=faces.jsonl ! fakesink'
///
/// Where the records go is a record sink chosen by the scheme of `location`
/// (`RecordSinkRegistry`): a file or standard output, or each frame's line one message on MQTT
/// (`mqtt://HOST:PORT/TOPIC`), Kafka (`kafka://…/TOPIC`) or NATS JetStream (`nats://…/SUBJECT`), or
/// one webhook request (`http://`): docs/metadata.md, docs/outputs.md.
/// Sending never holds a frame back, whatever the destination does:
///
///     streamlens run 'videotestsrc is-live=true ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=mqtt://127.0.0.1:1883/streamlens/camera1 ! fakesink'
public final class MetadataStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensmetadata",
        summary: "Write each frame's regions of interest as JSON Lines: to a file, or over the network as location's scheme says (docs/metadata.md)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=- ! fakesink",
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var location = "-"
        public var publish = Publish.all
        /// The record sinks' own properties, by name (`RecordSinkRegistry.rows`).
        public var sinks: [String: PropertyValue] = [:]
        public enum Publish: String, Sendable, CaseIterable { case all, regions, events }
        public init() {}

        public static let properties: [Property<Settings>] = [
            .string("location", \.location, help: "where each frame's record goes: " + RecordSinkRegistry.usage),
            .choice("publish", \.publish, help: "which frames make a record (message, request, line): all, those with regions, those with events"),
        ] + RecordSinkRegistry.rows(\.sinks)
    }

    private let sink: any RecordSink
    private let publish: Settings.Publish
    private let encoder = JSONEncoder.stable()
    private var notices: [StageNotice] = []
    private var ended = false

    public init(settings: Settings) throws {
        let location = settings.location
        guard !location.isEmpty else { throw StageError("property location is empty: name a file, or - for standard output") }
        publish = settings.publish
        sink = try RecordSinkRegistry.open(location, values: settings.sinks)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let regions = frame.pixels.regionsOfInterest()
        if publish == .regions && regions.isEmpty { return .forward }
        if publish == .events && frame.pixels.events().isEmpty { return .forward }
        guard let record = MetadataRecord.line(regions, frame: frame, encoder: encoder) else { return .forward }
        notices += sink.take(record)
        return .forward
    }

    public func streamEnded() {
        guard !ended else { return }
        ended = true
        notices += sink.finish(quiet: 2, atMost: 10)
    }

    public var summary: String? { sink.summary }

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var metrics: [Metric] { sink.metrics }
}
