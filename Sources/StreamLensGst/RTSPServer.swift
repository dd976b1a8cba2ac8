import CGstRTSPShim
import StreamLensCore

/// An RTSP server (gst-rtsp-server) with one mount that serves the frames pushed into it as
/// H.264: `rtsp://ADDRESS:PORT/MOUNT`. The server runs its own main loop on a thread of its own;
/// frames go straight into the current media's appsrc (a shallow copy of the buffer: no pixel
/// copy), stamped with the media pipeline's running time. When nobody is watching, a push is a
/// mutex and a nil check. Stopped (clients closed, sockets released) when the object goes away.
///
/// This is the only Swift file that imports CGstRTSPShim (StreamLensGst holds every fence that
/// speaks GStreamer, so no GStreamer object crosses a module boundary as a pointer).
public final class RTSPServer {
    /// How the server listens and encodes. Defaults here are the stage's defaults.
    public struct Configuration: Sendable, Equatable {
        public enum Encoder: String, Sendable, CaseIterable {
            case x264enc, openh264enc
        }
        /// Numeric IPv4 or IPv6 address for the RTSP socket and the RTP/RTCP UDP sockets.
        public var address = "127.0.0.1"
        public var port = 8554
        /// Path of the stream, starting with "/".
        public var mount = "/stream"
        public var encoder = Encoder.x264enc
        /// kbit/s
        public var bitrate = 2000
        /// Frames between key frames (a new client waits at most this long for a picture).
        public var keyInterval = 30
        /// x264enc: tune=zerolatency speed-preset=ultrafast (no look-ahead, no B-frames).
        public var lowLatency = true
        /// RTP interleaved on the RTSP connection only: no UDP sockets at all.
        public var tcpOnly = false
        /// Basic authentication; nil: anyone may watch.
        public var credentials: Credentials?
        public init() {}

        /// The URL clients open (IPv6 addresses in brackets).
        public var url: String {
            let host = address.contains(":") ? "[\(address)]" : address
            return "rtsp://\(host):\(port)\(mount)"
        }
    }

    public typealias Credentials = UserPassword

    public let configuration: Configuration
    private let handle: OpaquePointer

    /// Binds and starts serving. Throws when the address or port cannot be used (a busy port
    /// is named: "port 8554 on 127.0.0.1 is in use …"), or the encoder is not installed.
    public init(_ configuration: Configuration) throws(RTSPError) {
        self.configuration = configuration
        var error = [CChar](repeating: 0, count: 512)
        let encoder: SLRtspEncoder = configuration.encoder == .openh264enc ? SL_RTSP_ENCODER_OPENH264 : SL_RTSP_ENCODER_X264
        let handle: OpaquePointer? = configuration.address.withCString { address in
            configuration.mount.withCString { mount in
                withOptionalCString(configuration.credentials?.user) { user in
                    withOptionalCString(configuration.credentials?.password) { password in
                        var c = SLRtspConfig()
                        c.address = address
                        c.port = UInt32(clamping: configuration.port)
                        c.mount = mount
                        c.encoder = encoder
                        c.bitrate = UInt32(clamping: configuration.bitrate)
                        c.key_int = UInt32(clamping: configuration.keyInterval)
                        c.low_latency = configuration.lowLatency
                        c.tcp_only = configuration.tcpOnly
                        c.user = user
                        c.password = password
                        return sl_rtsp_server_start(&c, &error, error.count)
                    }
                }
            }
        }
        guard let handle else {
            throw RTSPError(call: "sl_rtsp_server_start", message: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.handle = handle
    }

    deinit { sl_rtsp_server_stop(handle) }

    /// Hands a frame to the clients (the bridge's buffer by reference; a frame made in memory,
    /// copied). Returns false when nobody is watching (the frame is dropped). One thread at a time.
    public func push(_ frame: Frame) -> Bool {
        guard let sample = SampleReference.of(frame) else { return false }
        return sl_rtsp_server_push(handle, UnsafeMutableRawPointer(sample.pointer))
    }

    /// RTSP connections open now.
    public var clientCount: Int { Int(sl_rtsp_server_client_count(handle)) }

    /// The media factory's launch line (appsrc … encoder … rtph264pay).
    public var launchLine: String {
        guard let p = sl_rtsp_server_launch_line(handle) else { return "" }
        defer { sl_rtsp_free(p) }
        return String(cString: p)
    }
}

/// A failure of the RTSP server's C side, with the call that failed.
public struct RTSPError: Error, CustomStringConvertible, Sendable {
    public var call: String
    public var message: String
    public var description: String { message }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
