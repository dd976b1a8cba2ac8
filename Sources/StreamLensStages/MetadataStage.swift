import Foundation
import StreamLensCore

/// `lensmetadata`: writes the regions of interest of every frame as JSON Lines, one line per
/// frame (schema: docs/metadata.md), after any producer of regions. Frames go on unchanged.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect ! lensmetadata location=faces.jsonl ! fakesink'
///
/// Where the records go is a record sink chosen by the scheme of `location`
/// (`RecordSinkRegistry`): a file or standard output, or with `location=mqtt://HOST:PORT/TOPIC`
/// (or mqtts://) each frame's line is one MQTT message instead (docs/metadata.md, "MQTT").
/// Sending never holds a frame back, whatever the destination does:
///
///     streamlens run 'videotestsrc is-live=true ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=mqtt://127.0.0.1:1883/streamlens/camera1 ! fakesink'
public final class MetadataStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensmetadata",
        summary: "Write each frame's regions of interest as JSON Lines: to a file, or over the network as location's scheme says (docs/metadata.md)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=- ! fakesink",
        placement: .inLine,
        properties: [
            PropertySpec("location", .string, default: .string("-"),
                         help: "where each frame's record goes: " + RecordSinkRegistry.usage),
            PropertySpec("publish", .choice(["all", "regions", "events"]), default: .string("all"),
                         help: "which frames make a record (message, request, line): all, those with regions, those with events"),
            PropertySpec("max-queued", .int(1...1_000_000), default: .int(1000),
                         help: "network locations: records kept while the destination is away or slow (and not yet sent); beyond it records are dropped, counted"),
        ] + RecordSinkRegistry.properties)

    private let sink: any RecordSink
    private let publish: String
    private let encoder = JSONEncoder.stable()
    private var notices: [StageNotice] = []
    private var ended = false

    public init(settings: StageSettings) throws {
        let location = settings.string("location")
        guard !location.isEmpty else { throw StageError("property location is empty: name a file, or - for standard output") }
        publish = settings.string("publish")
        sink = try RecordSinkRegistry.open(location, settings: settings)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let regions = frame.pixels.regionsOfInterest()
        if publish == "regions" && regions.isEmpty { return .forward }
        if publish == "events" && frame.pixels.events().isEmpty { return .forward }
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
