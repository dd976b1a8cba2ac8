import Foundation
import StreamLensCore
import StreamLensDraw
import StreamLensInference

/// `lensdetect`: finds faces (any BlazeFace-family detector described by a manifest in
/// Models/), boxes them on the frame, attaches each as a GstVideoRegionOfInterestMeta, and can
/// write them as JSON Lines.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! lensdetect model=Models/face-short-range.json metadata=faces.jsonl ! videoconvert ! autovideosink'
///
/// Pre-processing (pad for letterbox, crop for centre-crop, colour order, resize, value range)
/// is OpenVINO's, compiled into the model for the negotiated frame size; inference, decoding
/// and suppression run on the stage's worker thread.
public final class DetectStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensdetect",
        summary: "Detect faces with a BlazeFace-family model (OpenVINO), draw boxes, attach regions of interest",
        example: "videotestsrc num-buffers=30 ! videoconvert ! lensdetect ! fakesink",
        sinkCaps: "video/x-raw,format={BGRx,BGRA,RGBx,RGBA,RGB,BGR}",
        properties: [
            PropertySpec("model", .string, default: .string("Models/face-short-range.json"),
                         help: "model manifest (JSON) describing the model file, its input and its decoder"),
            PropertySpec("device", .string, default: .string("CPU"), live: true,
                         help: "OpenVINO device: CPU, GPU, NPU or AUTO (the iOS app's compute-unit switch; live: the model is recompiled between two frames), or remote (an inference server: see server=)"),
            PropertySpec("precision", .choice(["default", "f32", "bf16", "f16"]), default: .string("default"),
                         help: "inference precision hint"),
            PropertySpec("threads", .int(0...256), default: .int(0), help: "inference threads (0: OpenVINO decides)"),
            PropertySpec("cache-dir", .string, default: .string(""),
                         help: "compiled-model cache folder (empty: ~/.cache/streamlens/openvino)"),
            PropertySpec("threshold", .double(0...1), default: .double(0),
                         help: "minimum face score (0: the manifest's min_score)"),
            PropertySpec("crop", .choice(["manifest", "letterbox", "center-crop", "stretch"]), default: .string("manifest"),
                         help: "how the frame becomes the model's square: letterbox sees the whole frame; center-crop loses faces outside the centre"),
            PropertySpec("suppression", .choice(["manifest", "weighted", "nms", "none"]), default: .string("manifest"),
                         help: "overlap suppression: weighted averages overlapping boxes by score (the iOS app's), nms keeps the best"),
            PropertySpec("interval", .int(1...1000), default: .int(1), live: true,
                         help: "run the model every N-th frame; frames in between keep the last boxes"),
            PropertySpec("draw", .bool, default: .bool(true), live: true, help: "draw boxes and score labels"),
            PropertySpec("color", .string, default: .string("#00ff00"), live: true, help: "box colour, #rrggbb"),
            PropertySpec("thickness", .int(1...50), default: .int(3), live: true, help: "box line width in pixels"),
            PropertySpec("overlay", .bool, default: .bool(false), live: true,
                         help: "draw the stage's frame rate, inference time and (live sources) the frame's latency in the top-left corner (the iOS app's counter)"),
            PropertySpec("metadata", .string, default: .string(""),
                         help: "write detections as JSON Lines to this file (- for stdout)"),
        ] + RemoteSettings.properties,
        keys: [
            KeyBinding(["f"], .toggle(property: "overlay"), help: "frame rate / latency overlay on or off"),
            KeyBinding(["i"], .cycle(property: "interval", values: ["1", "2", "4", "8"]), help: "inference interval: every 1st, 2nd, 4th, 8th frame"),
            KeyBinding(["b"], .toggle(property: "draw"), help: "boxes on or off"),
            KeyBinding(["d"], .cycle(property: "device", values: ["CPU", "GPU", "NPU", "AUTO"]),
                       help: "next device (one not present is refused with a warning; the next press goes on from it)"),
        ])

    private let manifest: ModelManifest
    private let manifestPath: String
    private let decoder: BlazeFaceDecoder
    private let engine: InferenceEngine
    private var options: InferenceOptions
    private let crop: CropMode
    private var settings: StageSettings
    /// Local (OpenVINO here) or remote (device=remote).
    private var model: (any ImageInference)?
    /// device=remote: frames whose requests are on their way, oldest first (see `finishOldest`).
    private var inFlight: [InFlight] = []
    private struct InFlight {
        enum Work { case request(PendingInference), reuseLast, serverAway }
        var frame: Frame
        var work: Work
        var model: RemoteImageModel
        var geometry: FrameGeometry
        var outputs: (boxes: Int, scores: Int)
        var arrived: UInt64
    }
    private var remoteRecord = RemoteRecord()
    private var outputIndices = (boxes: 0, scores: 1)
    private var geometry: FrameGeometry?
    private var last: [Detection] = []
    /// Where JSON Lines go; a write error stops them (with one warning), never the run.
    private var metadata: FileWriter?
    /// The metadata file, opened at the first frame.
    private var metadataPath: String?
    /// One encoder for every JSON Lines record (made once, not per frame).
    private let metadataEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    private var inferenceTimes: [Double] = []
    /// Arrival times of the last 30 frames, for the overlay's frame rate.
    private var frameTimes: [UInt64] = []
    private var facesFound = 0

    public init(settings: StageSettings) throws {
        self.settings = settings
        manifestPath = settings.string("model")
        manifest = try ModelManifest.load(path: manifestPath)
        guard var decoderOptions = manifest.decoder.blazeFace else {
            throw StageError("\(manifestPath) describes an image-to-image model (decoder '\(manifest.decoder.name)'), not a detector; use it with lensstylize")
        }
        if settings.double("threshold") > 0 { decoderOptions.minScore = settings.double("threshold") }
        switch settings.string("suppression") {
        case "weighted": decoderOptions.suppression.method = .weighted
        case "nms": decoderOptions.suppression.method = .nms
        case "none": decoderOptions.suppression.method = .none
        default: break
        }
        decoder = try BlazeFaceDecoder(options: decoderOptions)
        _ = try RemoteSettings.address(settings, manifestPath: manifestPath) // a bad server= fails the start
        crop = CropMode(rawValue: settings.string("crop")) ?? manifest.crop
        do { engine = try InferenceEngine() } catch { throw StageError("\(error)") }
        var options = InferenceOptions()
        options.device = settings.string("device")
        if settings.string("precision") != "default" { options.precision = settings.string("precision") }
        options.threads = settings.int("threads")
        let cache = settings.string("cache-dir")
        options.cacheDirectory = cache.isEmpty ? Self.defaultCacheDirectory : cache
        self.options = options
        if options.device != RemoteSettings.device {
            do { try engine.checkDevice(options.device) } catch { throw StageError("\(error)") }
            // A catalogue model that is not installed fails the start, not the first frame.
            _ = try manifest.resolve(manifest.model, relativeTo: manifestPath)
        }
        guard Self.parseColor(settings.string("color")) != nil else {
            throw StageError("property color=\(settings.string("color")) is not a #rrggbb colour")
        }
        let path = settings.string("metadata")
        if path == "-" {
            metadata = FileWriter.standardOutput()
        } else if !path.isEmpty {
            // Checked now, created (truncated) at the first frame: a run that fails to start
            // leaves an existing file as it was.
            let exists = FileManager.default.fileExists(atPath: path)
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            guard exists ? access(path, W_OK) == 0 : access(folder, W_OK) == 0 else {
                throw StageError("cannot write metadata file \(path)")
            }
            metadataPath = path
        }
    }

    static var defaultCacheDirectory: String {
        let base = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"] ?? (NSHomeDirectory() + "/.cache")
        return base + "/streamlens/openvino"
    }

    public func formatChanged(_ format: VideoFormat) throws {
        self.format = format
        let geometry = FrameGeometry(frameWidth: format.width, frameHeight: format.height,
                                     modelWidth: manifest.input.width, modelHeight: manifest.input.height, mode: crop)
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
        let input = ImageInput(width: manifest.input.width, height: manifest.input.height, layout: manifest.input.layout.rawValue,
                               colorOrder: manifest.input.colorOrder.rawValue, mean: Float(manifest.mean), scale: Float(manifest.scale))
        let frame = FrameLayout(width: format.width, height: format.height, pixelFormat: format.pixelFormat, stride: format.strides[0])
        do {
            let model: any ImageInference
            if let address = try RemoteSettings.address(settings, manifestPath: manifestPath) {
                model = try engine.loadRemoteImageModel(address: address, input: input, frame: frame, region: region)
            } else {
                model = try engine.loadImageModel(path: try manifest.resolve(manifest.model, relativeTo: manifestPath), input: input,
                                                  frame: frame, region: region, options: options)
            }
            let (boxes, scores) = try decoder.resolveOutputs(names: model.outputs.map(\.name), shapes: model.outputs.map(\.shape))
            try decoder.validate(boxesShape: model.outputs[boxes].shape, scoresShape: model.outputs[scores].shape)
            outputIndices = (boxes, scores)
            self.model = model
        } catch let error as InferenceError {
            throw StageError("\(manifestPath): \(error.message)")
        } catch let error as StageError {
            throw StageError("\(manifestPath): \(error.message)")
        }
        self.geometry = geometry
        last = []
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        guard let model, let geometry else { return .forward }
        let arrived = DispatchTime.now().uptimeNanoseconds
        let due = frame.index % settings.int("interval") == 0
        if let remote = model as? RemoteImageModel {
            // The request goes out now; the frame waits, in order, for its answer.
            var work = InFlight.Work.reuseLast
            if due {
                if remoteRecord.mayTry(now: arrived) {
                    do {
                        work = .request(try frame.pixels.withBytes { try remote.send($0) })
                    } catch {
                        return .failed(reason: "\(error)")
                    }
                } else {
                    work = .serverAway
                }
            }
            inFlight.append(InFlight(frame: frame, work: work, model: remote, geometry: geometry, outputs: outputIndices, arrived: arrived))
            return .pending
        }
        if due {
            let start = DispatchTime.now().uptimeNanoseconds
            do {
                let found = try frame.pixels.withBytes { pixels in
                    try model.infer(pixels) { outputs in
                        decoder.decode(boxes: outputs[outputIndices.boxes], scores: outputs[outputIndices.scores])
                    }
                }
                last = found.map(geometry.toFrame)
            } catch {
                return .failed(reason: "\(error)")
            }
            recordInferenceTime(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        annotate(frame, arrived: arrived)
        return .forward
    }

    /// device=remote: the oldest frame, once its answer is in (or the window of `in-flight`
    /// requests is full, or the stream ends: then it waits). A failed request lets the frame go
    /// on without boxes; the server is tried again after a back-off, and the stage says when
    /// it went away and when it came back.
    public func finishOldest(wait: Bool) -> FrameOutcome? {
        guard let entry = inFlight.first else { return .forward }
        switch entry.work {
        case .request(let request):
            let requests = inFlight.reduce(0) { n, e in if case .request = e.work { return n + 1 } else { return n } }
            if !wait && !request.isFinished && requests < settings.int("in-flight") { return nil }
            var failure: InferenceError?
            do {
                let outputs = try entry.model.outputs(of: request.wait().get())
                let found = decoder.decode(boxes: outputs[entry.outputs.boxes].values, scores: outputs[entry.outputs.scores].values)
                last = found.map(entry.geometry.toFrame)
                recordInferenceTime(request.roundTripMilliseconds)
            } catch let error as InferenceError {
                failure = error
                last = []
            } catch {
                failure = InferenceError("\(error)")
                last = []
            }
            if let notice = remoteRecord.record(request, error: failure, address: entry.model.address) { notices.append(notice) }
        case .serverAway:
            remoteRecord.skip()
            last = []
        case .reuseLast:
            break
        }
        inFlight.removeFirst()
        annotate(entry.frame, arrived: entry.arrived)
        return .forward
    }

    private func recordInferenceTime(_ milliseconds: Double) {
        inferenceTimes.append(milliseconds)
        if inferenceTimes.count > 4096 { inferenceTimes.removeFirst(2048) }
    }

    /// The frame's boxes (`last`) as regions of interest, drawn, written; the frame's time in
    /// the stage counted for the latency it reports.
    private func annotate(_ frame: Frame, arrived: UInt64) {
        facesFound += last.count
        for d in last {
            frame.pixels.addRegionOfInterest(RegionOfInterest(
                label: d.label ?? "face", x: Int(d.box.xMin.rounded()), y: Int(d.box.yMin.rounded()),
                width: Int(d.box.width.rounded()), height: Int(d.box.height.rounded()), score: d.score))
        }
        let now = DispatchTime.now().uptimeNanoseconds
        frameTimes.append(now)
        if frameTimes.count > 30 { frameTimes.removeFirst(frameTimes.count - 30) }
        if (settings.bool("draw") && !last.isEmpty) || settings.bool("overlay") { draw(last, on: frame) }
        if metadata == nil, let path = metadataPath {
            metadataPath = nil
            switch FileWriter.create(path) {
            case .success(let writer): metadata = writer
            case .failure(let error): notices.append(StageNotice(.warning, "\(error.message); detections are not written"))
            }
        }
        if let writer = metadata, !write(last, frame: frame, to: writer) {
            notices.append(StageNotice(.warning, "cannot write metadata to \(writer.name) (\(writer.failure ?? "?")); detections are no longer written, the video goes on"))
            metadata = nil
        }
        let inStage = Double(DispatchTime.now().uptimeNanoseconds - arrived) / 1e6
        latency.add(milliseconds: inStage)
        stageTimes.append(inStage)
        if stageTimes.count > 4096 { stageTimes.removeFirst(2048) }
    }

    /// Each frame's time from arrival to leaving the stage, in milliseconds (a remote model's
    /// frames wait for their answers in order: this is the latency the stage adds).
    private var stageTimes: [Double] = []

    public var latencyNanoseconds: UInt64 { latency.nanoseconds }
    private var latency = ReportedLatency()

    public func settingsChanged(_ settings: StageSettings) {
        self.settings = settings
        let device = settings.string("device")
        guard device != options.device else { return }
        // A new device: the model is compiled for it between two frames (a detector compiles in
        // a fraction of a second; a live source drops the frames that arrive meanwhile). One
        // that is not there, or fails to compile, is refused and the current one kept.
        let previous = options
        options.device = device
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            if device != RemoteSettings.device { try engine.checkDevice(device) }
            if let format { try formatChanged(format) }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            notices.append(StageNotice(.info, String(format: "now detecting on %@ (compiled in %.0f ms)", device, ms)))
        } catch {
            // formatChanged replaces the model only when the new one compiled: the old one stays.
            options = previous
            notices.append(StageNotice(.warning, "\(error); keeping \(previous.device)", restore: ["device": .string(previous.device)]))
        }
    }

    private var format: VideoFormat?
    private var notices: [StageNotice] = []
    public func takeNotices() -> [StageNotice] {
        defer { notices = [] }
        return notices
    }

    private func draw(_ detections: [Detection], on frame: Frame) {
        let color = Self.parseColor(settings.string("color")) ?? (0, 1, 0)
        let thickness = Double(settings.int("thickness"))
        frame.pixels.withMutableBytes { bytes in
            guard let canvas = FrameCanvas(pixels: bytes, width: frame.format.width, height: frame.format.height,
                                           stride: frame.format.strides[0], pixelFormat: frame.format.pixelFormat) else { return }
            let size = max(12, Double(frame.format.height) / 40)
            if settings.bool("overlay") {
                var text = "inference \(String(format: "%.1f", inferenceTimes.last ?? 0)) ms"
                // Live sources: how old the frame was when it reached the stage.
                if let age = frame.ageOnArrival { text += String(format: "  latency %.0f ms", Double(age) / 1e6) }
                if frameTimes.count > 1 {
                    let fps = Double(frameTimes.count - 1) / (Double(frameTimes.last! - frameTimes.first!) / 1e9)
                    text = String(format: "%.1f fps  ", fps) + text
                }
                canvas.label(text, x: 4, y: 4, size: size, color: (1, 1, 1), background: (0, 0, 0))
            }
            guard settings.bool("draw") else { return }
            for d in detections {
                canvas.rectangle(x: d.box.xMin, y: d.box.yMin, width: d.box.width, height: d.box.height, color: color, thickness: thickness)
                canvas.label(String(format: "%@ %.2f", d.label ?? "face", d.score), x: d.box.xMin, y: d.box.yMin - size * 1.3,
                             size: size, color: (0, 0, 0), background: color)
            }
        }
    }

    /// One JSON Lines record; false once the writer has failed.
    private func write(_ detections: [Detection], frame: Frame, to writer: FileWriter) -> Bool {
        struct Line: Encodable {
            var time: Double?
            var frame: Int
            var detections: [Face]
        }
        struct Face: Encodable {
            var label: String
            var score: Double
            var x, y, width, height: Double   // frame pixels
            var keypoints: [[Double]]         // [x, y] in frame pixels
        }
        func r1(_ v: Double) -> Double { (v * 10).rounded() / 10 }
        let line = Line(time: frame.pts.map { Double($0) / 1e9 }, frame: frame.index, detections: detections.map { d in
            Face(label: d.label ?? "face", score: (d.score * 1e4).rounded() / 1e4,
                 x: r1(d.box.xMin), y: r1(d.box.yMin), width: r1(d.box.width), height: r1(d.box.height),
                 keypoints: d.keypoints.map { [r1($0.x), r1($0.y)] })
        })
        guard var data = try? metadataEncoder.encode(line) else { return true }
        data.append(0x0A)
        return writer.write(data)
    }

    public var summary: String? {
        guard !inferenceTimes.isEmpty else { return nil }
        let sorted = inferenceTimes.sorted()
        let stage = stageTimes.sorted()
        let text = String(format: "inference %.1f ms median (%d runs), %d face boxes, frame in stage p50 %.1f ms p95 %.1f ms", sorted[sorted.count / 2],
                          inferenceTimes.count, facesFound, stage.isEmpty ? 0 : stage[stage.count / 2],
                          stage.isEmpty ? 0 : stage[min(stage.count - 1, Int(Double(stage.count) * 0.95))])
        return model is RemoteImageModel || remoteRecord.requests > 0 ? text + ", " + remoteRecord.summary : text
    }

    static func parseColor(_ text: String) -> (Double, Double, Double)? {
        let hex = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard hex.count == 6, let v = Int(hex, radix: 16) else { return nil }
        return (Double((v >> 16) & 0xFF) / 255, Double((v >> 8) & 0xFF) / 255, Double(v & 0xFF) / 255)
    }
}
