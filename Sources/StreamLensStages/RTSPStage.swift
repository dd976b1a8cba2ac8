import Foundation
import StreamLensCore
import StreamLensGst

/// `lensrtsp`: a sink stage that serves the frames reaching it over RTSP, as H.264, to any
/// number of players at `rtsp://ADDRESS:PORT/MOUNT`.
///
///     streamlens run 'videotestsrc is-live=true ! video/x-raw,width=640,height=360,framerate=30/1 ! lensdetect ! lensrtsp port=8554 mount=/faces'
///     ffplay -rtsp_transport tcp rtsp://127.0.0.1:8554/faces
///
/// The server (gst-rtsp-server) has its own main loop thread; each frame is pushed, without a
/// pixel copy, into the appsrc of the media the server built for its clients, and dropped when
/// nobody is watching. It listens on loopback by default; `address=` opens it to a network.
/// Authentication (Basic) comes from `auth-file=` (a file holding `user:password`) or the
/// environment (STREAMLENS_RTSP_USER, STREAMLENS_RTSP_PASSWORD), never from a property value.
public final class RTSPStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensrtsp",
        summary: "Serve the frames over RTSP as H.264 (gst-rtsp-server; ends the pipeline)",
        example: "videotestsrc is-live=true num-buffers=30 ! lensrtsp port=18599 mount=/example",
        sinkCaps: "video/x-raw",
        capsPassthrough: false,
        isSink: true,
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var mount = "/stream"
        public var port = 8554
        public var address = "127.0.0.1"
        public var encoder = RTSPServer.Configuration.Encoder.x264enc
        public var bitrate = 2000
        public var keyInt = 30
        public var lowLatency = true
        public var tcpOnly = false
        public var authFile = ""
        public init() {}

        public static let properties: [Property<Settings>] = [
            .string("mount", \.mount, help: "path of the stream in the URL, starting with /"),
            .int("port", \.port, 1...65535, help: "RTSP port (TCP)"),
            .string("address", \.address, help: "numeric address to listen on, RTSP and RTP/RTCP alike (0.0.0.0: every interface)"),
            .choice("encoder", \.encoder, help: "H.264 encoder element"),
            .int("bitrate", \.bitrate, 16...200_000, help: "encoder bit rate, kbit/s"),
            .int("key-int", \.keyInt, 1...3000, help: "frames between key frames (how long a new client may wait for a picture)"),
            .bool("low-latency", \.lowLatency, help: "encode each frame as it comes (x264enc tune=zerolatency speed-preset=ultrafast)"),
            .bool("tcp-only", \.tcpOnly, help: "RTP over the RTSP connection only, no UDP"),
            .string("auth-file", \.authFile,
                    help: "file holding user:password for Basic authentication (empty: STREAMLENS_RTSP_USER and STREAMLENS_RTSP_PASSWORD if set, else none)"),
        ]
    }

    private let server: RTSPServer
    private var notices: [StageNotice] = []
    private var clients = 0
    private var peakClients = 0
    private var lastClientCheck: UInt64 = 0

    public init(settings: Settings) throws {
        let configuration = try Self.configuration(settings, environment: ProcessInfo.processInfo.environment)
        do {
            server = try RTSPServer(configuration)
        } catch {
            throw StageError(error.message)
        }
        var how = "H.264, \(configuration.encoder.rawValue) \(configuration.bitrate) kbit/s"
        if configuration.tcpOnly { how += ", TCP only" }
        if let credentials = configuration.credentials { how += ", Basic authentication as \(credentials.user)" }
        notices.append(StageNotice(.info, "serving \(configuration.url) (\(how))"))
        if configuration.credentials == nil, !Self.isLoopback(configuration.address) {
            notices.append(StageNotice(.warning, "serving \(configuration.url) beyond this machine without a password: anyone who can reach address \(configuration.address) can watch (set auth-file=, or STREAMLENS_RTSP_USER and STREAMLENS_RTSP_PASSWORD)"))
        }
    }

    /// 127.0.0.0/8 or ::1: nothing outside this machine can connect.
    static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address == "localhost" || address.hasPrefix("127.")
    }

    /// The server's configuration from the stage's settings (and, for credentials, the
    /// environment).
    static func configuration(_ settings: Settings, environment: [String: String]) throws -> RTSPServer.Configuration {
        var c = RTSPServer.Configuration()
        c.mount = settings.mount
        guard c.mount.hasPrefix("/"), c.mount.count > 1,
              c.mount.unicodeScalars.allSatisfy({ CharacterSet.urlPathAllowed.contains($0) }) else {
            throw StageError("property mount=\(settings.mount) must be a URL path such as /stream")
        }
        c.port = settings.port
        c.address = settings.address
        c.encoder = settings.encoder
        c.bitrate = settings.bitrate
        c.keyInterval = settings.keyInt
        c.lowLatency = settings.lowLatency
        c.tcpOnly = settings.tcpOnly
        c.credentials = try credentials(file: settings.authFile, environment: environment)
        return c
    }

    /// `user:password` from the file (first line), else from the environment, else none
    /// (Basic authentication's rules: `UserPassword`).
    static func credentials(file: String, environment: [String: String]) throws -> RTSPServer.Credentials? {
        try UserPassword.resolve(file: file, fileName: "auth-file", variables: "STREAMLENS_RTSP", environment: environment, basic: true)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let pushed = server.push(frame)
        checkClients()
        // "out" in the summary: frames handed to the players' encoder; "dropped": nobody watched.
        return pushed ? .forward : .drop(reason: "no client watching")
    }

    /// A notice when the number of connected clients changes (checked at most every 100 ms).
    private func checkClients() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastClientCheck >= 100_000_000 else { return }
        lastClientCheck = now
        let count = server.clientCount
        guard count != clients else { return }
        clients = count
        peakClients = max(peakClients, count)
        notices.append(StageNotice(.info, count == 0 ? "no clients" : count == 1 ? "1 client" : "\(count) clients"))
    }

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var metrics: [Metric] {
        [.gauge("streamlens_rtsp_clients", "RTSP clients watching (checked every 100 ms)", labels: [("mount", server.configuration.mount)], Double(clients))]
    }

    public var summary: String? {
        "at most \(peakClients) client\(peakClients == 1 ? "" : "s") at once"
    }
}
