import Foundation
import StreamLensCore

/// `lensmetadata`: writes the regions of interest of every frame as JSON Lines, one line per
/// frame (schema: docs/metadata.md), after any producer of regions. Frames go on unchanged.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect ! lensmetadata location=faces.jsonl ! fakesink'
public final class MetadataStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensmetadata",
        summary: "Write each frame's regions of interest as JSON Lines (docs/metadata.md)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect ! lensmetadata location=- ! fakesink",
        properties: [
            PropertySpec("location", .string, default: .string("-"),
                         help: "the JSON Lines file (- for standard output); created at the first frame"),
        ])

    private let writer: MetadataWriter
    private var notices: [StageNotice] = []

    public init(settings: StageSettings) throws {
        let location = settings.string("location")
        guard !location.isEmpty else { throw StageError("property location is empty: name a file, or - for standard output") }
        writer = try MetadataWriter(location: location)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        if let notice = writer.write(frame.pixels.regionsOfInterest(), frame: frame) { notices.append(notice) }
        return .forward
    }

    public func takeNotices() -> [StageNotice] {
        defer { notices = [] }
        return notices
    }
}
