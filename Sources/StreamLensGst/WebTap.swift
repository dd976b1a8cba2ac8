import CGstWebShim
import Foundation
import Synchronization

/// A running pipeline's video for browsers, at one point of it (CGstWebShim): WebRTC sessions
/// negotiated by WHEP, encoded once (VP8) whatever the number of viewers, and JPEG frames for
/// MJPEG. Nothing is encoded while nobody watches; the tap itself costs a probe's lock per frame.
///
/// This is the only Swift file that imports CGstWebShim.
///
/// @unchecked-free: the C tap is thread-safe; the pipeline it taps is held by `commands`.
public final class WebTap: Sendable {
    public struct Configuration: Sendable {
        /// kbit/s of the VP8 stream.
        public var bitrate = 2000
        public var keySeconds = 2
        public var maxViewers = 16
        public var jpegQuality = 80
        public init() {}
    }

    public struct Refusal: Error, Sendable {
        /// The HTTP status that fits: 400 a bad offer, 404 no such point, 503 too many viewers.
        public var status: Int
        public var message: String
    }

    private struct Handle: @unchecked Sendable { let pointer: OpaquePointer }
    private let handle: Handle
    /// The pipeline tapped, held as long as the tap.
    private let commands: PipelineCommands
    /// "element:pad".
    public let point: String

    /// Taps the pipeline of `commands` (playing) at the src pad of the element named `at`, or
    /// by default at the last raw video before a sink.
    public init(commands: PipelineCommands, at: String?, configuration: Configuration = Configuration()) throws(Refusal) {
        self.commands = commands
        let pipeline = UnsafeMutableRawPointer(commands.pipelineElement)
        var c = SLWebConfig()
        c.bitrate = UInt32(clamping: configuration.bitrate)
        c.key_seconds = UInt32(clamping: configuration.keySeconds)
        c.max_viewers = UInt32(clamping: configuration.maxViewers)
        c.jpeg_quality = UInt32(clamping: configuration.jpegQuality)
        var error = [CChar](repeating: 0, count: 512)
        guard let p = sl_web_tap_new(pipeline, at, &c, &error, error.count) else {
            throw Refusal(status: 404, message: text(error))
        }
        handle = Handle(pointer: p)
        point = String(cString: sl_web_tap_point(p))
    }

    deinit { sl_web_tap_free(handle.pointer) }

    /// A WHEP offer in; the session number and the SDP answer (with the server's candidates) out.
    /// Blocks until the candidates are gathered (at most `timeout` s): not on the HTTP thread.
    public func offer(_ sdp: String, timeout: Double = 5) throws(Refusal) -> (session: Int, answer: String) {
        var answer: UnsafeMutablePointer<CChar>?
        var status: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        let session = sl_web_tap_whep(handle.pointer, sdp, UInt32(timeout * 1000), &answer, &status, &error, error.count)
        guard session > 0, let answer else { throw Refusal(status: Int(status), message: text(error)) }
        defer { sl_web_free(answer) }
        return (Int(session), String(cString: answer))
    }

    /// Ends a session; false when there is none of that number.
    public func end(session: Int) -> Bool {
        guard let s = UInt32(exactly: session) else { return false }
        return sl_web_tap_whep_end(handle.pointer, s)
    }

    /// The next frame to pass the point, waited for up to `timeout` s (blocks: not on the HTTP
    /// thread), its buffer by reference; nil when none came in time.
    public func nextFrame(timeout: Double) -> ObservedFrame? {
        sl_web_tap_next_frame(handle.pointer, UInt32(max(0, min(60, timeout)) * 1000)).map { ObservedFrame(adopting: OpaquePointer($0)) }
    }

    /// WebRTC sessions open, and of them those connected.
    public var viewers: (open: Int, connected: Int) {
        var up: UInt32 = 0
        let n = sl_web_tap_viewers(handle.pointer, &up)
        return (Int(n), Int(up))
    }

    /// Frames out of the VP8 encoder and the JPEG encoder since the tap was made.
    public var framesEncoded: (vp8: Int, jpeg: Int) {
        var v: UInt64 = 0, j: UInt64 = 0
        sl_web_tap_frames(handle.pointer, &v, &j)
        return (Int(v), Int(j))
    }

    /// JPEG frames, at most `fps` a second, to `handler` (on the JPEG pipeline's thread; it must
    /// not block). Nil when the tap has as many subscribers as it takes.
    public func subscribeJPEG(fps: Int, _ handler: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) -> JPEGSubscription? {
        let box = Unmanaged.passRetained(JPEGHandler(handler))
        let id = sl_web_tap_jpeg_subscribe(handle.pointer, UInt32(clamping: max(1, min(30, fps))), { context, bytes, length in
            guard let context, let bytes else { return }
            Unmanaged<JPEGHandler>.fromOpaque(context).takeUnretainedValue().handler(UnsafeRawBufferPointer(start: bytes, count: length))
        }, box.toOpaque())
        guard id > 0 else { box.release(); return nil }
        return JPEGSubscription(tap: self, id: id, box: box)
    }

    fileprivate func unsubscribe(_ id: UInt32) { sl_web_tap_jpeg_unsubscribe(handle.pointer, id) }
}

private func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

final class JPEGHandler: Sendable {
    let handler: @Sendable (UnsafeRawBufferPointer) -> Void
    init(_ handler: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) { self.handler = handler }
}

/// A subscription to a tap's JPEG frames; `cancel` (or letting it go) ends it: no frame reaches
/// its handler afterwards.
public final class JPEGSubscription: Sendable {
    private let tap: WebTap
    private let id: UInt32
    private struct Box: @unchecked Sendable { let value: Unmanaged<JPEGHandler> }
    private let box: Box
    private let cancelled = Atomic<Bool>(false)

    fileprivate init(tap: WebTap, id: UInt32, box: Unmanaged<JPEGHandler>) {
        self.tap = tap
        self.id = id
        self.box = Box(value: box)
    }

    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        tap.unsubscribe(id)
        box.value.release()
    }

    deinit { cancel() }
}
