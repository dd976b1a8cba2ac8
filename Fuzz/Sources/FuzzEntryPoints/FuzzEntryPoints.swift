import Foundation
import StreamLensCore
import StreamLensDraw

// What each fuzzer does with one input, shared by the libFuzzer harnesses (Fuzz/, `make fuzz`)
// and the unit tests that replay the committed corpus and every crash found
// (Tests/StreamLensCoreTests/FuzzRegressionTests.swift, `make test`). The test target compiles
// this very file through a symlink (Tests/StreamLensCoreTests/FuzzEntryPoints.swift), so the
// corpus replay runs exactly what the fuzzers run and the entry points cannot rot.
//
// Each entry point feeds the bytes to the real parser the way StreamLens does (a pipeline file,
// a manifest file, the control socket's lines) and checks the parser's documented promises: a
// bad input is the parser's own error type with a message, never a trap and never another
// error. A broken promise that is not a trap is thrown as a `FuzzFinding`; the harness turns it
// into a crash (so libFuzzer saves the input) and the tests into a failure.

/// A promise of the code under test that an input broke, other than by crashing.
public struct FuzzFinding: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public enum FuzzEntryPoints {
    /// The fuzz targets by name: the folder names under Fuzz/corpus and the executables'
    /// `fuzz-<name>`.
    public static let all: [(name: String, run: @Sendable (Data) throws -> Void)] = [
        ("pipeline-spec", pipelineSpec),
        ("property-value", propertyValue),
        ("model-manifest", modelManifest),
        ("manifest-fields", manifestFields),
        ("control-command", controlCommand),
        ("http-response", httpResponse),
        ("inference-response", inferenceResponse),
        ("remote-tensors", remoteTensors),
    ]

    /// One libFuzzer input through the target `name`: what every harness's
    /// LLVMFuzzerTestOneInput does. A trap in the code under test is the crash libFuzzer reports;
    /// a broken promise (`FuzzFinding`) is made one here so the input is saved too.
    public static func runLibFuzzerInput(_ name: String, _ bytes: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        guard let target = all.first(where: { $0.name == name }) else { fatalError("no fuzz target \(name)") }
        let data = bytes.map { Data(bytes: $0, count: size) } ?? Data()
        do {
            try target.run(data)
        } catch {
            fatalError("\(name): \(error)")
        }
        return 0
    }

    // MARK: pipeline-spec

    /// The bytes as a pipeline file named in `streamlens run NAME`: looked up in a search
    /// folder, read (UTF-8), comment lines dropped and lines joined, `${…}` expanded with every
    /// variable set and with none; the same text as a command-line spec; and its lines and words
    /// as the `NAME=value` arguments after the spec.
    public static func pipelineSpec(_ data: Data) throws {
        // This process's own name in the temporary folder (a fuzzer and the tests may run at once).
        let folder = NSTemporaryDirectory()
        let name = "streamlens-fuzz-input-\(getpid())"
        let file = "\(folder)/\(name).pipeline"
        try data.write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let text = String(decoding: data, as: UTF8.self)

        var specs: [PipelineSpec] = []
        do {
            let spec = try PipelineSpec.load(name, searchDirectories: [folder])
            // Foundation's UTF-8 decoding (a byte-order mark is dropped, as it should be).
            guard let utf8 = String(data: data, encoding: .utf8) else {
                throw FuzzFinding("load accepted a file that is not UTF-8")
            }
            guard spec.text == PipelineSpec.joinLines(utf8) else {
                throw FuzzFinding("load's text differs from joinLines of the file")
            }
            specs.append(spec)
        } catch let error as SpecError {
            // Only bytes that are not UTF-8 make reading the file fail.
            guard String(data: data, encoding: .utf8) == nil else {
                throw FuzzFinding("load failed on a UTF-8 file: \(error.message)")
            }
        }
        // A command-line spec (it contains '!': no file is looked for).
        if text.contains("!") {
            let spec = try expectSpecError { try PipelineSpec.load(text, searchDirectories: [folder]) }
            if let spec { specs.append(spec) }
        } else {
            specs.append(PipelineSpec(text: text))
        }

        for spec in specs {
            let names = spec.variableNames
            // Every variable set: only a malformed reference may fail.
            let values = Dictionary(names.map { ($0, "v") }, uniquingKeysWith: { a, _ in a })
            if let out = try expectSpecError({ try spec.expanded(variables: values) }) {
                if names.isEmpty, out != spec.text {
                    throw FuzzFinding("expansion without variables changed the text")
                }
            }
            // None set: defaults or an error naming the unset variable.
            _ = try expectSpecError { try spec.expanded(environment: ["PATH": "/usr/bin"]) }
        }

        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init)
        for arguments in [lines, words] {
            if let values = try expectSpecError({ try PipelineSpec.parseAssignments(arguments) }) {
                for (key, value) in values where !arguments.contains("\(key)=\(value)") {
                    throw FuzzFinding("parseAssignments made \(key)=\(value), which is not an argument")
                }
            }
        }
    }

    // MARK: property-value

    /// Property rows of every kind, as in the stages' tables.
    static let propertyRows: [PropertySpec] = [
        PropertySpec("draw", .bool, default: .bool(true), help: ""),
        PropertySpec("interval", .int(1...1000), default: .int(1), help: ""),
        PropertySpec("port", .int(0...65535), default: .int(8554), help: ""),
        PropertySpec("anything", .int(Int.min...Int.max), default: .int(0), help: ""),
        PropertySpec("strength", .double(0...1), default: .double(1), help: ""),
        PropertySpec("delay", .double(0...1e9), default: .double(0), help: ""),
        PropertySpec("scale", .double(-Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude), default: .double(1), help: ""),
        PropertySpec("precision", .choice(["f32", "bf16", "f16"]), default: .string("f32"), help: ""),
        PropertySpec("model", .string, default: .string(""), help: ""),
        PropertySpec("mode", .choice(BridgeSettings.Mode.allCases.map(\.rawValue)), default: .string("auto"), help: ""),
    ]

    /// Frame sizes a pipeline can negotiate, extremes included (GStreamer's are gint).
    static let frameSizes: [(Int, Int)] = [(1280, 720), (720, 1280), (1, 1), (1, Int(Int32.max)), (Int(Int32.max), 1), (Int(Int32.max), Int(Int32.max))]

    /// Each line as an `inference-size` value and as a value of every kind of property row
    /// (`set NAME=VALUE` on the control channel, properties in a spec).
    public static func propertyValue(_ data: Data) throws {
        let text = String(decoding: data, as: UTF8.self)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let size = try expectStageError({ try InferenceSize.parse(line) }) {
                for (w, h) in frameSizes {
                    let r = size.resolve(frameWidth: w, frameHeight: h, manifestWidth: 192, manifestHeight: 128)
                    guard r.width > 0, r.height > 0 else {
                        throw FuzzFinding("inference-size \(line) resolves to \(r.width)x\(r.height) for \(w)x\(h)")
                    }
                }
            }
            for row in propertyRows {
                guard let value = try expectStageError({ try row.parse(line) }) else { continue }
                do { try row.validate(value) } catch {
                    throw FuzzFinding("\(row.name): parse accepted \(line) but validate rejects it: \(error)")
                }
                // Numbers and booleans read back as themselves from their own text (`get`).
                switch value {
                case .bool, .int, .double:
                    let again = try? row.parse(value.description)
                    guard again == value else {
                        throw FuzzFinding("\(row.name): \(value) does not read back from '\(value.description)'")
                    }
                case .string(let s):
                    guard s == line else { throw FuzzFinding("\(row.name): string \(line) became \(s)") }
                }
            }
        }
    }

    // MARK: model-manifest

    /// The bytes as a model manifest, as `lensdetect`/`lensstylize` load one: decoded and
    /// validated; a detector's decoder is then built (anchors generated) and run once on
    /// outputs holding ordinary and extreme values. Every failure must be a `StageError`
    /// naming the file.
    public static func modelManifest(_ data: Data) throws {
        let origin = "fuzz/manifest.json"
        let manifest: ModelManifest
        do {
            manifest = try ModelManifest.decode(data, origin: origin)
        } catch let error as StageError {
            guard error.message.contains(origin) else {
                throw FuzzFinding("manifest error does not name the file: \(error.message)")
            }
            return
        } catch {
            throw FuzzFinding("manifest decoding threw \(type(of: error)), not a StageError: \(error)")
        }
        // The input's normalisation goes to OpenVINO as (x - mean) / scale.
        for input in [manifest.input] + (manifest.style.map { [$0.input] } ?? []) {
            guard input.scales.allSatisfy({ $0.isFinite && $0 != 0 }), input.means.allSatisfy(\.isFinite) else {
                throw FuzzFinding("value_range \(input.valueRange), mean \(input.channelMean ?? []), std \(input.channelStd ?? []) give scale \(input.scales), mean \(input.means)")
            }
        }
        guard manifest.decoder.blazeFace != nil else { return }
        let decoder: BlazeFaceDecoder
        do {
            guard let made = try manifest.makeDecoder() as? BlazeFaceDecoder else { throw FuzzFinding("blazeface parameters made another decoder") }
            decoder = made
        } catch let finding as FuzzFinding {
            throw finding
        } catch {
            throw FuzzFinding("a validated manifest's decoder failed: \(error)")
        }
        let n = decoder.anchors.count, coords = decoder.options.numCoords
        guard n > 0 else { throw FuzzFinding("a validated manifest has no anchors") }
        // Decoding allocates what the model's outputs hold; keep each run small.
        let values = n.multipliedReportingOverflow(by: coords)
        guard !values.overflow, values.partialValue <= 1 << 16 else { return }
        let pattern: [Float] = [0, 1, -1, 0.5, 64, -64, 1e30, .infinity, .nan, 3, -0.25, 128]
        let boxes = (0..<n * coords).map { pattern[$0 % pattern.count] }
        let scores = (0..<n).map { [Float(10), 100, 0.9, .nan, -5][$0 % 5] }
        _ = decoder.decode(boxes: boxes, scores: scores)
    }

    // MARK: manifest-fields

    /// The shipped manifests' shapes (Models/face-short-range.json and magenta-style.json), the
    /// bases that `manifestFields` edits.
    static let baseManifests = [
        #"{"schema_version":1,"name":"face-short-range","model":"face_detection_short_range.tflite","input":{"width":128,"height":128,"color_order":"RGB","value_range":[-1,1],"layout":"NHWC"},"crop":"letterbox","decoder":{"name":"blazeface","parameters":{"anchors":{"num_layers":4,"min_scale":0.1484375,"max_scale":0.75,"input_size_height":128,"input_size_width":128,"anchor_offset_x":0.5,"anchor_offset_y":0.5,"strides":[8,16,16,16],"aspect_ratios":[1.0],"fixed_anchor_size":true,"interpolated_scale_aspect_ratio":1.0,"reduce_boxes_in_lowest_layer":false},"boxes_output":"regressors","scores_output":"classificators","num_coords":16,"box_coord_offset":0,"box_order":"xywh","keypoint_coord_offset":4,"num_keypoints":6,"values_per_keypoint":2,"x_scale":128,"y_scale":128,"w_scale":128,"h_scale":128,"scores":"logits","score_clipping_thresh":100,"min_score":0.75,"suppression":{"method":"weighted","iou_threshold":0.3,"max_detections":10}}},"labels":["face"],"licence":"Apache-2.0","provenance":"p"}"#,
        #"{"schema_version":1,"name":"magenta","model":"t.tflite","input":{"width":384,"height":384,"color_order":"RGB","value_range":[0,1],"layout":"NHWC","name":"content_image"},"crop":"stretch","decoder":{"name":"image","parameters":{"layout":"NHWC","color_order":"RGB","value_range":[0,1],"output":"o"}},"style":{"model":"p.tflite","input":{"width":256,"height":256,"color_order":"RGB","value_range":[0,1],"layout":"NHWC"},"image":"s.jpg"},"labels":[],"licence":"Apache-2.0"}"#,
    ]

    /// Every key path of the bases, objects and arrays included (an array element as its index).
    static let manifestPaths: [[String]] = {
        func paths(_ value: Any, _ prefix: [String]) -> [[String]] {
            if let object = value as? [String: Any] {
                return [prefix] + object.keys.sorted().flatMap { paths(object[$0]!, prefix + [$0]) }
            }
            if let array = value as? [Any] {
                return [prefix] + array.indices.flatMap { paths(array[$0], prefix + ["\($0)"]) }
            }
            return [prefix]
        }
        var all: [[String]] = []
        for base in baseManifests {
            for path in paths(try! JSONSerialization.jsonObject(with: Data(base.utf8)), []) where !all.contains(path) {
                all.append(path)
            }
        }
        return all.filter { !$0.isEmpty }
    }()

    /// Values at the edges of what JSON numbers can say (no NaN or infinity: JSON has none).
    static let edgeIntegers: [Int] = [0, 1, -1, 2, 3, 4, 5, 16, 128, 255, 256, 4096, 1 << 16, 1 << 20, Int(Int32.max), 1 << 31,
                                      1 << 32, 1 << 40, 1 << 62, Int.max, Int.max - 3, Int.min, Int.min + 1]
    static let edgeDoubles: [Double] = [0, -0.0, 0.5, -1, 1e-300, .leastNonzeroMagnitude, 1e300, 1e308, -1e308, .greatestFiniteMagnitude, -.greatestFiniteMagnitude]

    /// Structure-aware: the bytes are edits of one of the shipped manifests' shapes (a key path,
    /// then a value: an edge integer, an edge double, 8 raw bytes as either, a string, null,
    /// true, an empty or a repeated array, or the key removed), applied in order, and the result
    /// goes through `modelManifest`. Byte mutations of JSON text rarely keep it valid JSON long
    /// enough to reach the checks behind the decoder; edits reach every key with any value.
    public static func manifestFields(_ data: Data) throws {
        var bytes = data[...]
        func next() -> UInt8? { bytes.popFirst() }
        func next64() -> UInt64 { (0..<8).reduce(UInt64(0)) { v, _ in v << 8 | UInt64(next() ?? 0) } }
        let base = Int(next() ?? 0) % baseManifests.count
        var json = try JSONSerialization.jsonObject(with: Data(baseManifests[base].utf8))
        while let p = next(), let op = next() {
            let path = manifestPaths[Int(p) % manifestPaths.count]
            let value: Any?
            switch op % 12 {
            case 0: value = edgeIntegers[Int(next() ?? 0) % edgeIntegers.count]
            case 1: value = edgeDoubles[Int(next() ?? 0) % edgeDoubles.count]
            case 2: value = Int(truncatingIfNeeded: next64())
            case 3:
                let d = Double(bitPattern: next64())
                value = d.isFinite ? d : 1.5
            case 4: value = Int(next() ?? 0) - 128
            case 5: value = ["", "RGB", "BGR", "NCHW", "NHWC", "image", "blazeface", "nms", "none", "xyxy", "yxyx", "yxhw",
                             "probabilities", "center-crop", "stretch", "0", "1", "x"][Int(next() ?? 0) % 18]
            case 6: value = NSNull()
            case 7: value = true
            case 8: value = [Any]()
            case 9: value = Array(repeating: edgeIntegers[Int(next() ?? 0) % edgeIntegers.count], count: Int(next() ?? 0) % 6)
            case 10: value = Array(repeating: Double(Int(next() ?? 0)) / 16, count: Int(next() ?? 0) % 6)
            default: value = nil  // remove the key
            }
            json = edited(json, at: path[...], to: value)
        }
        try modelManifest(try JSONSerialization.data(withJSONObject: json))
    }

    /// `json` with the value at `path` replaced (nil: removed); a path that does not exist
    /// (an earlier edit changed the shape) leaves it as it is, except that a missing last key is added.
    static func edited(_ json: Any, at path: ArraySlice<String>, to value: Any?) -> Any {
        guard let key = path.first else { return value ?? NSNull() }
        if var object = json as? [String: Any] {
            if path.count == 1 {
                object[key] = value
            } else if let inner = object[key] {
                object[key] = edited(inner, at: path.dropFirst(), to: value)
            }
            return object
        }
        if var array = json as? [Any], let i = Int(key), array.indices.contains(i) {
            if path.count == 1 {
                if let value { array[i] = value } else { array.remove(at: i) }
            } else {
                array[i] = edited(array[i], at: path.dropFirst(), to: value)
            }
            return array
        }
        return json
    }

    // MARK: control-command

    /// The bytes as what a client writes to the control socket: split at newlines, each line
    /// decoded as UTF-8 (invalid bytes replaced) and parsed; a `set`'s values checked against
    /// property rows of every kind, as the channel checks a stage's.
    public static func controlCommand(_ data: Data) throws {
        var rest = data[...]
        while !rest.isEmpty {
            let end = rest.firstIndex(of: 0x0A) ?? rest.endIndex
            let line = String(decoding: rest[rest.startIndex..<end], as: UTF8.self)
            rest = end < rest.endIndex ? rest[rest.index(after: end)...] : rest[rest.endIndex...]
            let command: ControlCommand?
            do {
                command = try ControlCommand.parse(line)
            } catch let error as ControlError {
                guard !error.message.isEmpty else { throw FuzzFinding("empty control error for \(line)") }
                continue
            } catch {
                throw FuzzFinding("ControlCommand.parse threw \(type(of: error)), not a ControlError: \(error)")
            }
            switch command {
            case .set(_, let assignments)?:
                guard !assignments.isEmpty else { throw FuzzFinding("set without assignments from \(line)") }
                for (name, value) in assignments {
                    guard !name.isEmpty, !name.contains("=") else { throw FuzzFinding("bad property name '\(name)' from \(line)") }
                    for row in propertyRows { _ = try expectStageError { try row.parse(value) } }
                }
            case .get(_, let name)?:
                guard !name.isEmpty else { throw FuzzFinding("empty property name in get from \(line)") }
            case .list?, .help?, nil:
                break
            }
        }
    }

    // MARK: http-response

    /// The bytes as what an inference server sends on a kept-alive connection, handed to the
    /// reader in pieces whose sizes come from the input's first byte (1…256), answers read until
    /// the stream ends or one is refused. Promises: a refusal is a WireError with a message;
    /// every answer's body is within the limit, and exactly its Content-Length when it has one.
    public static func httpResponse(_ data: Data) throws {
        guard let first = data.first else { return }
        let step = Int(first) + 1
        let bytes = [UInt8](data.dropFirst())
        var offset = 0
        var limits = HTTPResponseReader.Limits()
        limits.bodyBytes = 1 << 16 // small, so the limit is reached within a fuzz input
        limits.lineBytes = 512
        var reader = HTTPResponseReader(limits: limits)
        let source: HTTPResponseReader.Source = {
            guard offset < bytes.count else { return nil }
            let end = min(bytes.count, offset + step)
            defer { offset = end }
            return Data(bytes[offset..<end])
        }
        for _ in 0..<64 {
            let response: HTTPResponse
            do {
                response = try reader.read(from: source)
            } catch let error as WireError {
                guard !error.message.isEmpty else { throw FuzzFinding("an empty WireError") }
                return
            } catch {
                throw FuzzFinding("HTTPResponseReader threw \(type(of: error)), not a WireError: \(error)")
            }
            guard response.body.count <= limits.bodyBytes else { throw FuzzFinding("a body of \(response.body.count) bytes passed the limit") }
            if let length = response.headers["content-length"], response.headers["transfer-encoding"] == nil,
               !(100..<200).contains(response.status), response.status != 204, response.status != 304,
               Int(length) != response.body.count {
                throw FuzzFinding("Content-Length \(length) but a body of \(response.body.count) bytes")
            }
        }
    }

    // MARK: inference-response

    /// The bytes as the body of an answer to POST …/infer: the first line is the
    /// Inference-Header-Content-Length header's value (none when the line is empty), the rest
    /// the body. Promises: a refusal is a WireError; every tensor's values match its shape.
    public static func inferenceResponse(_ data: Data) throws {
        let end = data.firstIndex(of: 0x0A) ?? data.endIndex
        let header = String(decoding: data[data.startIndex..<end], as: UTF8.self)
        let body = end < data.endIndex ? Data(data[data.index(after: end)...]) : Data()
        let tensors: [WireTensor]
        do {
            tensors = try InferenceResponseDecoder.decode(body, headerLength: header.isEmpty ? nil : header)
        } catch let error as WireError {
            guard !error.message.isEmpty else { throw FuzzFinding("an empty WireError") }
            return
        } catch {
            throw FuzzFinding("InferenceResponseDecoder threw \(type(of: error)), not a WireError: \(error)")
        }
        for t in tensors {
            guard TensorShape.elementCount(t.shape) == t.values.count else {
                throw FuzzFinding("tensor \(t.name): \(t.values.count) values for shape \(t.shape)")
            }
        }
        _ = InferenceResponseDecoder.serverError(body)
    }

    // MARK: remote-tensors

    /// The detector manifests shipped in Models/, sorted by file name, and for each the output
    /// names its decoder refers to (sorted by key), then a name none does.
    static let detectorManifests: [(manifest: ModelManifest, names: [String])] = {
        // This file is compiled from Fuzz/Sources/FuzzEntryPoints and, through a symlink, from
        // Tests/StreamLensCoreTests: the repository is the first folder up with Models/.
        var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while folder.path != "/", !FileManager.default.fileExists(atPath: folder.appendingPathComponent("Models/model-catalogue.json").path) {
            folder = folder.deletingLastPathComponent()
        }
        let models = folder.appendingPathComponent("Models")
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: models.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
        return files.compactMap { file in
            guard let data = try? Data(contentsOf: models.appendingPathComponent(file)),
                  let manifest = try? ModelManifest.decode(data, origin: file), manifest.decoder.detector != nil,
                  let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let parameters = (json["decoder"] as? [String: Any])?["parameters"] as? [String: Any] else { return nil }
            let names = parameters.keys.filter { $0.hasSuffix("output") }.sorted().compactMap { parameters[$0] as? String }
            return (manifest, names + ["output0"])
        }
    }()

    /// Dimensions a shape's byte picks from: the shipped detectors' own, then hostile ones.
    static let dimensions = [0, 1, 2, 3, 4, 6, 7, 10, 12, 16, 18, 96, 160, 896, 2254, 2304,
                             -1, -7, 3_037_000_500, Int.max, 1 << 31]

    /// The bytes as an inference server's metadata and answer for one of the shipped detectors,
    /// taken as lensdetect device=remote takes them and drawn as lensoverlay draws them. Byte 0
    /// picks the manifest; byte 1 the frame size and crop; byte 2 the output count (1…4); then per
    /// output a name byte, a rank byte (1…4) and a byte per dimension (`dimensions`); the rest are
    /// the float32 values (little-endian bit patterns: NaN, ±inf, 1e20…), repeated to fill each
    /// tensor. Promises: shapes that do not count are refused as the remote backend refuses them
    /// at load (TensorShape within an answer's limit); a decoder refuses what does not fit with a
    /// StageError; every detection mapped onto the frame is within FrameBounds; drawing it on
    /// RGB and BGRx frames does not trap.
    public static func remoteTensors(_ data: Data) throws {
        guard let (regions, width, height) = try remoteTensorRegions(data) else { return }
        for format in ["RGB", "BGRx"] {
            let stride = width * format.count
            var pixels = [UInt8](repeating: 0, count: stride * height)
            pixels.withUnsafeMutableBytes { raw in
                guard let canvas = FrameCanvas(pixels: raw, width: width, height: height, stride: stride, pixelFormat: format) else { return }
                for r in regions {
                    canvas.rectangle(x: r.x, y: r.y, width: r.width, height: r.height, color: (0, 1, 0), thickness: 2)
                    for p in r.keypoints { canvas.dot(x: p.x, y: p.y, radius: 2, color: (1, 0, 0)) }
                    canvas.label("\(r.label) \(r.confidence ?? 0)", x: r.x, y: r.y - 14, size: 12, color: (0, 0, 0), background: (0, 1, 0))
                }
            }
        }
    }

    /// `remoteTensors`' regions on its frame (width, height); nil when the shapes are refused.
    public static func remoteTensorRegions(_ data: Data) throws -> (regions: [RegionOfInterest], width: Int, height: Int)? {
        var bytes = data[...]
        func next() -> Int? { bytes.popFirst().map(Int.init) }
        let manifests = detectorManifests
        guard !manifests.isEmpty else { throw FuzzFinding("no detector manifest in Models/") }
        guard let m = next(), let frameByte = next(), let countByte = next() else { return nil }
        let (manifest, names) = manifests[m % manifests.count]
        var ports: [ModelOutput] = []
        for _ in 0..<(1 + countByte % 4) {
            guard let name = next(), let rank = next() else { return nil }
            var shape: [Int] = []
            for _ in 0..<(1 + rank % 4) {
                guard let d = next() else { return nil }
                shape.append(dimensions[d % dimensions.count])
            }
            ports.append(ModelOutput(name: names[name % names.count], shape: shape))
        }
        // What the remote backend checks of the metadata before any decoder sees it.
        let most = HTTPResponseReader.Limits().bodyBytes / 4
        guard ports.allSatisfy({ TensorShape.elementCount($0.shape, atMost: most) != nil }) else { return nil }
        var decoder: any DetectionDecoder
        let bound: [Int]
        do {
            decoder = try manifest.makeDecoder()
            bound = try decoder.bind(ports)
        } catch is StageError {
            return nil
        } catch {
            throw FuzzFinding("binding \(ports) threw \(type(of: error)), not a StageError: \(error)")
        }
        // Keep each run small (a fuzz-only cap; the seam's limit is checked above).
        let counts = bound.map { TensorShape.elementCount(ports[$0].shape) ?? 0 }
        guard counts.reduce(0, +) <= 1 << 18 else { return nil }
        var values = stride(from: 0, to: bytes.count - 3, by: 4).map { i -> Float in
            let b = bytes.dropFirst(i).prefix(4).map(UInt32.init)
            return Float(bitPattern: b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24)
        }
        if values.isEmpty { values = [0, 1, -1, 0.5, 1e20, -1e20, .infinity, .nan, 100, -100] }
        let tensors = counts.map { n in (0..<n).map { values[$0 % values.count] } }
        let detections = withBuffers(tensors) { decoder.decode($0) }

        let sizes = [(320, 240), (1, 1), (1280, 720), (17, 3)]
        let (width, height) = sizes[frameByte % sizes.count]
        let geometry = FrameGeometry(frameWidth: width, frameHeight: height, modelWidth: manifest.input.width,
                                     modelHeight: manifest.input.height, mode: CropMode.allCases[(frameByte / 4) % CropMode.allCases.count])
        let bounds = FrameBounds(width: width, height: height)
        let regions = detections.map { bounds.clamp(RegionOfInterest(geometry.toFrame($0))) }
        for r in regions {
            let box = r.box
            guard box.xMin >= 0, box.yMin >= 0, box.xMax <= Double(width), box.yMax <= Double(height) else {
                throw FuzzFinding("a box outside the \(width)x\(height) frame: \(box)")
            }
            for p in r.keypoints where !(p.x >= -Double(width) && p.x <= 2 * Double(width) && p.y >= -Double(height) && p.y <= 2 * Double(height)) {
                throw FuzzFinding("a keypoint outside the bounds of a \(width)x\(height) frame: \(p)")
            }
        }
        return (regions, width, height)
    }

    /// `body` with each array as the buffer a decoder reads.
    static func withBuffers<R>(_ arrays: [[Float]], _ body: ([UnsafeBufferPointer<Float>]) -> R) -> R {
        func go(_ i: Int, _ done: [UnsafeBufferPointer<Float>]) -> R {
            guard i < arrays.count else { return body(done) }
            return arrays[i].withUnsafeBufferPointer { go(i + 1, done + [$0]) }
        }
        return go(0, [])
    }

    // MARK: helpers

    /// The value, nil for a `SpecError`; any other error is a finding.
    static func expectSpecError<T>(_ body: () throws -> T) throws -> T? {
        do { return try body() } catch is SpecError { return nil } catch let finding as FuzzFinding { throw finding } catch {
            throw FuzzFinding("threw \(type(of: error)), not a SpecError: \(error)")
        }
    }

    /// The value, nil for a `StageError`; any other error is a finding.
    static func expectStageError<T>(_ body: () throws -> T) throws -> T? {
        do { return try body() } catch is StageError { return nil } catch let finding as FuzzFinding { throw finding } catch {
            throw FuzzFinding("threw \(type(of: error)), not a StageError: \(error)")
        }
    }
}
