import Foundation
import StreamLensCore
import StreamLensInference

/// `lensclassify`: a second model on every region that reaches it (DeepStream's secondary
/// GIE, DL Streamer's gvaclassify): each region (of `labels`, at least `min-size` pixels) is
/// cropped as the manifest's `object_crop` says — grown, squared, turned upright by two
/// keypoints for MediaPipe's face mesh —, run through the model (the same asynchronous path as
/// lensdetect's: `nireq` requests in flight), and decoded by the manifest's decoder:
/// `classifier` (the best class, its confidence: a classification on the region, DL Streamer's
/// structure) or `landmarks` (points mapped back to frame pixels; with the manifest's
/// `mask_output`, also the object's mask, mapped back onto the frame and put on the region,
/// whose box grows to hold the crop). lensmetadata writes them, lensoverlay draws them.
///
///     streamlens run 'filesrc location=.deps/media/astronaut.png ! pngdec ! imagefreeze num-buffers=2 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! lensclassify model=Models/face-mesh.json ! lensclassify model=Models/emotion.json ! lensmetadata location=- ! fakesink'
///
/// BlazePose's body landmarks and person mask, on the crop its detector's hip and full-body
/// points make:
///
///     streamlens run 'filesrc location=.deps/media/astronaut.png ! pngdec ! imagefreeze num-buffers=1 ! videoconvert ! video/x-raw,format=RGB ! lensdetect model=Models/pose-detection.json draw=false ! lensclassify model=Models/pose-landmarks.json ! lensmetadata location=- ! fakesink'
///
/// After a tracker (`lenstrack`), `interval=N` runs the model on each object every N-th frame
/// only and keeps its last result in between (landmarks follow the object's box).
///
/// Text (decoder `ctc`, after lensdetect's `db` lines): the reading goes on the region as the
/// attributes `text` and `text_score`. After a tracker each object's readings are voted
/// (`TrackedTexts`): every region of the object carries its reading now, a `text` event says it
/// once it settles, and a settled object is not read again (docs/text.md).
///
///     streamlens run 'filesrc location=cars.mp4 ! decodebin ! videoconvert ! lensdetect model=Models/text-detection.json draw=false ! lenstrack ! lensclassify model=Models/text-recognition.json ! lensmetadata location=- ! fakesink'
public final class ClassifyStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensclassify",
        summary: "Run a second model on every region (landmarks, a classifier, a text reader) described by a manifest; results on the regions",
        example: "videotestsrc num-buffers=10 ! videoconvert ! video/x-raw,format=RGB ! lensdetect draw=false ! lensclassify model=Models/face-mesh.json ! fakesink",
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var model = "Models/face-mesh.json"
        public var labels = ""
        public var minSize = 16
        public var interval = 1
        public var inference = InferenceSettings()
        public var batch = BatchSettings()
        /// Text readers only (decoder ctc): the readings' pattern and the votes that settle one.
        public var platePattern = ""
        public var votes = 3
        public init() {}

        public static let properties: [Property<Settings>] = own + InferenceSettings.rows(\.inference, live: ["device"]) + Property.group(\.batch)

        private static let own: [Property<Settings>] = [
            .string("model", \.model, help: "second model manifest (decoder classifier, landmarks or ctc, and its object_crop)"),
            LabelFilter.property(\.labels, "run on regions with these labels only", live: true),
            .int("min-size", \.minSize, 0...100_000, live: true, help: "skip regions whose shorter side is smaller than this, in pixels"),
            .int("interval", \.interval, 1...1000, live: true,
                 help: "with object ids (a tracker upstream): run on each object every N-th frame, keep its last result in between"),
            .string("plate-pattern", \.platePattern,
                    help: "text readers (decoder ctc): a regular expression every reading must match whole, once made of capitals and digits; O/0, I/1, B/8, S/5, Z/2 are swapped to fit it (e.g. [A-Z]{2}[0-9]{4}; empty: any text)"),
            .int("votes", \.votes, 1...1000,
                 help: "text readers, after a tracker: a tracked object's reading is settled (the text event, no more reading) once this many of its crops agree on it"),
        ]
    }

    struct LiveSettings {
        var labels: LabelFilter
        var minSize: Double
        var interval: Int
        init(_ settings: Settings) {
            labels = LabelFilter(text: settings.labels)
            minSize = Double(settings.minSize)
            interval = settings.interval
        }
    }

    private let manifest: ModelManifest
    private let manifestPath: String
    private let modelPath: String
    private let crop: ObjectCrop
    private let decoder: any RegionDecoder
    /// Where models come from (the process's backends, or a test's).
    private let models: ModelLoader
    private var options: InferenceOptions
    /// A live change of device: compiled in the background, swapped in between frames.
    private let swap: ModelSwap<InferenceOptions, any ImageInference>
    private var live: LiveSettings
    private var model: (any ImageInference)?
    private var outputIndices: [Int] = []
    private var source: CropSampling.Source?
    private let gray: Bool
    private var crops: [UInt8] = []
    private let modelUse: ModelUse

    /// One crop on its way.
    private struct Job { var region: Int; var placement: ObjectCrop.Placement; var objectId: Int }
    private let queue = InferenceQueue<Job>()
    /// Frames waiting for their crops, oldest first: how many crops each sent, the results in.
    private struct Waiting {
        var frame: Frame
        var jobs: Int
        var done = 0
        var results: [(region: Int, result: RegionResult, placement: ObjectCrop.Placement)]
        /// interval: regions that take their object's last result, found when the frame is
        /// applied (after the frames before it, whose runs give it).
        var reuse: [(region: Int, objectId: Int, placement: ObjectCrop.Placement)] = []
    }
    private var waiting: [Waiting] = []
    /// interval: the frame each object was last sent from, and its last result.
    private var lastRun: [Int: Int] = [:]
    private var lastResult: [Int: (frame: Int, result: RegionResult)] = [:]
    private var inferenceTimes = TimingWindow()
    private var inferenceMetrics = InferenceMetrics()
    private var cropTimes = TimingWindow()
    private var counts = (crops: 0, reused: 0, small: 0, noKeypoints: 0, absent: 0, masks: 0, cut: 0, settled: 0)
    /// Text readers (decoder ctc): each tracked object's readings voted.
    private var texts: TrackedTexts?
    private let padding: [UInt8]
    private var notices: [StageNotice] = []

    public convenience init(settings: Settings) throws { try self.init(settings: settings, models: .process) }

    public init(settings: Settings, models: ModelLoader) throws {
        self.models = models
        live = LiveSettings(settings)
        manifestPath = settings.model
        manifest = try ModelManifest.load(path: manifestPath)
        guard let parameters = manifest.decoder.region else {
            throw StageError("\(manifestPath) describes a model with decoder '\(manifest.decoder.name)', not a second model (classifier, landmarks or ctc); "
                             + (manifest.decoder.detector != nil ? "use it with lensdetect" : "use it with lensstylize"))
        }
        decoder = parameters.makeDecoder(input: manifest.input, labels: manifest.labels)
        crop = manifest.objectCrop ?? ObjectCrop()
        gray = manifest.input.colorOrder == .gray
        padding = manifest.input.zeroPixel
        if let reader = parameters as? TextRecognitionDecoderOptions {
            texts = TrackedTexts(attribute: reader.attribute, votes: try TextVotes(needed: settings.votes, pattern: settings.platePattern))
        }
        let options = InferenceOptions(settings.inference, batch: settings.batch)
        self.options = options
        swap = ModelSwap(running: options)
        guard options.device != RemoteSettings.device else {
            throw StageError("lensclassify runs its model here (crops are many and small); device=remote is for lensdetect and lensstylize")
        }
        do { try models.checkDevice(options.device) } catch { throw StageError("\(error)") }
        modelPath = try manifest.resolve(manifest.model, relativeTo: manifestPath)
        modelUse = models.register(model: modelPath)
    }

    public func formatChanged(_ format: VideoFormat) throws {
        source = CropSampling.Source(width: format.width, height: format.height, stride: format.strides[0], pixelFormat: format.pixelFormat)
        guard model == nil else { return } // the crops are the model's size whatever the frame's
        (model, outputIndices) = try models.load(modelRequest(options), manifest: manifestPath) { try self.decoder.bind($0) }
    }

    /// The model on `options`' device, for crops of the model's own size.
    private func modelRequest(_ options: InferenceOptions) -> ModelRequest {
        let (w, h) = (manifest.input.width, manifest.input.height)
        let input = ImageInput(manifest.input)
        let layout = FrameLayout(width: w, height: h, pixelFormat: gray ? "GRAY8" : "RGB", stride: w * (gray ? 1 : 3))
        return ModelRequest(source: .file(modelPath), input: input, frame: layout, options: options, resizable: manifest.input.resizable)
    }

    /// Between frames: a model compiled for another device swapped in (the crops waiting go on
    /// with the model they were sent to), or refused.
    private func applyFinishedSwaps() {
        swap.applyDeviceChanges(running: &options, notices: &notices, doing: "classifying") { loaded in
            outputIndices = try decoder.bind(loaded.outputs.map { ModelOutput(name: $0.name, shape: $0.shape) })
            model = loaded
        }
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        applyFinishedSwaps()
        guard let model, let source else { return .forward }
        let regions = frame.pixels.regionsOfInterest()
        var entry = Waiting(frame: frame, jobs: 0, results: [])
        for (i, region) in regions.enumerated() {
            if !live.labels.admits(region.label) { continue }
            guard min(region.width, region.height) >= live.minSize else { counts.small += 1; continue }
            guard crop.inView(region, width: source.width, height: source.height) else { counts.cut += 1; continue }
            if texts?.isSettled(region, frame: frame.index) == true { counts.settled += 1; continue }
            guard let placement = crop.placement(of: region, inputWidth: manifest.input.width, inputHeight: manifest.input.height) else {
                counts.noKeypoints += 1
                continue
            }
            if live.interval > 1, region.objectId >= 0, let last = lastRun[region.objectId], frame.index - last < live.interval {
                entry.reuse.append((i, region.objectId, placement))
                counts.reused += 1
                continue
            }
            if region.objectId >= 0 { lastRun[region.objectId] = frame.index }
            let start = DispatchTime.now().uptimeNanoseconds
            frame.pixels.withBytes { bytes in
                CropSampling.sample(bytes, source, placement: placement, outWidth: manifest.input.width, outHeight: manifest.input.height,
                                    gray: gray, padding: padding, into: &crops)
            }
            cropTimes.record(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            do {
                try crops.withUnsafeBytes { try queue.submit(model, pixels: $0, context: Job(region: i, placement: placement, objectId: region.objectId)) }
            } catch {
                return .failed(reason: "\(error)")
            }
            entry.jobs += 1
            counts.crops += 1
        }
        guard entry.jobs > 0 || !waiting.isEmpty else {
            apply(entry)
            return .forward
        }
        waiting.append(entry)
        return .pending
    }

    public func finishOldest(wait: Bool) -> FrameOutcome? {
        guard var first = waiting.first else { return .forward }
        while first.done < first.jobs {
            guard let (job, outcome) = queue.takeOldest(wait: wait) else {
                waiting[0] = first
                return nil
            }
            first.done += 1
            switch outcome {
            case .outputs(let outputs, let milliseconds):
                let result = outputIndices.map { outputs[$0] }.withBuffers { decoder.decode($0) }
                inferenceTimes.record(milliseconds)
                inferenceMetrics.observe(milliseconds: milliseconds)
                first.results.append((job.region, result, job.placement))
                if job.objectId >= 0 { lastResult[job.objectId] = (first.frame.index, result) }
            case .failed(let error):
                // The frame's other crops are still queued: they are taken with the next frames'
                // (a failed frame's crops answer for nothing).
                waiting.removeFirst()
                for _ in first.done..<first.jobs { _ = queue.takeOldest(wait: true) }
                return .failed(reason: "\(error)")
            case .notAsked, .serverAway, .lost:
                break
            }
        }
        waiting.removeFirst()
        apply(first)
        if lastResult.count > 4096 {
            lastResult = lastResult.filter { first.frame.index - $0.value.frame < 1000 }
            lastRun = lastRun.filter { first.frame.index - $0.value < 1000 }
        }
        return .forward
    }

    /// The results written onto the frame's regions.
    private func apply(_ entry: Waiting) {
        var entry = entry
        for r in entry.reuse {
            // A kept reading is no new vote: the object's reading is written below anyway.
            guard let last = lastResult[r.objectId], texts == nil else { continue }
            entry.results.append((r.region, last.result, r.placement))
        }
        guard !entry.results.isEmpty || texts != nil else { return }
        var regions = entry.frame.pixels.regionsOfInterest()
        var changed = Set<Int>()
        for (i, result, placement) in entry.results where regions.indices.contains(i) {
            if write(result, placement: placement, on: &regions[i], frame: entry.frame.index) { changed.insert(i) }
        }
        if texts != nil {
            // Every region of a tracked object carries its reading, read on this frame or not.
            changed.formUnion(texts!.label(&regions))
            entry.frame.pixels.addEvents(texts!.takeEvents(time: entry.frame.pts.map { Double($0) / 1e9 }))
        }
        for i in changed.sorted() { entry.frame.pixels.updateRegionOfInterest(regions[i], at: i) }
    }

    /// One result on its region, in frame pixels (read on frame `frame`: a text reading votes there); false when there is nothing to write.
    private func write(_ result: RegionResult, placement: ObjectCrop.Placement, on region: inout RegionOfInterest, frame: Int) -> Bool {
        switch result {
        case .classification(let c):
            region.classifications.removeAll { $0.name == c.name }
            region.classifications.append(c)
        case .landmarks(let name, let points, let presence):
            guard let points else { counts.absent += 1; return false }
            region.landmarks = .init(name: name, points: points.map { p in
                let f = placement.frame(p[0], p[1])
                return p.count > 2 ? [f.x, f.y, p[2] * placement.width] : [f.x, f.y]
            }, presence: presence)
        case .text(let name, let reading, let score):
            guard !reading.isEmpty else { counts.absent += 1; return false }
            guard region.objectId >= 0, texts != nil else {
                region.attributes[name] = reading
                region.attributes[name + "_score"] = TrackedTexts.format(score)
                return true
            }
            texts!.vote(reading, score: score, on: region, frame: frame)
            return false // `label` writes the object's reading
        case .masked(let inner, let cropMask):
            guard write(inner, placement: placement, on: &region, frame: frame) else { return false }
            guard let source else { return true }
            // A mask covers its region's box (ObjectMask), so either the mask is cut to the box
            // or the box grows. Cut, BlazePose's mask would be lost almost whole: its detector's
            // box is the face's, the body is below it. So the box grows to hold the crop (the
            // union of the two, clamped to the frame, in whole pixels, as the meta keeps boxes)
            // and the mask covers that; past the crop it is 0, as in MediaPipe's inverse warp.
            let crop = placement.enclosingBox, own = region.box
            let (width, height) = (Double(source.width), Double(source.height))
            func inFrame(_ v: Double, _ limit: Double) -> Double { min(max(v, 0), limit) }
            let box = Box(xMin: inFrame(min(own.xMin, crop.xMin), width).rounded(.down), yMin: inFrame(min(own.yMin, crop.yMin), height).rounded(.down),
                          xMax: inFrame(max(own.xMax, crop.xMax), width).rounded(.up), yMax: inFrame(max(own.yMax, crop.yMax), height).rounded(.up))
            guard box.width > 0, box.height > 0, let mask = placement.frameMask(cropMask, over: box) else { return true }
            region.box = box
            region.mask = mask
            counts.masks += 1
        }
        return true
    }

    /// A device this machine has (compiling for it is left to the change).
    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws {
        if changing.contains("device") { try ModelLoader.process.checkDevice(settings.inference.device) }
    }

    public func settingsChanged(_ settings: Settings) {
        live = LiveSettings(settings)
        var next = options
        next.device = settings.inference.device
        guard next.device != RemoteSettings.device else {
            return notices.append(StageNotice(.warning, "lensclassify runs its model here; keeping \(options.device)", restore: ["device": .string(options.device)]))
        }
        let (models, request, manifestPath) = (models, modelRequest(next), manifestPath)
        swap.requestDevice(next.device, running: options, notices: &notices) { _ in
            try models.checkDevice(request.options.device)
            do { return try models.load(request) } catch let error as InferenceError { throw StageError("\(manifestPath): \(error.message)") }
        }
    }

    public func takeNotices() -> [StageNotice] { notices.take() + queue.takeNotices() }

    public var latencyNanoseconds: UInt64 {
        guard let median = inferenceTimes.median else { return 0 }
        return UInt64(median * 2e6)
    }

    public var metrics: [Metric] {
        inferenceMetrics.metrics(model: manifestPath, device: options.device, running: model)
            + [.counter("streamlens_crops_total", "Region crops the second model ran on", counts.crops)]
    }

    public var summary: String? {
        guard counts.crops + counts.reused + counts.small + counts.noKeypoints > 0 else { return nil }
        func median(_ v: TimingWindow) -> Double { v.median ?? 0 }
        var parts = [String(format: "%d crops, inference %.1f ms median, crop %.2f ms", counts.crops, median(inferenceTimes), median(cropTimes))]
        if counts.reused > 0 { parts.append("\(counts.reused) results kept between runs (interval)") }
        if counts.small > 0 { parts.append("\(counts.small) regions under min-size") }
        if counts.noKeypoints > 0 { parts.append("\(counts.noKeypoints) regions without the keypoints the crop turns by") }
        if counts.absent > 0 { parts.append("\(counts.absent) crops where the model saw no object\(texts != nil ? " (no reading)" : "")") }
        if counts.cut > 0 { parts.append("\(counts.cut) regions too near the frame's edge (edge_margin)") }
        if counts.settled > 0 { parts.append("\(counts.settled) regions of objects whose text is settled") }
        if let settled = texts?.summary { parts.append(settled) }
        if counts.masks > 0 { parts.append("\(counts.masks) masks") }
        if let settings = model?.settings, !settings.isEmpty { parts.append(settings) }
        return parts.joined(separator: ", ")
    }
}
