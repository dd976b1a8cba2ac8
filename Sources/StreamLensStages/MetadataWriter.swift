import Foundation
import StreamLensCore

/// Writes each frame's regions of interest as one JSON Lines record (`MetadataRecord`; schema in
/// docs/metadata.md, `schema_version` on every line). The one writer behind `lensmetadata`'s
/// files (its record sink for paths, `file://` and `-`) and lensdetect's `metadata` shortcut.
///
/// The file is checked when the stage starts and created (truncated) at the first frame, so a
/// run that fails to start leaves an existing file as it was; a write error (a full disk, a
/// reader gone) stops the records with one warning, never the video. Records are written from the
/// file's own queue (FileWriter): a reader that stalls costs records (dropped, counted, one
/// warning), never frames.
final class MetadataWriter {
    private var writer: FileWriter?
    /// The file, until it is created at the first frame.
    private var pendingPath: String?
    private let encoder = JSONEncoder.stable()

    /// `location`: a path, or `-` for standard output. Throws a StageError naming the file
    /// when it cannot be written, or when it is a named pipe that nobody reads (opened now,
    /// never blocking: writing into it could only wait).
    init(location: String) throws {
        if location == "-" {
            writer = FileWriter.standardOutput()
            return
        }
        if InputFile.isNamedPipe(location) {
            writer = try FileWriter.create(location, what: "metadata file").get()
            return
        }
        let exists = FileManager.default.fileExists(atPath: location)
        let folder = URL(fileURLWithPath: location).deletingLastPathComponent().path
        guard exists ? access(location, W_OK) == 0 : access(folder, W_OK) == 0 else {
            throw StageError("cannot write metadata file \(location)")
        }
        pendingPath = location
    }

    /// Queues the record for one frame (never waits: the file's own queue writes it); notices
    /// when records are dropped (the first time) or writing failed (then nothing more is written).
    func write(_ regions: [RegionOfInterest], frame: Frame) -> [StageNotice] {
        guard let data = MetadataRecord.line(regions, frame: frame, encoder: encoder) else { return [] }
        return take(data)
    }

    /// Queues one record (a line, newline included), the file created at the first.
    func take(_ data: Data) -> [StageNotice] {
        if writer == nil, let path = pendingPath {
            pendingPath = nil
            switch FileWriter.create(path, what: "metadata file") {
            case .success(let w): writer = w
            case .failure(let error): return [StageNotice(.warning, "\(error.message); detections are not written")]
            }
        }
        guard let writer else { return [] }
        var notices: [StageNotice] = []
        if writer.write(data) == .dropped(first: true) {
            notices.append(StageNotice(.warning, "metadata to \(writer.name) is not being read fast enough: records are dropped (\(OutputQueue.defaultCapacity) wait at most; the summary counts them), the video goes on"))
        }
        if let failure = writer.takeFailure() { notices.append(failureNotice(failure)) }
        return notices
    }

    /// End of stream: waits (by default at most 2 s without progress, 10 s in all) for the
    /// queued records; the notice of a write that failed meanwhile.
    func finish(quiet: Double = 2, atMost: Double = 10) -> [StageNotice] {
        guard let writer, final == nil else { return [] }
        final = writer.finish(quiet: quiet, atMost: atMost)
        return writer.takeFailure().map { [failureNotice($0)] } ?? []
    }

    private func failureNotice(_ failure: String) -> StageNotice {
        StageNotice(.warning, "cannot write metadata to \(writer?.name ?? "?") (\(failure)); detections are no longer written, the video goes on")
    }
    private var final: OutputQueue.Counts?

    /// Records dropped or left unwritten, with where they were going; nil when none was.
    var summary: String? {
        guard let writer else { return nil }
        let c = final ?? writer.counts
        guard c.dropped + c.leftAtEnd > 0 else { return nil }
        var parts: [String] = []
        if c.dropped > 0 { parts.append("\(c.dropped) dropped (not read fast enough)") }
        if c.leftAtEnd > 0 { parts.append("\(c.leftAtEnd) still unwritten at the end (given up)") }
        return "metadata to \(writer.name): \(c.written) records written, " + parts.joined(separator: ", ")
    }


    /// One frame's record, newline included: the line of the file, what every record sink takes.
}

/// lensmetadata's sink for files: a path (or `file://PATH`), `-` for standard output.
extension MetadataWriter: RecordSink {
    static let schemes = ["file"]
    static let usage = "a JSON Lines file (a path or file://PATH, created at its first record) or - for standard output"
    convenience init(location: String, settings: NoSettings) throws {
        try self.init(location: location.hasPrefix("file://") ? String(location.dropFirst("file://".count)) : location)
    }
}
