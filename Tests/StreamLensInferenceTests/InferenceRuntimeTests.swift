import Foundation
import StreamLensCore
import StreamLensInference
import StreamLensOpenVINO
import Testing

/// The process's runtime: the thread budget, compiled models shared between stages, no
/// pinned threads, and precision=auto's decision measured once and remembered. Real OpenVINO,
/// the real short-range face model.
@Suite(.serialized) struct InferenceRuntimeTests {
    static let input = ImageInput(width: 128, height: 128, layout: "NHWC", colorOrder: "RGB", mean: 127.5, scale: 127.5)
    static let frame = FrameLayout(width: 128, height: 128, pixelFormat: "RGB", stride: 128 * 3)

    @Test func theBudgetDividesTheCoresAmongTheModelsAlive() {
        // One model alone: every core; four on two cores: one thread each; never zero.
        #expect(ThreadPlan.plan(device: "CPU", threads: nil, cores: 2, models: 1, sharing: 1).threads == 2)
        #expect(ThreadPlan.plan(device: "CPU", threads: 0, cores: 2, models: 4, sharing: 1).threads == 1)
        #expect(ThreadPlan.plan(device: "CPU", threads: nil, cores: 8, models: 3, sharing: 1).threads == 2)
        // Two stages sharing one compiled model: a stream each, their share of threads each.
        let shared = ThreadPlan.plan(device: "CPU", threads: nil, cores: 4, models: 2, sharing: 2)
        #expect(shared.threads == 4 && shared.streams == 2)
        // threads= wins; nothing is ever pinned on the CPU; other devices get no CPU properties.
        let explicit = ThreadPlan.plan(device: "CPU", threads: 3, cores: 2, models: 4, sharing: 1)
        #expect(explicit.threads == 3 && explicit.explicit && explicit.pinning == false)
        #expect(ThreadPlan.plan(device: "CPU", threads: nil, cores: 2, models: 2, sharing: 1).pinning == false)
        let gpu = ThreadPlan.plan(device: "GPU", threads: nil, cores: 2, models: 2, sharing: 1)
        #expect(gpu.threads == nil && gpu.pinning == nil)
    }

    @Test func aLowerPrecisionIsChosenOnlyWhenClearlyFaster() {
        // The Xeon's own figures: bf16 much slower, f16 equal to f32 — f32 stays (it used to
        // lose the tie to f16 by name); a lower precision clearly faster wins; without f32
        // measured the fastest wins.
        #expect(PrecisionDecision.fastest(["f32": 48.4, "bf16": 73.0, "f16": 48.4])?.precision == "f32")
        #expect(PrecisionDecision.fastest(["f32": 4.9, "bf16": 6.7, "f16": 4.8])?.precision == "f32")
        #expect(PrecisionDecision.fastest(["f32": 38.1, "bf16": 24.1])?.precision == "bf16")
        #expect(PrecisionDecision.fastest(["f32": 10.0, "f16": 9.6])?.precision == "f16")
        #expect(PrecisionDecision.fastest(["bf16": 7.0, "f16": 5.0])?.precision == "f16")
        #expect(PrecisionDecision.fastest([:]) == nil)
    }

    @Test func twoStagesWithTheSameModelShareOneCompiledModel() throws {
        let engine = try InferenceEngine()
        let uses = [engine.registerModel(shortRange), engine.registerModel(shortRange)]
        var options = InferenceOptions()
        options.precision = "f32"
        let a = try engine.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        let b = try engine.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(engine.compiledModelCount == 1)
        // Each stage a stream of its own (so they do not queue behind each other).
        #expect(a.settings.contains("2 streams"), "\(a.settings)")
        #expect(a.compiledProperty("NUM_STREAMS") == "2")
        let image = try decodeRGB(packageRoot.appendingPathComponent(".deps/media/astronaut.png").path)
        let frame = FrameLayout(width: image.width, height: image.height, pixelFormat: "RGB", stride: image.width * 3)
        let c = try engine.loadImageModel(path: shortRange, input: Self.input, frame: frame, region: .whole, options: options)
        #expect(engine.compiledModelCount == 2) // another frame size: another pre-processing
        // Both shared models give the same answer on one frame.
        let grey = [UInt8](repeating: 90, count: 128 * 128 * 3)
        let first = try grey.withUnsafeBytes { try a.infer($0) }, second = try grey.withUnsafeBytes { try b.infer($0) }
        #expect(first == second)
        _ = (uses, c)
    }

    /// OpenVINO pins its threads by default (every model from core 0, so models running at
    /// once queue on one core; ../README "Several models in one process"): what the compiled
    /// models themselves report is no pinning and the budget's threads and streams.
    @Test func compiledModelsRunUnpinnedWithTheBudgetsThreads() throws {
        let engine = try InferenceEngine()
        var options = InferenceOptions()
        options.precision = "f32"
        let uses = (0..<4).map { engine.registerModel(shortRange + "#\($0)") } // four stages, four other models
        let share = try engine.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        let cores = engine.cores
        #expect(share.compiledProperty("ENABLE_CPU_PINNING").map { ["NO", "false", "0"].contains($0) } == true, "\(share.compiledProperty("ENABLE_CPU_PINNING") ?? "nil")")
        #expect(share.compiledProperty("INFERENCE_NUM_THREADS") == String(max(1, cores / 4)))
        #expect(share.compiledProperty("NUM_STREAMS") == "1")
        _ = uses
        // A stage alone gets every core; threads= wins over that.
        let alone = try InferenceEngine()
        let use = alone.registerModel(shortRange)
        let all = try alone.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(all.compiledProperty("INFERENCE_NUM_THREADS") == String(cores))
        options.threads = 1
        let explicit = try alone.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(explicit.compiledProperty("INFERENCE_NUM_THREADS") == "1")
        #expect(explicit.settings.contains("1 thread (threads=, not pinned)"), "\(explicit.settings)")
        _ = use
    }

    @Test func autoPrecisionIsDecidedOnceAndRemembered() throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("auto-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: cache) }
        var options = InferenceOptions()
        options.precision = "auto"
        options.cacheDirectory = cache
        let engine = try InferenceEngine()
        let model = try engine.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        let runnable = ["FP32": "f32", "BF16": "bf16", "FP16": "f16"].filter { engine.capabilities(of: "CPU").contains($0.key) }.map(\.value)
        #expect(runnable.contains("f32"))
        if runnable.count > 1 {
            // Several precisions run here: each was timed and the faster kept.
            #expect(model.settings.range(of: #"precision auto → (f32|bf16|f16) \([0-9.]+ ms vs "#, options: .regularExpression) != nil, "\(model.settings)")
        } else {
            #expect(model.settings.hasPrefix("precision auto → f32 (the only precision CPU runs here"), "\(model.settings)")
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: cache).filter { $0.hasPrefix("precision-") && $0.hasSuffix(".json") }
        #expect(files.count == 1)
        let file = cache + "/" + files[0]
        let decision = try #require(PrecisionDecision.load(file))
        #expect(model.settings.hasPrefix("precision auto → \(decision.precision)"))
        let written = try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date

        // A second start (another engine: nothing shared in memory) reads the decision.
        let again = try InferenceEngine().loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(again.settings.hasPrefix("precision auto → \(decision.precision)"))
        if runnable.count > 1 { #expect(again.settings.contains("measured at an earlier start"), "\(again.settings)") }
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date == written)

        // A decision file that says something else is what the next start uses: another
        // precision this CPU runs where there is one (whatever was measured above), with times
        // no measurement here gives.
        var other = decision
        let planted = runnable.filter { $0 != decision.precision }.sorted().first ?? decision.precision
        let loser = planted == "f32" ? "bf16" : "f32"
        other.precision = planted
        other.milliseconds = [planted: 1, loser: 2]
        other.reason = nil
        other.store(file)
        let third = try InferenceEngine().loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(third.settings.hasPrefix("precision auto → \(planted) (1.0 ms vs \(loser) 2.0 ms, measured at an earlier start)"), "\(third.settings)")
        // …and the model runs at it: the compiled model reports that precision.
        let runsAt = third.compiledProperty("INFERENCE_PRECISION_HINT")?.lowercased().replacingOccurrences(of: "float", with: "f") // bfloat16 → bf16
        #expect(runsAt == planted, "\(runsAt ?? "nil")")
    }

    /// One cache directory, the same model compiled at f32 and then at each lower precision this
    /// CPU runs: each is that precision's own compilation (its outputs are those of a compilation
    /// without a cache, not f32's). OpenVINO's cache alone handed back f32's blob for f16.
    @Test func aCachedModelRunsThePrecisionAskedFor() throws {
        let capabilities = try InferenceEngine().capabilities(of: "CPU")
        let lower = ["BF16": "bf16", "FP16": "f16"].filter { capabilities.contains($0.key) }.map(\.value).sorted()
        guard !lower.isEmpty else { return } // only f32 runs on this CPU: no other precision's blob to mistake
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("precisions-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let pixels = (0..<(128 * 128 * 3)).map { UInt8(($0 * 37) % 251) }
        func outputs(_ precision: String, cache: String?) throws -> [TensorData] {
            var options = InferenceOptions()
            options.precision = precision
            options.cacheDirectory = cache
            let model = try InferenceEngine().loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
            return try pixels.withUnsafeBytes { try model.infer($0) }
        }
        let f32 = try outputs("f32", cache: cache)
        for precision in lower {
            // Compared as Bools: a failure names the precision, not 15,000 floats.
            let cached = try outputs(precision, cache: cache)
            let asCompiled = try cached == outputs(precision, cache: nil), asF32 = cached == f32
            #expect(asCompiled, "\(precision) from the cache is not \(precision)")
            #expect(!asF32, "\(precision) from the cache gave f32's outputs")
        }
        let f32Again = try outputs("f32", cache: cache) == f32
        #expect(f32Again, "f32 from the cache is not f32")
    }

    @Test func aCandidateTheCpuRunsAsAnotherPrecisionIsNotMeasured() throws {
        // Asked to try bf16 on a CPU without it, OpenVINO compiles f32: only one candidate is left.
        let engine = try InferenceEngine()
        guard !engine.capabilities(of: "CPU").contains("BF16") else { return } // this CPU runs bf16: the test above measured it
        setenv("STREAMLENS_PRECISION_CANDIDATES", "f32,bf16", 1)
        defer { unsetenv("STREAMLENS_PRECISION_CANDIDATES") }
        var options = InferenceOptions()
        options.precision = "auto"
        let model = try engine.loadImageModel(path: shortRange, input: Self.input, frame: Self.frame, region: .whole, options: options)
        #expect(model.settings.hasPrefix("precision auto → f32 (the only precision CPU runs here; bf16 would run as f32)"), "\(model.settings)")
    }
}
