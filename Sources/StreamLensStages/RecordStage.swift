import Foundation
import Glibc
import StreamLensCore
import StreamLensGst
import Synchronization

/// `lensrecord`: event clips. On the encoded branch (after the encoder and its parser) it passes
/// every frame on untouched and keeps the last `pre` seconds of them in memory (references to
/// the buffers, bounded by `max-ring-bytes` too); when something happens it writes an MP4 from
/// the keyframe at or before `pre` seconds before the event to `post` seconds after the last
/// trigger, without re-encoding, with a JSON beside it (docs/event-clips.md).
///
///     streamlens run 'filesrc location=cross.mp4 ! decodebin ! videoconvert ! lensdetect draw=false ! lenstrack ! lenszone lines=door:0.5,0,0.5,1 ! videoconvert ! x264enc key-int-max=30 ! h264parse ! lensrecord pre=2 post=3 location=clips/%Y%m%d-%H%M%S-{event}.mp4 ! fakesink'
///
/// Triggers (`on`): `zone` (default: lenszone's events on the frames that reach it: they travel
/// on the buffers through the encoder), `track` (an object id not seen before), `label` (a
/// label the previous frame did not have); always also the `record` property (the control
/// socket's `set NAME record REASON`, the API's `POST /api/sources/{name}/record`, an
/// application's g_object_set) and SIGUSR1 to the process. Audio linked to its `audio` pad
/// (`d.audio_0 ! queue ! aacparse ! rec.audio`) is kept beside the video and written into each
/// clip, placed by stream time (`AudioInput`). Clip decisions: `ClipRecorder`;
/// writing: `ClipWriter` (its own pipeline), then a finisher thread of this stage's own names
/// the file, writes the JSON, applies retention and reports the `clip` event.
public final class RecordStage: Stage, AudioInput {
    public static let descriptor = StageDescriptor(
        name: "lensrecord",
        summary: "Event clips: keep the last seconds of encoded video (and the audio linked to its audio pad) in memory and, on a zone event, a new track, a label, a command or SIGUSR1, write an MP4 from before the event to after it (no re-encoding), with its JSON beside it",
        example: "videotestsrc num-buffers=90 ! video/x-raw,width=320,height=240,framerate=30/1 ! x264enc key-int-max=15 ! h264parse ! lensrecord pre=1 post=1 record=start location=/tmp/streamlens-clips/clip-%05d.mp4 ! fakesink",
        sinkCaps: "video/x-h264, alignment=(string)au; video/x-h265, alignment=(string)au",
        // What mp4mux takes (gst-inspect-1.0 mp4mux, its audio_%u pads); the audio arrives parsed.
        audioCaps: "audio/mpeg, mpegversion=(int)4, stream-format=(string)raw; audio/mpeg, mpegversion=(int)1; audio/x-ac3; audio/x-opus",
        placement: .inLine,
        properties: Settings.table)

    private var settings: Recording
    private var recorder: ClipRecorder<EncodedFrame>
    private let finisher: ClipFinisher
    private var writer: ClipWriter?
    /// The clip being recorded: what the JSON will say.
    private var clip: ClipRecord?
    private var clipPath = ""
    private var temporary = ""
    private var seenIds = Set<Int>()
    private var previousLabels = Set<String>()
    private var requestsSeen: Int
    private var pendingReason: String?
    private var started = 0
    private var format: VideoFormat?
    private var notices: [StageNotice] = []

    /// Audio kept: from about the ring's oldest frame on (audio ahead of the video waits here
    /// too), and whatever the clip being written has not been given yet.
    private var audio: [EncodedFrame] = []
    private var audioOver = false
    /// The index in `audio` of the next unit the clip being written has not been given.
    private var audioNext = 0
    /// Audio units kept at most: about 7 minutes of AAC at 48 kHz. Only a
    /// video branch stalled for that long while the audio flows reaches it; the oldest go.
    static let maxAudioUnits = 20_000
    /// Seconds of audio kept before the ring's oldest frame and taken before a clip's first
    /// frame: a clip's time 0 is its first frame's decoding time, earlier than that frame's
    /// presentation time by the encoder's reordering delay (B-frames).
    static let audioLead = 1.0

    public init(settings: Settings) throws {
        self.settings = try Recording(settings)
        recorder = ClipRecorder(settings: self.settings.recorder)
        let sample = self.settings.pattern.expand(["event": "zone", "id": "0", "label": "face", "n": "1"], at: Date())
        let folder = Folders.folder(sample)
        if let problem = Folders.make(folder) { throw StageError("property location=\(self.settings.pattern.text): \(problem)") }
        guard access(folder.isEmpty ? "." : folder, W_OK) == 0 else {
            throw StageError("property location=\(self.settings.pattern.text): cannot write in folder \(folder.isEmpty ? "." : folder) (\(String(cString: strerror(errno))))")
        }
        let sink = settings.events.isEmpty ? nil : try RecordSinkRegistry.open(settings.events, values: settings.sinks)
        finisher = ClipFinisher(pattern: self.settings.pattern, retention: self.settings.retention, sink: sink)
        requestsSeen = RecordRequests.count
        RecordRequests.installSignalHandler()
        try Self.checkLiveChange(settings, changing: ["record"])
        if !settings.record.isEmpty { pendingReason = settings.record }
    }

    /// A clip's reason goes into its file name ({event}), its JSON, its event and the log: a
    /// word, not text (a line break in it forged a log line and a file name).
    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws {
        let reason = settings.record
        guard reason.count <= 64, reason.allSatisfy({ ($0.isLetter || $0.isNumber) && $0.isASCII || "-_.".contains($0) }) else {
            throw StageError("property record: a reason is at most 64 letters, digits, '-', '_' or '.' (e.g. record=manual)")
        }
    }

    public func formatChanged(_ format: VideoFormat) throws {
        // A new format (new SPS) mid-clip: the clip ends there; the ring starts again.
        if let old = self.format, old != format {
            endClip()
            recorder = ClipRecorder(settings: settings.recorder)
        }
        self.format = format
    }

    public func settingsChanged(_ new: Settings) {
        settings.recorder.postNanoseconds = UInt64((new.post * 1e9).rounded())
        settings.recorder.maxNanoseconds = UInt64((new.max * 1e9).rounded())
        recorder.settings = settings.recorder
        let reason = new.record
        if !reason.isEmpty {
            pendingReason = reason
            // Reads back empty, so the same reason triggers again.
            notices.append(StageNotice(.info, "clip requested (\(reason))", restore: ["record": .string("")]))
        }
    }

    public func audioArrived(_ unit: EncodedFrame) {
        audio.append(unit)
        // The oldest beyond the bound go, unless the clip being written still needs them.
        if audio.count > Self.maxAudioUnits, audioNext > 0 || writer == nil {
            audio.removeFirst()
            audioNext = max(0, audioNext - 1)
        }
    }

    public func audioEnded() { audioOver = true }

    /// Gives the clip being written the audio up to its video's end so far; ends its audio once
    /// the stream's audio ended and all of it was given.
    private func feedAudio() {
        guard let writer, let end = clip?.end else { return }
        while audioNext < audio.count {
            guard let t = audio[audioNext].streamSeconds else { audioNext += 1; continue }
            guard t < end, writer.appendAudio(audio[audioNext]) else { break }
            audioNext += 1
        }
        if audioOver, audioNext >= audio.count { writer.endAudio() }
    }

    /// Lets go of audio no clip can start before (older than the ring's oldest frame), never of
    /// what the clip being written still needs; and of the oldest beyond `maxAudioUnits`.
    private func trimAudio() {
        let keepFrom = recorder.oldestUnit?.streamSeconds.map { $0 - Self.audioLead }
        let limit = writer == nil ? audio.count : audioNext
        var drop = 0
        while drop < limit {
            if let t = audio[drop].streamSeconds {
                guard let keepFrom, t < keepFrom else { break }
            }
            drop += 1
        }
        drop = max(drop, min(limit, audio.count - Self.maxAudioUnits))
        guard drop > 0 else { return }
        audio.removeFirst(drop)
        audioNext = max(0, audioNext - drop)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let time = frame.pts ?? frame.dts ?? UInt64(frame.index) * (format?.frameDurationNanoseconds ?? 33_333_333)
        var why: [String] = []
        var events: [FrameEvent] = []
        if settings.triggers.contains(.zone) {
            events = frame.pixels.events().filter { settings.zoneEvents?.contains($0.type) ?? true }
            if !events.isEmpty { why.append("zone") }
        }
        var regions: [RegionOfInterest]?
        if settings.triggers.contains(.track) || settings.triggers.contains(.label) {
            let admitted = frame.pixels.regionsOfInterest().filter { settings.labels.admits($0.label) }
            regions = admitted
            if settings.triggers.contains(.track) {
                let new = admitted.filter { $0.objectId >= 0 && seenIds.insert($0.objectId).inserted }
                if !new.isEmpty {
                    why.append("track")
                    events += new.map { FrameEvent(type: "track", zone: "", objectId: $0.objectId, label: $0.label, time: frame.pts.map { Double($0) / 1e9 }) }
                }
            }
            if settings.triggers.contains(.label) {
                let labels = Set(admitted.map(\.label))
                let appeared = labels.subtracting(previousLabels).sorted()
                if !appeared.isEmpty {
                    why.append("label")
                    events += appeared.map { FrameEvent(type: "label", zone: "", objectId: -1, label: $0, time: frame.pts.map { Double($0) / 1e9 }) }
                }
                previousLabels = labels
            }
        }
        let requests = RecordRequests.count
        if requests != requestsSeen {
            requestsSeen = requests
            why.append("signal")
        }
        if let reason = pendingReason {
            pendingReason = nil
            why.append(reason)
        }
        guard let unit = EncodedFrame(frame) else { return .failed(reason: "a frame whose format (\(frame.format)) gives no caps") }
        let actions = recorder.add(unit, time: time, keyframe: frame.keyframe, bytes: unit.bytes, triggered: !why.isEmpty)
        for action in actions {
            switch action {
            case .end:
                endClip()
            case .start(let units):
                startClip(why: why, events: events, frame: frame, unit: unit, regions: regions ?? frame.pixels.regionsOfInterest(),
                          from: units.first?.streamSeconds)
                units.forEach(append)
            case .append(let unit):
                append(unit)
            }
        }
        if recorder.isRecording, !why.isEmpty, !actions.contains(where: { if case .start = $0 { return true } else { return false } }) {
            // A trigger during a clip: it is in the clip's record too.
            if var c = clip {
                c.trigger = Array(Set(c.trigger + why)).sorted()
                c.events += events
                clip = c
            }
        }
        feedAudio()
        trimAudio()
        return .forward
    }

    private func startClip(why: [String], events: [FrameEvent], frame: Frame, unit: EncodedFrame, regions: [RegionOfInterest], from start: Double?) {
        started += 1
        let wall = Date()
        let first = events.first
        var values: FilePattern.Values = ["event": why.joined(separator: "+"), "id": first.map { String($0.objectId) } ?? "none",
                                          "label": first?.label ?? "none", "n": String(started)]
        clipPath = settings.pattern.expand(values, at: wall)
        // A counter that names a file already there (an earlier run's): the next free number.
        if settings.pattern.counts {
            var n = started, tries = 0
            while FileManager.default.fileExists(atPath: clipPath) || FileManager.default.fileExists(atPath: ClipFinisher.json(of: clipPath)), tries < 100_000 {
                n += 1; tries += 1
                values["n"] = String(n)
                clipPath = settings.pattern.expand(values, at: wall)
            }
            started = n
        }
        let folder = Folders.folder(clipPath)
        if let problem = Folders.make(folder) {
            notices.append(StageNotice(.warning, "no clip: \(problem); the video goes on"))
            return
        }
        temporary = (folder.isEmpty ? "" : folder + "/") + ".lensrecord-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).partial.mp4"
        // Audio from the clip's time 0 on (`audioLead`; the writer leaves out what is before 0).
        // The first such unit, else (the audio still coming) the newest, gives the audio track
        // its caps. None: a clip of video only.
        audioNext = audio.firstIndex { ($0.streamSeconds ?? -.infinity) >= (start ?? -.infinity) - Self.audioLead } ?? audio.count
        let audioLike = audioNext < audio.count ? audio[audioNext] : audioOver ? nil : audio.last
        do {
            writer = try ClipWriter(path: temporary, mediaType: frame.format.pixelFormat, audio: audioLike)
        } catch {
            notices.append(StageNotice(.warning, "no clip: \(error); the video goes on"))
            unlink(temporary)
            writer = nil
            return
        }
        clip = ClipRecord(pattern: settings.pattern.text, trigger: Array(Set(why)).sorted(), events: events,
                          triggerTime: events.first?.time ?? unit.streamSeconds, wallTime: SnapshotStage.iso8601(wall),
                          width: frame.format.width, height: frame.format.height, detections: regions.map(MetadataRecord.Region.init))
        clip?.counter = started
        clip?.audio = audioLike?.mediaType
    }

    private func append(_ unit: EncodedFrame) {
        guard let writer, var c = clip else { return }
        if c.start == nil { c.start = unit.streamSeconds }
        if let t = unit.streamSeconds {
            let end = t + Double(unit.duration ?? 0) / 1e9
            c.end = max(c.end ?? end, end)
        }
        if !writer.append(unit) {
            // A full disk, a disk too slow: the clip ends here; the video goes on.
            notices.append(StageNotice(.warning, "clip \(clipPath) ended early: \(writer.failure ?? "write failed"); the video goes on"))
            c.incomplete = writer.failure
            clip = c
            endClip()
            return
        }
        c.frames = writer.frames
        clip = c
    }

    private func endClip() {
        feedAudio()
        guard let writer, var clip else { self.writer = nil; self.clip = nil; return }
        if clip.audio != nil { clip.audioFrames = writer.audioFrames }
        self.writer = nil
        self.clip = nil
        finisher.finish(writer: writer, record: clip, path: clipPath, temporary: temporary)
    }

    public func takeEvents() -> [FrameEvent] { finisher.takeEvents() }

    public func takeNotices() -> [StageNotice] { notices.take() + finisher.takeNotices() }

    public var readings: [String: String] {
        ["clips": String(finisher.written), "recording": recorder.isRecording ? "true" : "false"]
    }

    public func streamEnded() {
        // A clip being recorded at the end (Ctrl-C, end of the file) is finalized as it stands.
        if recorder.finish() { endClip() }
        finisher.drain(timeout: 15)
    }

    public var summary: String? {
        let f = finisher.figures
        var text = String(format: "%d clips written (%.2f MB), %d deleted by retention", f.written, Double(f.bytes) / 1e6, f.deleted)
        if f.failed > 0 { text += ", \(f.failed) failed" }
        if let ms = f.finalizeMilliseconds.max() { text += String(format: ", finalized within %.0f ms of their end", ms) }
        return text + String(format: "; pre-roll %d frames, %.2f MB now", recorder.ringFrames, Double(recorder.ringBytes) / 1e6)
    }
}

/// Requests to record from outside the pipeline: SIGUSR1 to the process. Every lensrecord
/// compares the count with the one it saw last.
enum RecordRequests {
    private static let requests = Atomic<Int>(0)
    static var count: Int { requests.load(ordering: .relaxed) }

    private static let installed = Mutex(false)
    nonisolated(unsafe) private static var source: DispatchSourceSignal?

    static func installSignalHandler() {
        installed.withLock { done in
            guard !done else { return }
            done = true
            signal(SIGUSR1, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
            s.setEventHandler { requests.add(1, ordering: .relaxed) }
            s.resume()
            source = s
        }
    }
}

/// What lensrecord writes beside each clip (same name, .json).
struct ClipRecord: Encodable, Sendable {
    static let schemaVersion = 1
    static let stageName = "lensrecord"
    var schemaVersion = Self.schemaVersion
    var stage = Self.stageName
    var pattern: String
    /// The clip's file name (in the same folder).
    var clip = ""
    var counter = 0
    /// What triggered it: zone, track, label, signal, or the reason given to `record`.
    var trigger: [String]
    /// The events that triggered it (lenszone's, new tracks, labels), in order.
    var events: [FrameEvent]
    /// The first trigger's frame time (stream seconds).
    var triggerTime: Double?
    var wallTime: String
    var width: Int
    var height: Int
    /// The clip's first and last frame times (stream seconds; end includes the last frame's duration).
    var start: Double?
    var end: Double?
    var frames = 0
    /// False for a clip whose writing failed (a full disk, a disk too slow): cut back to its
    /// last whole fragment, `incomplete` says why, `frames` counts what it holds, `end` is absent.
    var complete = true
    /// Set when the clip ended early (the disk): why.
    var incomplete: String?
    /// The audio track's media type (audio/mpeg…), and its frames; absent: a clip of video only.
    var audio: String?
    var audioFrames: Int?
    /// The regions on the triggering frame, as lensmetadata writes them (empty when none reach
    /// the encoded branch: encoders keep lenszone's events, not the regions).
    var detections: [MetadataRecord.Region]

    enum CodingKeys: String, CodingKey {
        case stage, pattern, clip, counter, trigger, events, width, height, start, end, frames, complete, incomplete, detections, audio
        case audioFrames = "audio_frames"
        case schemaVersion = "schema_version"
        case triggerTime = "trigger_time"
        case wallTime = "wall_time"
    }
}
