import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import Synchronization

/// The API's video for browsers: one `WebTap` per (source, point) that someone watches, made at
/// the first request and dropped with its source. A WHEP session is named by a random id (its
/// Location), so that one viewer cannot end another's; an MJPEG stream is an open HTTP stream
/// of the tap's JPEG frames.
final class WebViews: Sendable {
    struct Key: Hashable, Sendable {
        var source: String
        var at: String
    }
    private struct Entry {
        var tap: WebTap
        /// The source's command object when the tap was made: a source removed and added again
        /// under the same name is another pipeline.
        var owner: ObjectIdentifier
        var streams: [UInt64: HTTPExchange] = [:]
    }
    private struct State {
        var taps: [Key: Entry] = [:]
        var sessions: [String: (key: Key, session: Int)] = [:]
    }
    private let state = Mutex(State())
    let configuration: WebTap.Configuration

    init(configuration: WebTap.Configuration = WebTap.Configuration()) {
        self.configuration = configuration
    }

    /// The tap of `source` at `at` (nil or empty: the pipeline's last raw video), made now if
    /// needed. Throws 404 for a point the pipeline does not have.
    func tap(source: String, at: String?, commands: PipelineCommands) throws(WebTap.Refusal) -> WebTap {
        let key = Key(source: source, at: at ?? "")
        let owner = ObjectIdentifier(commands)
        var stale: Entry?
        let existing: WebTap? = state.withLock { s in
            if let e = s.taps[key], e.owner == owner { return e.tap }
            stale = s.taps.removeValue(forKey: key)
            return nil
        }
        stale?.streams.values.forEach { $0.close() }
        if let existing { return existing }
        let made = try WebTap(commands: commands, at: at, configuration: configuration)
        return state.withLock { s in
            if let e = s.taps[key], e.owner == owner { return e.tap }
            s.taps[key] = Entry(tap: made, owner: owner)
            return made
        }
    }

    /// Taps of sources no longer running (or not `running`): their sessions and streams end.
    func sweep(running: Set<String>) {
        let gone: [Entry] = state.withLock { s in
            let keys = s.taps.keys.filter { !running.contains($0.source) }
            s.sessions = s.sessions.filter { !keys.contains($0.value.key) }
            return keys.compactMap { s.taps.removeValue(forKey: $0) }
        }
        gone.forEach { $0.streams.values.forEach { $0.close() } }
    }

    func addSession(_ key: Key, _ session: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = generator.next() }
        let id = bytes.map { String(format: "%02x", $0) }.joined()
        state.withLock { $0.sessions[id] = (key, session) }
        return id
    }

    /// Ends a WHEP session of `source`; false when it has none of that id.
    func endSession(source: String, id: String) -> Bool {
        let found: (WebTap, Int)? = state.withLock { s in
            guard let entry = s.sessions[id], entry.key.source == source, let tap = s.taps[entry.key]?.tap else { return nil }
            s.sessions.removeValue(forKey: id)
            return (tap, entry.session)
        }
        guard let (tap, session) = found else { return false }
        return tap.end(session: session)
    }

    func addStream(_ key: Key, _ exchange: HTTPExchange) {
        state.withLock { $0.taps[key]?.streams[exchange.id] = exchange }
    }

    func removeStream(_ key: Key, _ id: UInt64) {
        _ = state.withLock { $0.taps[key]?.streams.removeValue(forKey: id) }
    }

    /// Each tap's figures for /metrics: viewers (WebRTC sessions connected, MJPEG streams) and
    /// frames encoded (once for all its viewers).
    func metrics() -> [Metric] {
        let taps = state.withLock { s in s.taps.map { ($0.key, $0.value.tap, $0.value.streams.count) } }
        var m: [Metric] = []
        for (key, tap, streams) in taps.sorted(by: { ($0.0.source, $0.0.at) < ($1.0.source, $1.0.at) }) {
            let labels = [("source", key.source), ("point", tap.point)]
            let viewers = tap.viewers, frames = tap.framesEncoded
            m.append(.gauge("streamlens_web_viewers", "Viewers of a source's video in browsers: WebRTC sessions connected (kind webrtc), MJPEG streams (kind mjpeg)",
                            labels: labels + [("kind", "webrtc")], Double(viewers.connected)))
            m.append(.gauge("streamlens_web_viewers", "", labels: labels + [("kind", "mjpeg")], Double(streams)))
            m.append(.counter("streamlens_web_frames_encoded_total", "Frames encoded for browsers (once per point whatever the number of viewers): VP8 for WebRTC, JPEG for MJPEG",
                              labels: labels + [("codec", "vp8")], frames.vp8))
            m.append(.counter("streamlens_web_frames_encoded_total", "", labels: labels + [("codec", "jpeg")], frames.jpeg))
        }
        return m
    }

    func stop() {
        let all = state.withLock { s -> [Entry] in defer { s = State() }; return Array(s.taps.values) }
        all.forEach { $0.streams.values.forEach { $0.close() } }
    }
}
