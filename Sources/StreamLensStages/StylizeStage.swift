import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// `lensstylize`: turns every frame into a painting with an image-to-image model described by a
/// manifest in Models/: a feed-forward stylizer (Johnson-style, Create ML video styles imported
/// with `streamlens import`) or an arbitrary-style network (Magenta) that copies the style of
/// any picture given as `style-image`.
///
///     streamlens run 'filesrc location=in.mp4 ! decodebin ! videoconvert ! lensstylize model=Models/magenta-style.json style-image=painting.jpg strength=0.8 ! videoconvert ! autovideosink'
///
/// Real time by design: the frame is shrunk to `inference-size` (a box filter, in Swift), the
/// model runs at that size, and its output is scaled back onto the frame (bilinear) blended
/// with the original by `strength`. So the model's cost does not grow with the frame, and one
/// compiled model serves every frame size mapping to the same inference size.
///
/// Effects limited to objects: `regions=inside` stylizes only the regions of interest that reach
/// the stage (a detector's boxes: `lensdetect draw=false` before it), `regions=outside`
/// everything but them; `labels` keeps only regions of those labels. The stylized picture is
/// blended through a mask that ramps over `feather` pixels inside each box's edge, so pixels
/// outside every box are left exactly as they were (inside) or fully stylized (outside). A frame
/// with no such region and `regions=inside` goes on untouched without running the model.
///
///     streamlens run 'filesrc location=in.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false ! lensstylize model=Models/mosaic.json regions=outside ! videoconvert ! autovideosink'
///
/// Steady video: `temporal=blend` (the default) blends each output with the previous one moved
/// along the input's motion (MotionBlend), so the marks stay on the surfaces they paint instead
/// of crawling; `temporal=off` paints every frame on its own.
///
/// Live: strength, temporal, smoothing, regions, labels and feather apply from the next frame; a new
/// model, style image, device or precision is loaded in the background while frames keep
/// flowing through the current one, and replaces it between two frames (or is refused with a
/// warning, keeping the current one).
public final class StylizeStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensstylize",
        summary: "Stylize frames with an image-to-image model (OpenVINO or remote): feed-forward styles or any style image (Magenta)",
        example: "videotestsrc num-buffers=30 ! videoconvert ! lensstylize model=Models/waves.json ! fakesink",
        sinkCaps: "video/x-raw,format={BGRx,BGRA,RGBx,RGBA,RGB,BGR}",
        properties: Settings.table,
        keys: KeyBinding.numberKeys(property: "model", listProperty: "styles", help: "style model: the n-th of `styles`") + [
            KeyBinding(["equal", "plus", "KP_Add"], label: "+", .step(property: "strength", by: 0.1), help: "strength up by 0.1"),
            KeyBinding(["minus", "KP_Subtract"], label: "-", .step(property: "strength", by: -0.1), help: "strength down by 0.1"),
            KeyBinding(["d"], .cycle(property: "device", values: ["CPU", "GPU", "NPU", "AUTO"]),
                       help: "next device (one not present is refused with a warning; the next press goes on from it)"),
            KeyBinding(["t"], .cycle(property: "temporal", values: TemporalMode.allCases.map(\.rawValue)), help: "temporal: blend, off"),
            KeyBinding(["s"], .cycle(property: "smoothing", values: ["0.3", "0.6", "0.8"]), help: "smoothing (with temporal=blend): 0.3, 0.6, 0.8"),
            KeyBinding(["r"], .cycle(property: "regions", values: ["all", "inside", "outside"]), help: "regions: all, inside, outside"),
        ])

    /// Where models come from (the process's backends, or a test's).
    private let models: ModelLoader
    private var settings: Settings
    private var live: LiveSettings
    private var stylizer: Stylizer
    /// Live changes of model, style, device or precision: built in the background, swapped in
    /// between frames.
    private var swap: ModelSwap<StylizerConfiguration, Reload>!
    /// What a background load makes: a new stylizer, or (the same model) a new style vector.
    enum Reload {
        case stylizer(Stylizer)
        case style([Float], image: String)
    }
    private var notices: [StageNotice] = []

    private var format: VideoFormat?
    /// The frame shrunk to the inference size, in the model's channel order.
    private var small: [UInt8] = []
    /// The model's output as packed RGB.
    private var styled: [UInt8] = []
    private var styledSize = (width: 0, height: 0)
    /// temporal=blend: the previous output and input, and the blend along the motion between inputs.
    private var motion = MotionBlend(weight: 0)

    /// Frames that went on untouched because no region matched (regions=inside).
    private var framesWithoutRegions = 0
    private var inferenceTimes = TimingWindow()
    private var inferenceMetrics = InferenceMetrics()
    private var frameTimes = TimingWindow()
    private var shrinkTimes = TimingWindow(), convertTimes = TimingWindow(), blendTimes = TimingWindow(), temporalTimes = TimingWindow()
    /// Manifest + style vector, and the first compile (from OpenVINO's cache after the first run).
    private var startupMilliseconds = (style: 0.0, compile: 0.0)

    public convenience init(settings: Settings) throws { try self.init(settings: settings, models: .process) }

    public init(settings: Settings, models: ModelLoader) throws {
        self.settings = settings
        self.models = models
        live = LiveSettings(settings)
        let configuration = try Self.configuration(from: settings)
        do { try models.checkDevice(configuration.options.device) } catch { throw StageError("\(error)") }
        let started = DispatchTime.now().uptimeNanoseconds
        stylizer = try Stylizer(configuration, models: models)
        startupMilliseconds.style = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        swap = ModelSwap(running: configuration)
    }

    static func configuration(from settings: Settings) throws -> StylizerConfiguration {
        StylizerConfiguration(manifestPath: settings.model, styleImage: settings.styleImage,
                              inferenceSize: try InferenceSize.parse(settings.inferenceSize),
                              options: InferenceOptions(settings.inference, batch: settings.batch),
                              remote: try settings.remote.address(device: settings.inference.device, manifestPath: settings.model))
    }

    public func formatChanged(_ format: VideoFormat) throws {
        guard PackedRGBLayout(pixelFormat: format.pixelFormat) != nil else {
            throw StageError("cannot stylize \(format.pixelFormat) frames (use a videoconvert before the stage)")
        }
        self.format = format
        // Compile now, so a model that cannot run fails the start rather than the first frame.
        let started = DispatchTime.now().uptimeNanoseconds
        _ = try stylizer.model(width: inferenceSize(format).width, height: inferenceSize(format).height)
        if startupMilliseconds.compile == 0 { startupMilliseconds.compile = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6 }
        motion.reset()
    }

    private func inferenceSize(_ format: VideoFormat) -> (width: Int, height: Int) {
        stylizer.configuration.inferenceSize.resolve(frameWidth: format.width, frameHeight: format.height,
                                                     manifestWidth: stylizer.manifest.input.width, manifestHeight: stylizer.manifest.input.height)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        applyFinishedReloads()
        let strength = live.strength
        guard strength > 0, let format = self.format, let frameLayout = PackedRGBLayout(pixelFormat: format.pixelFormat) else {
            return .forward // strength 0: the frame goes on untouched
        }
        let mask: RegionMask?
        switch live.coverage(of: frame) {
        case .whole: mask = nil
        case .masked(let m): mask = m
        case .nothing:
            framesWithoutRegions += 1
            return .forward // regions=inside and no region: nothing to stylize, the model not run
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let size = inferenceSize(format)
        let compiled: (model: any ImageInference, output: Int)
        do {
            compiled = try stylizer.model(width: size.width, height: size.height)
        } catch {
            return .failed(reason: "\(error)")
        }
        let modelLayout: PackedRGBLayout = stylizer.manifest.input.colorOrder == .bgr ? .bgr : .rgb
        if small.count != size.width * size.height * 3 { small = [UInt8](repeating: 0, count: size.width * size.height * 3) }
        frame.pixels.withBytes { bytes in
            small.withUnsafeMutableBytes { out in
                Resampling.areaResize(
                    PixelPlane(base: UnsafeMutableRawPointer(mutating: bytes.baseAddress!), width: format.width, height: format.height,
                               stride: format.strides[0], layout: frameLayout),
                    into: PixelPlane(base: out.baseAddress!, width: size.width, height: size.height, stride: size.width * 3, layout: modelLayout))
            }
        }
        let inferStart = DispatchTime.now().uptimeNanoseconds
        // The shrunk picture is copied into the request (or sent) now; the frame waits, in
        // order, for its output (finishOldest).
        let waiting = Waiting(frame: frame, output: compiled.output, outputShape: compiled.model.outputs[compiled.output].shape,
                              decoding: stylizer.output, small: small, smallSize: size, strength: strength, mask: mask, layout: frameLayout,
                              start: start, sent: inferStart)
        do {
            try small.withUnsafeBytes { try queue.submit(compiled.model, pixels: $0, context: waiting) }
        } catch {
            return .failed(reason: "\(error)")
        }
        return .pending
    }

    /// Frames waiting for their stylized picture, oldest first (local infer requests or a
    /// server's), each with its shrunk picture (temporal=blend follows the motion between consecutive ones).
    private let queue = InferenceQueue<Waiting>()
    private struct Waiting {
        var frame: Frame
        var output: Int
        var outputShape: [Int]
        /// The manifest's output description: a stylizer swapped meanwhile has its own.
        var decoding: ModelManifest.ImageOutput
        var small: [UInt8]
        var smallSize: (width: Int, height: Int)
        var strength: Double
        /// Where to blend: the frame's regions as they were when it arrived (nil: everywhere).
        var mask: RegionMask?
        var layout: PackedRGBLayout
        var start: UInt64
        var sent: UInt64
    }

    /// The oldest frame, once its output is in (or the window of requests in flight is full, or
    /// the stream ends). A server's failed request lets the frame go on unstylized; the server
    /// is tried again after a back-off.
    public func finishOldest(wait: Bool) -> FrameOutcome? {
        guard !queue.isEmpty else { return .forward }
        guard let (waiting, outcome) = queue.takeOldest(wait: wait) else { return nil }
        notices += queue.takeNotices()
        switch outcome {
        case .outputs(let outputs, _):
            let convertStart = DispatchTime.now().uptimeNanoseconds
            outputs[waiting.output].values.withUnsafeBufferPointer { writeStyled($0, shape: waiting.outputShape, as: waiting.decoding) }
            let convertEnd = DispatchTime.now().uptimeNanoseconds
            small = waiting.small
            let temporal = steady(inputSize: waiting.smallSize)
            finish(waiting.frame, strength: waiting.strength, mask: waiting.mask, layout: waiting.layout,
                   times: (waiting.start, waiting.sent, convertStart, convertEnd, temporal))
            return .forward
        case .notAsked, .serverAway, .lost:
            return .forward // unstylized
        case .failed(let error):
            return .failed(reason: "\(error)")
        }
    }

    /// The model's output image into `styled` (packed RGB at the inference size).
    private func writeStyled(_ values: UnsafeBufferPointer<Float>, shape: [Int], as output: ModelManifest.ImageOutput) {
        let planar = output.layout == .nchw
        guard let (w, h) = FloatImage.size(ofShape: shape, planar: planar) else { return }
        if styled.count != w * h * 3 { styled = [UInt8](repeating: 0, count: w * h * 3) }
        styledSize = (w, h)
        let image = FloatImage(values: values, width: w, height: h, planar: planar, bgr: output.colorOrder == .bgr,
                               low: Float(output.valueRange[0]), high: Float(output.valueRange[1]))
        styled.withUnsafeMutableBufferPointer { image.writeRGB(into: $0) }
    }

    /// The stylized picture scaled and blended onto the frame (through the mask, when limited to
    /// regions); the frame's times.
    private func finish(_ frame: Frame, strength: Double, mask: RegionMask?, layout frameLayout: PackedRGBLayout,
                        times: (start: UInt64, inferStart: UInt64, convertStart: UInt64, convertEnd: UInt64, temporal: UInt64?)) {
        let format = frame.format
        let blendStart = DispatchTime.now().uptimeNanoseconds
        frame.pixels.withMutableBytes { bytes in
            styled.withUnsafeMutableBytes { styledBytes in
                Resampling.bilinearBlend(
                    PixelPlane(base: styledBytes.baseAddress!, width: styledSize.width, height: styledSize.height,
                               stride: styledSize.width * 3, layout: .rgb),
                    onto: PixelPlane(base: bytes.baseAddress!, width: format.width, height: format.height,
                                     stride: format.strides[0], layout: frameLayout),
                    strength: strength, mask: mask)
            }
        }
        let end = DispatchTime.now().uptimeNanoseconds
        inferenceTimes.record(Double(times.convertStart - times.inferStart) / 1e6)
        inferenceMetrics.observe(milliseconds: Double(times.convertStart - times.inferStart) / 1e6)
        frameTimes.record(Double(end - times.start) / 1e6)
        shrinkTimes.record(Double(times.inferStart - times.start) / 1e6)
        convertTimes.record(Double(times.convertEnd - times.convertStart) / 1e6)
        blendTimes.record(Double(end - blendStart) / 1e6)
        if let temporal = times.temporal { temporalTimes.record(Double(temporal) / 1e6) }
        latency.add(milliseconds: Double(end - times.start) / 1e6)
    }

    /// temporal=blend: the new output blended with the previous one moved along the motion
    /// between their inputs (MotionBlend); before strength and regions, so both still apply
    /// as they are set. Off (or smoothing 0) forgets the past, so turning it on starts afresh.
    /// Returns the time it took (nil when off).
    private func steady(inputSize: (width: Int, height: Int)) -> UInt64? {
        guard live.temporal == .blend, live.smoothing > 0, styled.count == styledSize.width * styledSize.height * 3,
              small.count == inputSize.width * inputSize.height * 3 else {
            motion.reset()
            return nil
        }
        let started = DispatchTime.now().uptimeNanoseconds
        motion.weight = Float(live.smoothing)
        small.withUnsafeBytes { input in
            styled.withUnsafeMutableBufferPointer { output in
                motion.apply(input: input, width: inputSize.width, height: inputSize.height,
                             output: output, outputWidth: styledSize.width, outputHeight: styledSize.height)
            }
        }
        return DispatchTime.now().uptimeNanoseconds - started
    }

    /// A new model or style picture loads (compiling is left to the change), a new device is
    /// this machine's, and every manifest of a new `styles` loads.
    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws {
        let configuration = try configuration(from: settings)
        if !changing.isDisjoint(with: ["model", "style-image", "device", "precision"]) {
            _ = try Stylizer.check(configuration)
            try ModelLoader.process.checkDevice(configuration.options.device)
        }
        if changing.contains("styles") {
            for manifest in commaList(settings.styles) {
                _ = try ModelManifest.load(path: manifest)
            }
        }
    }

    public func settingsChanged(_ settings: Settings) {
        self.settings = settings
        live = LiveSettings(settings)
        var next: StylizerConfiguration
        do {
            next = try Self.configuration(from: settings)
        } catch {
            notices.append(StageNotice(.warning, "\(error); keeping \(describe(swap.wanted))"))
            return
        }
        // inference-size is not live: a change to it would reload for nothing.
        next.inferenceSize = stylizer.configuration.inferenceSize
        let (running, manifest, models) = (stylizer.configuration, stylizer.manifest, models)
        let frameSize = format.map { (width: $0.width, height: $0.height) }
        let started = swap.request(next, running: running) { next in
            try Self.reload(next, from: running, manifest: manifest, models: models, frameSize: frameSize)
        }
        if started { notices.append(StageNotice(.info, "loading \(describe(next))…")) }
    }

    /// Builds the replacement for `configuration` (a background load): the style vector alone
    /// when only the style picture changed, else a stylizer compiled for the current frames
    /// (here, not on the first frame after the swap).
    private static func reload(_ configuration: StylizerConfiguration, from running: StylizerConfiguration, manifest: ModelManifest,
                               models: ModelLoader, frameSize: (width: Int, height: Int)?) throws -> Reload {
        if configuration.differsOnlyInStyle(from: running) {
            let image = configuration.styleImage.isEmpty
                ? try manifest.style?.image.map { try manifest.resolve($0, relativeTo: configuration.manifestPath) } ?? ""
                : configuration.styleImage
            let vector = try Stylizer.predictStyle(manifest: manifest, manifestPath: configuration.manifestPath, image: image,
                                                   models: models, options: configuration.options)
            return .style(vector, image: image)
        }
        let stylizer = try Stylizer(configuration, models: models)
        try models.checkDevice(configuration.options.device)
        if let frameSize {
            let size = configuration.inferenceSize.resolve(frameWidth: frameSize.width, frameHeight: frameSize.height,
                                                          manifestWidth: stylizer.manifest.input.width, manifestHeight: stylizer.manifest.input.height)
            _ = try stylizer.model(width: size.width, height: size.height)
        }
        return .stylizer(stylizer)
    }

    /// Between frames: a finished load swapped in (and compiled for these frames), or refused.
    private func applyFinishedReloads() {
        var refusedAny = false
        for done in swap.takeFinished() {
            let configuration = done.configuration
            switch done.result {
            case .success(.stylizer(let next)):
                stylizer = next
                motion.reset()
                notices.append(StageNotice(.info, String(format: "now using %@ (loaded in %.0f ms)", describe(configuration), done.milliseconds)))
            case .success(.style(let vector, let image)):
                do {
                    try stylizer.setStyle(vector: vector, image: image, requested: configuration.styleImage)
                    motion.reset()
                    notices.append(StageNotice(.info, String(format: "now copying the style of %@ (%.0f ms)", image, done.milliseconds)))
                } catch {
                    refused(configuration, "\(error)")
                    refusedAny = true
                }
            case .failure(let error):
                refused(configuration, error.message)
                refusedAny = true
            }
        }
        swap.settled(running: stylizer.configuration, refused: refusedAny)
    }

    /// A live change that did not load: keep the current stylizer, and set the element's
    /// properties back to what it uses.
    private func refused(_ configuration: StylizerConfiguration, _ message: String) {
        let current = stylizer.configuration
        var restore: [String: PropertyValue] = [:]
        if configuration.manifestPath != current.manifestPath { restore["model"] = .string(current.manifestPath) }
        if configuration.styleImage != current.styleImage { restore["style-image"] = .string(current.styleImage) }
        if configuration.options.device != current.options.device { restore["device"] = .string(current.options.device) }
        if configuration.options.precision != current.options.precision { restore["precision"] = .string(current.options.precision ?? "default") }
        notices.append(StageNotice(.warning, "\(message); keeping \(describe(current))", restore: restore))
    }

    private func describe(_ c: StylizerConfiguration) -> String {
        var text = "\(c.manifestPath) on \(c.options.device)"
        if let p = c.options.precision { text += " (\(p))" }
        if !c.styleImage.isEmpty { text += " with style \(c.styleImage)" }
        return text
    }

    public var metrics: [Metric] {
        let c = stylizer.configuration
        return inferenceMetrics.metrics(model: c.manifestPath, device: c.options.device, running: stylizer.runningModel)
    }

    public var latencyNanoseconds: UInt64 { latency.nanoseconds }
    private var latency = ReportedLatency()

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var summary: String? {
        let n = framesWithoutRegions
        let unmatched = n > 0 ? "\(n) frame\(n == 1 ? "" : "s") without a region to stylize passed untouched" : ""
        guard !frameTimes.isEmpty else { return unmatched.isEmpty ? nil : unmatched }
        func median(_ v: TimingWindow) -> Double { v.median ?? 0 }
        let size = format.map(inferenceSize).map { "\($0.width)x\($0.height)" } ?? "?"
        let temporal = temporalTimes.isEmpty ? "" : String(format: ", temporal %.1f", median(temporalTimes))
        let text = String(format: "%.1f ms a frame: shrink %.1f, inference %.1f at %@, output %.1f%@, scale+blend %.1f (medians of %d); start-up: model and style %.0f ms, compile %.0f ms",
                          median(frameTimes), median(shrinkTimes), median(inferenceTimes), size, median(convertTimes), temporal, median(blendTimes), frameTimes.count,
                          startupMilliseconds.style, startupMilliseconds.compile)
        return [text, unmatched, stylizer.settings, queue.summary ?? ""].filter { !$0.isEmpty }.joined(separator: "; ")
    }
}
