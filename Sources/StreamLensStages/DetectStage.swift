import Foundation
import StreamLensCore
import StreamLensInference

/// `lensdetect`: finds objects with a detector described by a manifest in Models/ (its labels
/// name the classes), attaches each as a region of interest (GstVideoRegionOfInterestMeta in DL
/// Streamer's layout) for the stages after it, and — as shortcuts for `lensoverlay` and
/// `lensmetadata`, with the same code — can draw them and write them as JSON Lines.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect model=Models/face-short-range.json metadata=faces.jsonl ! videoconvert ! autovideosink'
///
/// Pre-processing (pad for letterbox, crop for centre-crop, colour order, resize, value range)
/// is the backend's (OpenVINO compiles it into the model for the negotiated frame size);
/// inference, decoding and suppression run on the stage's worker thread.
public final class DetectStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensdetect",
        summary: "Detect objects with the model a manifest describes (OpenVINO or remote), attach regions of interest, draw them",
        example: "videotestsrc num-buffers=30 ! videoconvert ! lensdetect ! fakesink",
        sinkCaps: RegionPainter.sinkCaps,
        properties: Settings.table,
        keys: [
            KeyBinding(["f"], .toggle(property: "overlay"), help: "frame rate / latency overlay on or off"),
            KeyBinding(["i"], .cycle(property: "interval", values: ["1", "2", "4", "8"]), help: "inference interval: every 1st, 2nd, 4th, 8th frame"),
            KeyBinding(["b"], .toggle(property: "draw"), help: "boxes on or off"),
            KeyBinding(["d"], .cycle(property: "device", values: ["CPU", "GPU", "NPU", "AUTO"]),
                       help: "next device (one not present is refused with a warning; the next press goes on from it)"),
        ])

    public struct Settings: StageSettings {
        public var model = "Models/face-short-range.json"
        public var threshold = 0.0
        public var classes = ""
        public var crop = "manifest"
        public var suppression = "manifest"
        public var classAgnostic = "manifest"
        public var interval = 1
        public var maskSmoothing = 0.5
        public var draw = true
        public var color = "#00ff00"
        public var thickness = 3
        public var overlay = false
        public var metadata = ""
        public var inference = InferenceSettings()
        public var batch = BatchSettings()
        public var remote = RemoteSettings()
        public init() {}

        public static let properties: [Property<Settings>] = own + InferenceSettings.rows(\.inference, live: ["device"])
            + Property.group(\.batch) + Property.group(\.remote)

        private static let own: [Property<Settings>] = [
            .string("model", \.model, help: "model manifest (JSON) describing the model file, its input and its decoder"),
            .double("threshold", \.threshold, 0...1, help: "minimum score for every class (0: the manifest's min_score and class_thresholds)"),
            .string("classes", \.classes, help: "keep only these classes: label names, comma-separated (empty: all)"),
            .choice("crop", \.crop, ["manifest", "letterbox", "center-crop", "stretch"],
                    help: "how the frame becomes the model's input: letterbox sees the whole frame; center-crop loses objects outside the centre"),
            .choice("suppression", \.suppression, ["manifest", "weighted", "nms", "none"],
                    help: "overlap suppression: weighted averages overlapping boxes by score (the iOS app's), nms keeps the best"),
            .choice("class-agnostic", \.classAgnostic, ["manifest", "true", "false"],
                    help: "whether overlapping boxes of different classes suppress each other (default per class: the manifest's, usually false)"),
            .int("interval", \.interval, 1...1000, live: true,
                 help: "run the model every N-th frame; frames in between keep the last boxes, marked held (lenstrack after it moves them)"),
            .double("mask-smoothing", \.maskSmoothing, 0...0.95, live: true,
                    help: "segmentation models: how much of the earlier frames' mask each frame's keeps (an exponential average of the coverage, per label; 0: each frame's own). Steadies a flickering outline; a fast move's outline lags by about smoothing/(1-smoothing) frames"),
            .bool("draw", \.draw, live: true, help: "draw boxes and score labels (lensoverlay's drawing; draw=false ! lensoverlay draws them later)"),
            .string("color", \.color, live: true, help: "box colour: #rrggbb, class (a colour per label) or id (per object id)"),
            .int("thickness", \.thickness, 1...50, live: true, help: "box line width in pixels"),
            .bool("overlay", \.overlay, live: true,
                  help: "draw the stage's frame rate, inference time and (live sources) the frame's latency in the top-left corner (the iOS app's counter)"),
            .string("metadata", \.metadata,
                    help: "write detections as JSON Lines to this file (- for stdout): lensmetadata's writer (docs/metadata.md)"),
        ]
    }

    /// How the boxes are drawn, from the live settings (decoded at start and on each change).
    static func painter(_ settings: Settings) throws -> RegionPainter {
        // lensdetect always drew boxes and captions, not keypoints.
        RegionPainter(coloring: try RegionPainter.coloring(property: settings.color), thickness: Double(settings.thickness), keypoints: false)
    }

    private let manifest: ModelManifest
    private let manifestPath: String
    /// The manifest's detector family (DecoderRegistry), with the stage's overrides.
    private var decoder: any DetectionDecoder
    /// What the decoder is made from again when the input's size follows the frame's
    /// (`size_from_frame`).
    private let decoderParameters: any DetectionDecoderParameters
    private let classes: DetectionClasses
    /// Where models come from (the process's backends, or a test's).
    private let models: ModelLoader
    private var options: InferenceOptions
    /// A live change of device: compiled in the background, swapped in between frames.
    private let swap: ModelSwap<InferenceOptions, (any ImageInference)?>
    private let crop: CropMode
    private var settings: Settings
    private var painter: RegionPainter
    /// Local (OpenVINO here) or remote (device=remote): the same asynchronous path.
    private var model: (any ImageInference)?
    /// Frames waiting for their inference, in order (local infer requests or a server's).
    private let queue = InferenceQueue<Waiting>()
    private struct Waiting {
        var frame: Frame
        /// The format's geometry and the decoder's outputs when the frame came (a caps or
        /// device change meanwhile does not touch frames already on their way).
        var geometry: FrameGeometry
        var outputs: [Int]
        var arrived: UInt64
    }
    /// The model outputs the decoder reads, in its order (`DetectionDecoder.bind`).
    private var outputIndices: [Int] = []
    private var geometry: FrameGeometry?
    /// The regions of the last inference (frames in between keep them: `interval`).
    private var last: [RegionOfInterest] = []
    /// `metadata=`: lensmetadata's writer.
    private var metadata: MetadataWriter?
    private var inferenceTimes = TimingWindow()
    private var inferenceMetrics = InferenceMetrics()
    /// Counts this stage in the process's thread budget (local models).
    private var modelUse: ModelUse?
    private var frameRate = FrameRateMeter()
    private var found = 0

    public convenience init(settings: Settings) throws { try self.init(settings: settings, models: .process) }

    public init(settings: Settings, models: ModelLoader) throws {
        self.settings = settings
        self.models = models
        painter = try Self.painter(settings)
        manifestPath = settings.model
        manifest = try ModelManifest.load(path: manifestPath)
        guard var parameters = manifest.decoder.detector else {
            throw StageError("\(manifestPath) describes an image-to-image model (decoder '\(manifest.decoder.name)'), not a detector; use it with lensstylize")
        }
        // The stage's properties win over the manifest; threshold= is every class's.
        let threshold = settings.threshold
        if threshold > 0 { parameters.minScore = threshold }
        if let method = SuppressionOptions.Method(rawValue: settings.suppression) { parameters.suppression.method = method }
        if let agnostic = Bool(settings.classAgnostic) { parameters.suppression.classAgnostic = agnostic }
        let names = commaList(settings.classes)
        let classes = try DetectionClasses(labels: manifest.labels, classThresholds: threshold > 0 ? [:] : manifest.classThresholds,
                                           keeping: names.isEmpty ? nil : names)
        decoderParameters = parameters
        self.classes = classes
        do {
            decoder = try parameters.makeDecoder(input: manifest.input, classes: classes)
        } catch let error as StageError {
            throw StageError("\(manifestPath): \(error.message)")
        }
        _ = try settings.remote.address(device: settings.inference.device, manifestPath: manifestPath) // a bad server= fails the start
        crop = CropMode(rawValue: settings.crop) ?? manifest.crop
        let options = InferenceOptions(settings.inference, batch: settings.batch)
        self.options = options
        swap = ModelSwap(running: options)
        do { try models.checkDevice(options.device) } catch { throw StageError("\(error)") }
        if options.device != RemoteSettings.device {
            // A catalogue model that is not installed fails the start, not the first frame.
            modelUse = models.register(model: try manifest.resolve(manifest.model, relativeTo: manifestPath))
        }
        if !settings.metadata.isEmpty { metadata = try MetadataWriter(location: settings.metadata) }
    }

    static var defaultCacheDirectory: String {
        let base = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"] ?? (NSHomeDirectory() + "/.cache")
        return base + "/streamlens/openvino"
    }

    public func formatChanged(_ format: VideoFormat) throws {
        self.format = format
        let (request, geometry) = try modelRequest(format, options: options)
        if manifest.input.sizeFromFrame != nil {
            do {
                decoder = try decoderParameters.makeDecoder(input: manifest.input.sized(forFrameWidth: format.width, height: format.height), classes: classes)
            } catch let error as StageError {
                throw StageError("\(manifestPath): \(error.message)")
            }
        }
        (model, outputIndices) = try models.load(request, manifest: manifestPath) { try self.decoder.bind($0) }
        self.geometry = geometry
        last = []
    }

    /// What to load for frames of `format` on `options`' device, and the frames' geometry.
    private func modelRequest(_ format: VideoFormat, options: InferenceOptions) throws -> (ModelRequest, FrameGeometry) {
        let sized = manifest.input.sized(forFrameWidth: format.width, height: format.height)
        let geometry = FrameGeometry(frameWidth: format.width, frameHeight: format.height,
                                     modelWidth: sized.width, modelHeight: sized.height, mode: crop)
        let region: FrameRegion
        switch crop {
        case .letterbox:
            let p = geometry.padding
            region = .pad(top: p.top, left: p.left, bottom: p.bottom, right: p.right)
        case .centerCrop:
            let c = geometry.crop
            region = .crop(x: c.x, y: c.y, width: c.width, height: c.height)
        case .stretch:
            region = .whole
        }
        let input = ImageInput(sized)
        let frame = FrameLayout(width: format.width, height: format.height, pixelFormat: format.pixelFormat, stride: format.strides[0])
        let source = try settings.remote.address(device: settings.inference.device, manifestPath: manifestPath).map(ModelSource.server)
            ?? .file(try manifest.resolve(manifest.model, relativeTo: manifestPath))
        return (ModelRequest(source: source, input: input, frame: frame, region: region, options: options, resizable: manifest.input.resizable), geometry)
    }

    /// Every frame waits, in order, for its inference (or for the frames ahead of it, between
    /// `interval`s): submitted now, finished by `finishOldest`.
    public func process(_ frame: Frame) -> FrameOutcome {
        applyFinishedSwaps()
        guard let model, let geometry else { return .forward }
        let waiting = Waiting(frame: frame, geometry: geometry, outputs: outputIndices, arrived: DispatchTime.now().uptimeNanoseconds)
        if frame.index % settings.interval == 0 {
            do {
                try frame.pixels.withBytes { try queue.submit(model, pixels: $0, context: waiting) }
            } catch {
                return .failed(reason: "\(error)")
            }
        } else {
            queue.queueWithoutInference(waiting)
        }
        return .pending
    }

    /// The oldest frame, once its inference is in (or the window of requests in flight is full,
    /// or the stream ends: then it waits), with its boxes. A server's failed request lets the
    /// frame go on without boxes; the server is tried again after a back-off, and the stage
    /// says when it went away and when it came back.
    public func finishOldest(wait: Bool) -> FrameOutcome? {
        guard !queue.isEmpty else { return .forward }
        guard let (waiting, outcome) = queue.takeOldest(wait: wait) else { return nil }
        notices += queue.takeNotices()
        switch outcome {
        case .outputs(let outputs, let milliseconds):
            last = regions(waiting.outputs.map { outputs[$0] }.withBuffers { decoder.decode($0) }, waiting.geometry)
            recordInferenceTime(milliseconds)
        case .notAsked:
            // The last boxes stay, marked held: a tracker after this stage moves them instead.
            for i in last.indices { last[i].estimate = .held }
        case .serverAway, .lost:
            last = []
        case .failed(let error):
            return .failed(reason: "\(error)")
        }
        annotate(waiting.frame, arrived: waiting.arrived)
        return .forward
    }

    private func recordInferenceTime(_ milliseconds: Double) {
        inferenceMetrics.observe(milliseconds: milliseconds)
        inferenceTimes.record(milliseconds)
    }

    /// Decoded detections (model space) as regions in frame pixels.
    private func regions(_ detections: [Detection], _ geometry: FrameGeometry) -> [RegionOfInterest] {
        steadied(detections.map { RegionOfInterest(geometry.toFrame($0)) })
    }

    /// The last masks by label id (`mask-smoothing`), for labels with one region a frame.
    private var earlierMasks: [Int: (box: Box, mask: ObjectMask)] = [:]

    /// Masks averaged over frames (`mask-smoothing`): a label's one mask blended with its last
    /// blend. Labels with several regions (instances) are left as they are: which earlier mask
    /// is whose is a tracker's question.
    private func steadied(_ regions: [RegionOfInterest]) -> [RegionOfInterest] {
        guard settings.maskSmoothing > 0, regions.contains(where: { $0.mask != nil }) else {
            earlierMasks = [:]
            return regions
        }
        var out = regions, next: [Int: (box: Box, mask: ObjectMask)] = [:]
        let counts = Dictionary(regions.map { ($0.labelId, 1) }, uniquingKeysWith: +)
        for i in out.indices where counts[out[i].labelId] == 1 {
            guard let mask = out[i].mask else { continue }
            if let e = earlierMasks[out[i].labelId] {
                let (union, blended) = mask.blended(over: out[i].box, with: e.mask, over: e.box, weight: 1 - settings.maskSmoothing)
                let (box, trimmed) = blended.trimmed(over: union) ?? (union, blended)
                out[i].box = box
                out[i].mask = trimmed
            }
            next[out[i].labelId] = (out[i].box, out[i].mask!)
        }
        earlierMasks = next
        return out
    }

    /// The frame's regions (`last`) attached, drawn, written; the frame's time in the stage
    /// counted for the latency it reports.
    private func annotate(_ frame: Frame, arrived: UInt64) {
        found += last.count
        for region in last { frame.pixels.addRegionOfInterest(region) }
        frameRate.frameArrived()
        if (settings.draw && !last.isEmpty) || settings.overlay {
            let corner = settings.overlay ? frameRate.cornerText(age: frame.ageOnArrival,
                                                            extra: String(format: "inference %.1f ms", inferenceTimes.last ?? 0)) : nil
            painter.paint(settings.draw ? last : [], on: frame, corner: corner)
        }
        if let metadata { notices += metadata.write(last, frame: frame) }
        let inStage = Double(DispatchTime.now().uptimeNanoseconds - arrived) / 1e6
        latency.add(milliseconds: inStage)
        stageTimes.record(inStage)
    }

    /// Each frame's time from arrival to leaving the stage, in milliseconds (a remote model's
    /// frames wait for their answers in order: this is the latency the stage adds).
    private var stageTimes = TimingWindow()

    public var latencyNanoseconds: UInt64 { latency.nanoseconds }
    private var latency = ReportedLatency()

    /// The drawing settings, and a device this machine has (compiling for it is left to the change).
    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws {
        _ = try painter(settings)
        if changing.contains("device") { try ModelLoader.process.checkDevice(settings.inference.device) }
    }

    public func settingsChanged(_ settings: Settings) {
        do {
            painter = try Self.painter(settings)
        } catch {
            notices.append(StageNotice(.warning, "\(error); keeping the previous settings"))
            return
        }
        self.settings = settings
        // A new device: the model is compiled for it in the background while frames go on
        // through the current one (ModelSwap), and swapped in between two frames; one that is
        // not there, or fails to compile, is refused and the current one kept.
        var next = options
        next.device = settings.inference.device
        let (models, manifestPath) = (models, manifestPath)
        let request = format.flatMap { try? modelRequest($0, options: next).0 }
        swap.requestDevice(next.device, running: options, notices: &notices) { next in
            try models.checkDevice(next.device)
            do { return try request.map { try models.load($0) } } catch let error as InferenceError { throw StageError("\(manifestPath): \(error.message)") }
        }
    }

    /// Between frames: a model compiled for another device swapped in, or refused.
    private func applyFinishedSwaps() {
        swap.applyDeviceChanges(running: &options, notices: &notices, doing: "detecting") { loaded in
            if let loaded { (model, outputIndices) = (loaded, try decoder.bind(loaded.outputs.map { ModelOutput(name: $0.name, shape: $0.shape) })) }
        }
    }

    private var format: VideoFormat?
    private var notices: [StageNotice] = []
    public func takeNotices() -> [StageNotice] { notices.take() }

    public var metrics: [Metric] {
        inferenceMetrics.metrics(model: manifestPath, device: options.device, running: model)
            + [.counter("streamlens_regions_detected_total", "Regions the detector found (frames it ran on; interval= repeats are not counted)", found)]
    }

    public var summary: String? {
        guard let inference = inferenceTimes.median else { return nil }
        // "20 face boxes" for a one-class detector, "20 boxes" for several classes.
        let what = manifest.labels.count == 1 ? "\(manifest.labels[0]) boxes" : "boxes"
        let text = String(format: "inference %.1f ms median (%d runs), %d %@, frame in stage p50 %.1f ms p95 %.1f ms", inference,
                          inferenceTimes.count, found, what, stageTimes.median ?? 0, stageTimes.percentile(95) ?? 0)
        let settings = model?.settings ?? ""
        return [text, settings, queue.summary ?? "", metadata?.summary ?? ""].filter { !$0.isEmpty }.joined(separator: ", ")
    }

    public func streamEnded() { notices += metadata?.finish() ?? [] }
}
