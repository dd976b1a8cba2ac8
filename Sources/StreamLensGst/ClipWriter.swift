import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// One encoded frame kept by reference (its GstSample: buffer and caps), for lensrecord's ring:
/// holding it costs a reference, not a copy of its bytes.
public final class EncodedFrame: @unchecked Sendable {
    // @unchecked: the sample is only read after init (a GstSample and its buffer are immutable
    // while shared).
    private let reference: SampleReference
    fileprivate var sample: OpaquePointer { reference.pointer }
    public let pts: UInt64?
    public let dts: UInt64?
    public let duration: UInt64?
    public let keyframe: Bool
    /// The encoded bytes.
    public let bytes: Int
    /// Its presentation time as stream time (seconds): the PTS through the sample's segment,
    /// which an encoder may have shifted (x264enc adds 1000 hours); nil without a PTS.
    public let streamSeconds: Double?

    /// The frame a stage of encoded video is processing (Frame.pixels of such a stage), by
    /// reference; a frame made in memory (a test's: its format's caps say what it is), copied.
    /// Nil when the frame's format gives no caps.
    public convenience init?(_ frame: Frame) {
        guard let sample = SampleReference.of(frame) else { return nil }
        self.init(sample: sample, pts: frame.pts, dts: frame.dts, duration: frame.duration, keyframe: frame.keyframe)
    }

    /// A sample of encoded audio (an `AudioInput`'s): its times are its buffer's; every audio
    /// frame counts as a keyframe. Takes a reference of its own.
    convenience init(audio sample: OpaquePointer) {
        let buffer = gst_sample_get_buffer(sample)
        func time(_ t: GstClockTime?) -> UInt64? { t.flatMap { $0 == GstClockTime.max ? nil : UInt64($0) } }
        self.init(sample: SampleReference(retaining: sample), pts: time(buffer?.pointee.pts), dts: time(buffer?.pointee.dts),
                  duration: time(buffer?.pointee.duration), keyframe: true)
    }

    private init(sample: SampleReference, pts: UInt64?, dts: UInt64?, duration: UInt64?, keyframe: Bool) {
        reference = sample
        let sample = sample.pointer
        self.pts = pts
        self.dts = dts
        self.duration = duration
        self.keyframe = keyframe
        bytes = gst_sample_get_buffer(sample).map { Int(gst_buffer_get_size($0)) } ?? 0
        if let pts, let segment = gst_sample_get_segment(sample), segment.pointee.format == GST_FORMAT_TIME {
            let t = gst_segment_to_stream_time(segment, GST_FORMAT_TIME, GstClockTime(pts))
            streamSeconds = t == GstClockTime.max ? nil : Double(t) / 1e9
        } else {
            streamSeconds = pts.map { Double($0) / 1e9 }
        }
    }

    /// Its media type (`audio/mpeg`, `video/x-h264`…), nil without caps.
    public var mediaType: String? {
        guard let caps = gst_sample_get_caps(sample), gst_caps_get_size(caps) > 0, let s = gst_caps_get_structure(caps, 0) else { return nil }
        return gst_structure_get_name(s).map { String(cString: $0) }
    }

    /// The time it is decoded at (its DTS, else its PTS).
    public var decodingTime: UInt64? { dts ?? pts }
}

/// Writes one MP4 from encoded frames, without re-encoding: a pipeline of its own
/// (`appsrc ! PARSER ! mp4mux ! filesink`, and with audio a second `appsrc ! mp4mux.`), fed by
/// reference, on its own streaming threads, so the stage that feeds it never waits for the disk. The MP4 is fragmented (a fragment a
/// second): a clip cut short by a full disk still plays up to its last whole fragment, and
/// `finish` (end of stream) completes its index.
///
/// The frames' times are moved so the clip starts at 0 (a shallow copy of each buffer: its
/// metadata, the bytes shared).
public final class ClipWriter: @unchecked Sendable {
    // @unchecked: used from the stage's worker thread only (append, finish); GStreamer's own
    // objects are thread-safe.
    private let pipelineReference: ObjectReference<GstElement>
    private let appsrcReference: ObjectReference<GstAppSrc>
    private let audioReference: ObjectReference<GstAppSrc>?
    private var pipeline: UnsafeMutablePointer<GstElement> { pipelineReference.pointer }
    private var appsrc: UnsafeMutablePointer<GstAppSrc> { appsrcReference.pointer }
    private var audioSource: UnsafeMutablePointer<GstAppSrc>? { audioReference?.pointer }
    private var base: UInt64?
    /// The stream time (ns) of the clip's 0: where audio, timed by its own segment, is placed.
    private var origin: Double?
    private var capsSet = false
    private var audioOpen: Bool
    public private(set) var failure: String?
    public private(set) var frames = 0
    public private(set) var audioFrames = 0
    /// Bytes the writer may hold unwritten before the clip is ended (the disk does not keep up).
    public static let maxBacklogBytes: UInt64 = 64 << 20

    /// `path`: the file to write (made, or truncated). `mediaType`: the frames' caps' media type.
    /// `audio`: the clip gets an audio track too (`appendAudio`), of this audio frame's caps.
    public init(path: String, mediaType: String, audio: EncodedFrame? = nil) throws {
        gst_init(nil, nil)
        let parser: String
        switch mediaType {
        case "video/x-h264": parser = "h264parse"
        case "video/x-h265": parser = "h265parse"
        default: throw StageError("cannot record \(mediaType) into MP4: H.264 (video/x-h264) or H.265 (video/x-h265) only")
        }
        let quoted = path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        let description = "appsrc name=src format=time is-live=false block=false max-bytes=0 ! \(parser) ! mp4mux name=mux fragment-duration=1000 "
            + "! filesink name=sink location=\"\(quoted)\" sync=false async=false"
            + (audio != nil ? " appsrc name=audio format=time is-live=false block=false max-bytes=0 ! mux.audio_0" : "")
        var error: UnsafeMutablePointer<GError>?
        guard let p = sl_pipeline_parse(description, &error) else {
            defer { if let error { g_error_free(error) } }
            throw StageError("cannot build the clip writer (\(error.map(parseErrorMessage) ?? "?"); are gst-plugins-good's mp4mux and gst-plugins-bad's \(parser) installed?)")
        }
        if let error { g_error_free(error) }
        // Each reference has one owner from here on: a throw below drops each once.
        pipelineReference = ObjectReference(adopting: p)
        let bin = UnsafeMutableRawPointer(p).assumingMemoryBound(to: GstBin.self)
        func source(_ name: String) -> ObjectReference<GstAppSrc>? {
            gst_bin_get_by_name(bin, name).map { ObjectReference(adopting: UnsafeMutableRawPointer($0).assumingMemoryBound(to: GstAppSrc.self)) }
        }
        guard let src = source("src") else { throw StageError("the clip writer has no appsrc") }
        appsrcReference = src
        audioReference = audio != nil ? source("audio") : nil
        audioOpen = audioReference != nil
        if let audioSource, let caps = audio.flatMap({ gst_sample_get_caps($0.sample) }) { gst_app_src_set_caps(audioSource, caps) }
        if gst_element_set_state(p, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE {
            let why = firstBusError(p) ?? "it would not start"
            // deinit runs (every property is set) and stops it.
            throw StageError("cannot write \(path): \(why)")
        }
    }

    deinit {
        gst_element_set_state(pipeline, GST_STATE_NULL)
    }

    /// Whether the writer failed or holds too much unwritten (then `failure` says why).
    private func healthy() -> Bool {
        guard failure == nil else { return false }
        if let why = firstBusError(pipeline) { failure = why; return false }
        let waiting = gst_app_src_get_current_level_bytes(appsrc) + (audioSource.map { gst_app_src_get_current_level_bytes($0) } ?? 0)
        if waiting > Self.maxBacklogBytes {
            failure = "the disk did not keep up (\(Self.maxBacklogBytes >> 20) MB waiting to be written)"
            return false
        }
        return true
    }

    /// Hands a frame over (never waits). False, with `failure` set, once the writer failed (a
    /// write error: a full disk) or holds more than `maxBacklogBytes` unwritten.
    @discardableResult
    public func append(_ frame: EncodedFrame) -> Bool {
        guard healthy() else { return false }
        guard let buffer = gst_sample_get_buffer(frame.sample) else { return true }
        if !capsSet, let caps = gst_sample_get_caps(frame.sample) {
            gst_app_src_set_caps(appsrc, caps)
            capsSet = true
        }
        if base == nil { base = min(frame.dts ?? .max, frame.pts ?? .max) == .max ? 0 : min(frame.dts ?? .max, frame.pts ?? .max) }
        let b = base ?? 0
        if origin == nil, let pts = frame.pts, let t = frame.streamSeconds { origin = t * 1e9 - (Double(pts) - Double(b)) }
        if push(buffer, into: appsrc, pts: frame.pts.map { $0 >= b ? $0 - b : 0 }, dts: frame.dts.map { $0 >= b ? $0 - b : 0 }) { frames += 1 }
        return true
    }

    /// Pushes a shallow copy of `buffer` with the clip's own times: the metadata is the clip's,
    /// the bytes are shared. (nil: the time is left as it was.) False when no copy could be made.
    private func push(_ buffer: UnsafeMutablePointer<GstBuffer>, into source: UnsafeMutablePointer<GstAppSrc>, pts: UInt64?, dts: UInt64?) -> Bool {
        guard let copy = gst_buffer_copy(buffer) else { return false }
        if let pts { copy.pointee.pts = GstClockTime(pts) }
        if let dts { copy.pointee.dts = GstClockTime(dts) }
        sl_handoff_release(copy)
        _ = gst_app_src_push_buffer(source, copy)   // takes the copy
        return true
    }

    /// Hands an audio frame over (never waits), placed by its stream time against the video's;
    /// one from before the clip's start is left out. False once the writer failed (as `append`).
    @discardableResult
    public func appendAudio(_ unit: EncodedFrame) -> Bool {
        guard let audioSource, audioOpen else { return true }
        guard healthy() else { return false }
        guard let origin, let t = unit.streamSeconds, let buffer = gst_sample_get_buffer(unit.sample) else { return true }
        let pts = t * 1e9 - origin
        guard pts >= 0 else { return true }
        if push(buffer, into: audioSource, pts: UInt64(pts.rounded()), dts: UInt64(pts.rounded())) { audioFrames += 1 }
        return true
    }

    /// No more audio for this clip (the stream's audio ended): the video goes on being written
    /// without the muxer waiting for audio.
    public func endAudio() {
        guard let audioSource, audioOpen else { return }
        audioOpen = false
        _ = gst_app_src_end_of_stream(audioSource)
    }

    /// Ends the clip: end of stream, then waits (at most `timeout` seconds) until the file is
    /// complete; nil when it is, else why not (the file may still play up to its last fragment).
    public func finish(timeout: Double) -> String? {
        endAudio()
        _ = gst_app_src_end_of_stream(appsrc)
        guard let bus = gst_element_get_bus(pipeline) else { return failure ?? "no bus" }
        defer { gst_object_unref(bus) }
        let kinds = GstMessageType(GST_MESSAGE_EOS.rawValue | GST_MESSAGE_ERROR.rawValue)
        let message = gst_bus_timed_pop_filtered(bus, GstClockTime(max(0, timeout) * 1e9), kinds)
        defer { if let message { gst_message_unref(message) } }
        let result: String?
        if let message {
            result = message.pointee.type == GST_MESSAGE_ERROR ? (failure ?? errorMessageText(message)) : failure
        } else {
            result = failure ?? "not finished within \(timeout) s"
        }
        gst_element_set_state(pipeline, GST_STATE_NULL)
        return result
    }
}
