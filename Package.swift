// swift-tools-version: 6.0
// StreamLens: neural video effects inside real GStreamer pipelines.
//
// Layering (docs/extending.md): StreamLensCore has no C; StreamLensGst is the only Swift that
// imports the GStreamer C modules; StreamLensInference is the C-free inference seam and
// StreamLensOpenVINO the only Swift that imports OpenVINO; StreamLensStages builds stages on the
// core and the seam (never on a backend); the programs on top register the backends they link.
import PackageDescription

let package = Package(
    name: "StreamLens",
    products: [
        .library(name: "StreamLensCore", targets: ["StreamLensCore"]),
        .library(name: "StreamLensDraw", targets: ["StreamLensDraw"]),
        .library(name: "StreamLensGst", targets: ["StreamLensGst"]),
        .library(name: "StreamLensInference", targets: ["StreamLensInference"]),
        .library(name: "StreamLensOpenVINO", targets: ["StreamLensOpenVINO"]),
        .library(name: "StreamLensBackends", targets: ["StreamLensBackends"]),
        .library(name: "StreamLensStages", targets: ["StreamLensStages"]),
        .library(name: "StreamLensTesting", targets: ["StreamLensTesting"]),
        .executable(name: "streamlens", targets: ["streamlens"]),
        // libgststreamlens.so: the stages as a GStreamer plugin (GST_PLUGIN_PATH, make install-plugin).
        .library(name: "gststreamlens", type: .dynamic, targets: ["CStreamLensPlugin", "StreamLensPlugin"]),
    ],
    targets: [
        // C fences. One pkg-config string, space-separated (comma-separated fails at link time).
        .systemLibrary(
            name: "CGStreamer",
            pkgConfig: "gstreamer-1.0 gstreamer-app-1.0 gstreamer-video-1.0",
            providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev"])]),
        .systemLibrary(
            name: "CGstRTSPServer",
            pkgConfig: "gstreamer-rtsp-server-1.0",
            providers: [.apt(["libgstrtspserver-1.0-dev"])]),
        // OpenVINO's C API from the wheel, through the generated pkg-config file.
        .systemLibrary(name: "COpenVINO", pkgConfig: "openvino"),
        // cairo draws boxes and labels (real font rendering).
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        // libmosquitto: the MQTT client behind lensmetadata location=mqtt:// (plain functions, no shim).
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // librdkafka and libnats: lensmetadata's Kafka and NATS JetStream sinks (plain functions, no shim).
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),
        // libsoup 3: the HTTP server behind --http (GNOME's HTTP library, on a GLib main loop).
        .systemLibrary(
            name: "CGstWebRTC",
            pkgConfig: "gstreamer-webrtc-1.0 gstreamer-sdp-1.0",
            providers: [.apt(["libgstreamer-plugins-bad1.0-dev"])]),
        .systemLibrary(name: "CSoup", pkgConfig: "libsoup-3.0", providers: [.apt(["libsoup-3.0-dev"])]),
        // libyaml: serve --config's parser (StreamLensConfig/YAMLDocument.swift is its one user).
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // Macros, variadics and the GObject type that makes a Swift stage a GStreamer element.
        .target(name: "CGstShim", dependencies: ["CGStreamer"]),
        // The RTSP server behind lensrtsp: signals, tokens, the server's own main loop thread.
        // gio for GInetAddress and its error codes (gst-rtsp-server's pkg-config omits it).
        .target(name: "CGstRTSPShim", dependencies: ["CGStreamer", "CGstRTSPServer"],
                linkerSettings: [.linkedLibrary("gio-2.0")]),

        // The HTTP server: libsoup behind a header with no GLib type (its own thread and main loop).
        .target(name: "CHTTPShim", dependencies: ["CSoup"]),
        .target(name: "CGstWebShim", dependencies: ["CGStreamer", "CGstWebRTC"]),

        // No C below this line of the diagram: frames, stage protocol, property tables, specs.
        // Optimized in debug builds too: its pixel kernels (resampling, masks, the motion blend's
        // flow) run inside the live pipelines the tests start from the debug build, and unoptimized
        // they are ~15× slower (the flow: 83 ms a 512×512 frame against 5.8 ms), so live stages
        // dropped most frames under test but not in use.
        .target(name: "StreamLensCore", swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        // Everything that speaks GStreamer: pipelines, the stage bridge, the RTSP server and the
        // taps for browsers. Each of its C fences is imported by one file of it; GStreamer objects
        // never cross a module boundary as pointers (they did when the RTSP server and the web
        // taps were modules of their own, handed samples and pipelines as raw pointers).
        .target(name: "StreamLensGst", dependencies: ["StreamLensCore", "CGStreamer", "CGstShim", "CGstRTSPShim", "CGstWebShim"]),
        // The inference seam, no C: model requests, pre-processing, the backend registry, the
        // thread budget, the inference queue, and the remote (KServe) backend.
        .target(name: "StreamLensInference", dependencies: ["StreamLensCore"]),
        // The only Swift that imports COpenVINO: OpenVINO as a backend (InferenceEngine), which
        // the programs register; stages never import it.
        .target(name: "StreamLensOpenVINO", dependencies: ["StreamLensCore", "StreamLensInference", "COpenVINO"]),
        // The backends a program links, registered in one line (StandardBackends.register()).
        .target(name: "StreamLensBackends", dependencies: ["StreamLensInference", "StreamLensOpenVINO"]),
        .target(name: "StreamLensDraw", dependencies: ["CCairo"]),
        // The only Swift that imports CMosquitto (MQTTPublisher.swift): a target of its own, so
        // the C library stays behind one module that knows nothing of GStreamer.
        .target(name: "StreamLensMQTT", dependencies: ["StreamLensCore", "CMosquitto"]),
        // The only Swift that imports CRdKafka (KafkaBus.swift) and CNats (NATSBus.swift): the
        // buses behind lensmetadata's kafka:// and nats:// sinks, knowing nothing of GStreamer.
        .target(name: "StreamLensBuses", dependencies: ["StreamLensCore", "CRdKafka", "CNats"]),
        .target(name: "StreamLensMetrics", dependencies: ["StreamLensCore"]),
        // The only Swift that imports CHTTPShim: an HTTP server knowing nothing of GStreamer.
        .target(name: "StreamLensHTTP", dependencies: ["StreamLensCore", "CHTTPShim"]),
        // The HTTP API of run and serve (routes, OpenAPI, auth, events) on StreamLensHTTP, over
        // the same command layer as the control socket (PipelineCommands, SourceSet).
        .target(name: "StreamLensAPI", dependencies: ["StreamLensCore", "StreamLensGst", "StreamLensHTTP"],
                resources: [.copy("Console")]),
        // serve --config: the YAML file's schema and the state kept beside it (no GStreamer).
        .target(name: "StreamLensConfig", dependencies: ["StreamLensCore", "CYAML"]),
        // serve's cluster: etcd's JSON gateway over the core's HTTP client, the claim rule, the member loop.
        .target(name: "StreamLensCluster", dependencies: ["StreamLensCore", "StreamLensGst"]),
        .target(name: "StreamLensStages", dependencies: ["StreamLensCore", "StreamLensInference", "StreamLensDraw", "StreamLensGst", "StreamLensMQTT", "StreamLensBuses"]),
        // Stages without GStreamer: an in-memory frame, a driver that follows the bridge's rules
        // (FrameDelivery), and an inference backend whose networks are Swift closures, for tests
        // of a stage alone (as swift-nio ships NIOEmbedded).
        .target(name: "StreamLensTesting", dependencies: ["StreamLensCore", "StreamLensInference"]),
        // The plugin: its GST_PLUGIN_DEFINE descriptor (C) and the Swift function it calls.
        .target(name: "CStreamLensPlugin", dependencies: ["CGStreamer"]),
        .target(name: "StreamLensPlugin", dependencies: ["StreamLensGst", "StreamLensStages", "StreamLensBackends"]),
        .executableTarget(
            name: "streamlens",
            dependencies: ["StreamLensCore", "StreamLensGst", "StreamLensInference", "StreamLensBackends", "StreamLensStages", "StreamLensMetrics", "StreamLensAPI", "StreamLensHTTP", "StreamLensConfig", "StreamLensCluster"]),
        // Examples are build targets, so they cannot rot.
        .executableTarget(
            name: "brightness-meter",
            dependencies: ["StreamLensCore", "StreamLensGst", "StreamLensStages"],
            path: "examples/BrightnessMeter"),
        .executableTarget(
            name: "face-blur",
            dependencies: ["StreamLensCore", "StreamLensGst", "StreamLensStages", "StreamLensBackends"],
            path: "examples/FaceBlur"),

        // Benchmarks that need code of their own (bench/track.sh runs it).
        .executableTarget(name: "tracker-bench", dependencies: ["StreamLensCore"], path: "bench/TrackerBench"),

        .testTarget(name: "StreamLensCoreTests", dependencies: ["StreamLensCore", "StreamLensMetrics", "StreamLensDraw"]),
        // The HTTP server and API in-process, on real pipelines, with raw sockets and curl as clients.
        .testTarget(name: "StreamLensConfigTests", dependencies: ["StreamLensConfig"]),
        .testTarget(name: "StreamLensClusterTests", dependencies: ["StreamLensCluster", "StreamLensTesting"]),
        .testTarget(name: "StreamLensAPITests", dependencies: ["StreamLensAPI", "StreamLensHTTP", "StreamLensCore"]),
        .testTarget(name: "StreamLensInferenceTests", dependencies: ["StreamLensInference", "StreamLensOpenVINO", "StreamLensCore"]),
        .testTarget(name: "StreamLensStagesTests", dependencies: ["StreamLensStages", "StreamLensTesting", "StreamLensCore", "StreamLensInference", "StreamLensBackends"]),
        .testTarget(
            name: "StreamLensGstTests",
            dependencies: ["StreamLensGst", "StreamLensStages", "StreamLensCore", "StreamLensBackends", "StreamLensTesting"]),
        // Spawns the built `streamlens` binary: the dependency makes `swift test` build it.
        .testTarget(name: "CLITests", dependencies: ["streamlens", "face-blur", "StreamLensCore", "StreamLensAPI", "StreamLensTesting", "StreamLensBuses"]),
    ]
)
