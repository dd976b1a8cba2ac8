import Foundation
import StreamLensCore
import Synchronization

// The process's share of the machine for model stages: who is running a model, how many
// threads each compiled model gets, and which precision `precision=auto` settled on. Plain
// Swift; a backend applies it (StreamLensOpenVINO compiles with the plan's threads).
//
// Why this design: OpenVINO's CPU plugin pins its inference threads to cores by default, and
// every compiled model starts its pinning at core 0, so models that run at the same time — in
// one process or in several — queue on the same core while the others idle; and models that
// each take every core's worth of threads get in each other's way. So: never pin, and give each
// model that runs at the same time its share of the cores (threads = cores / models, at least
// one), which is also what lets separate StreamLens processes run side by side. One model alone
// still gets every core. (docs/inference.md, "Several models in one process".)

/// A model stage that will run a local model: counted by `ThreadPlan` while the token lives.
public final class ModelUse: Sendable {
    let identity: String
    let id: Int
    fileprivate let registry: ModelRegistry
    fileprivate init(identity: String, id: Int, registry: ModelRegistry) { self.identity = identity; self.id = id; self.registry = registry }
    deinit { registry.remove(id) }
}

/// A process's share of the machine for model stages: the stages alive (each registered when
/// built, before any model is compiled: a pipeline builds all its stages before the first caps
/// arrive) and whether models are compiled for throughput. Backends plan their threads from it.
public final class ThreadBudget: Sendable {
    /// The process's budget: every model stage counts in it.
    public static let process = ThreadBudget()

    let models = ModelRegistry()

    /// Models are compiled for throughput (`ThreadPlan.plan`): set by `streamlens serve`, whose
    /// sources share each model one after another.
    public let throughput = Atomic<Bool>(false)

    public init() {}

    /// Counts a stage that will run the local model at `path` while the token lives.
    public func register(_ path: String) -> ModelUse { models.add(path) }

    /// The cores this process may run on.
    public var cores: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// The thread plan a model compiled now gets.
    public func plan(path: String, options: InferenceOptions) -> ThreadPlan {
        let users = models.count(sharing: path)
        return ThreadPlan.plan(device: options.device, threads: options.threads, cores: cores, models: users.all, sharing: users.same,
                               throughput: throughput.load(ordering: .relaxed))
    }
}

/// The model stages alive in a budget, by the model each runs.
final class ModelRegistry: Sendable {
    private let users = Mutex<(next: Int, identities: [Int: String])>((0, [:]))

    func add(_ identity: String) -> ModelUse {
        let id = users.withLock { state in
            state.next += 1
            state.identities[state.next] = identity
            return state.next
        }
        return ModelUse(identity: identity, id: id, registry: self)
    }

    fileprivate func remove(_ id: Int) { _ = users.withLock { $0.identities.removeValue(forKey: id) } }

    /// (all users, users of `identity`).
    func count(sharing identity: String) -> (all: Int, same: Int) {
        users.withLock { state in (state.identities.count, state.identities.values.filter { $0 == identity }.count) }
    }
}

/// How one compiled model is run on the CPU: its threads (all streams together), its streams
/// (one per stage sharing the compiled model, so two stages with one model do not queue behind
/// each other) and no pinning.
public struct ThreadPlan: Sendable, Hashable, CustomStringConvertible {
    /// INFERENCE_NUM_THREADS (nil: OpenVINO's choice, for devices other than the CPU).
    public var threads: Int?
    /// NUM_STREAMS (1: the latency hint's single stream).
    public var streams: Int
    /// ENABLE_CPU_PINNING (nil: not a CPU property on this device).
    public var pinning: Bool?
    /// Whether `threads` came from the stage's `threads=` rather than the budget.
    public var explicit: Bool

    /// `cores` shared among `models` model stages alive now, `sharing` of which run this very
    /// model; `threads` is the stage's explicit setting (0 or nil: the budget decides).
    ///
    /// `throughput` (`streamlens serve`: the stages that will share a model come one source at a
    /// time, after it is compiled): one stream per core with a thread each, so that the requests
    /// of many sources run side by side instead of one after another on one stream, as they
    /// would in separate processes (`make bench-streams` compares the two).
    public static func plan(device: String, threads requested: Int?, cores: Int, models: Int, sharing: Int, throughput: Bool = false) -> ThreadPlan {
        guard device == "CPU" else { return ThreadPlan(threads: requested.flatMap { $0 > 0 ? $0 : nil }, streams: 1, pinning: nil, explicit: true) }
        if let t = requested, t > 0 { return ThreadPlan(threads: t, streams: 1, pinning: false, explicit: true) }
        if throughput {
            let streams = max(1, cores, sharing)
            return ThreadPlan(threads: streams, streams: streams, pinning: false, explicit: false)
        }
        let streams = max(1, sharing)
        let perStream = max(1, cores / max(1, models))
        return ThreadPlan(threads: perStream * streams, streams: streams, pinning: false, explicit: false)
    }

    public var description: String {
        guard let threads else { return "device's threads" }
        let each = streams > 1 ? " in \(streams) streams" : ""
        let why = explicit ? "threads=" : "its share of the cores"
        return "\(threads) thread\(threads == 1 ? "" : "s")\(each) (\(why), not pinned)"
    }
}

/// What `precision=auto` decided for one model, device, input size and thread plan: kept in
/// the compiled-model cache folder, so a second start does not measure again.
public struct PrecisionDecision: Codable, Sendable, Equatable {
    public var precision: String
    /// Median milliseconds of one inference for each candidate measured (empty: one candidate).
    public var milliseconds: [String: Double]
    /// Why, when nothing was measured.
    public var reason: String?

    public init(precision: String, milliseconds: [String: Double], reason: String?) {
        self.precision = precision; self.milliseconds = milliseconds; self.reason = reason
    }

    /// "precision auto → f32 (24.1 ms vs bf16 38.1 ms)".
    public func summary(device: String, cached: Bool) -> String {
        var text = "precision auto → \(precision)"
        if let reason {
            text += " (\(reason))"
        } else if let mine = milliseconds[precision] {
            let others = milliseconds.filter { $0.key != precision }.sorted { $0.key < $1.key }
                .map { String(format: "%@ %.1f ms", $0.key, $0.value) }.joined(separator: ", ")
            text += String(format: " (%.1f ms vs %@%@)", mine, others, cached ? ", measured at an earlier start" : "")
        }
        return text
    }

    /// How much faster than f32 a lower precision must measure to be chosen: f32 is the
    /// model's own arithmetic, so a tie (or a gain within the timing's noise) keeps it; 3 % keeps
    /// auto within the 5 % of the best fixed precision that `make bench-precision` holds it to.
    /// (Two precisions timed exactly alike are one compiled blob timed twice: see the cache note
    /// in compileOnce.)
    public static let lowerPrecisionMargin = 0.03

    /// The fastest of `milliseconds`, where a precision other than f32 has to beat f32 by
    /// `lowerPrecisionMargin`.
    public static func fastest(_ milliseconds: [String: Double]) -> PrecisionDecision? {
        guard let best = milliseconds.min(by: { $0.value < $1.value || $0.value == $1.value && $0.key < $1.key }) else { return nil }
        if best.key != "f32", let f32 = milliseconds["f32"], best.value > f32 * (1 - lowerPrecisionMargin) {
            return PrecisionDecision(precision: "f32", milliseconds: milliseconds, reason: nil)
        }
        return PrecisionDecision(precision: best.key, milliseconds: milliseconds, reason: nil)
    }

    /// The file a decision is kept in: one per model file (its path, size and modification
    /// time), device, tensor shape and thread plan.
    public static func file(in directory: String, model path: String, device: String, shape: [Int], plan: ThreadPlan, candidates: [String]) -> String {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let size = (attributes?[.size] as? NSNumber)?.int64Value ?? -1
        let time = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        let key = "\(path)|\(size)|\(time)|\(device)|\(shape)|\(plan.threads ?? 0)x\(plan.streams)|\(candidates.joined(separator: ","))"
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 // FNV-1a
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return directory + "/precision-" + String(hash, radix: 16) + ".json"
    }

    public static func load(_ file: String) -> PrecisionDecision? {
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        return try? JSONDecoder().decode(PrecisionDecision.self, from: data)
    }

    /// Written whole or not at all (a temporary file renamed); a folder that cannot be written
    /// only means the next start measures again.
    public func store(_ file: String) {
        let folder = (file as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        guard let data = try? JSONEncoder().encode(self) else { return }
        let temporary = file + ".\(getpid()).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else { return }
        if rename(temporary, file) != 0 { unlink(temporary) }
    }
}

/// The candidates `precision=auto` tries: the ones the device lists in its
/// OPTIMIZATION_CAPABILITIES (FP32, BF16, FP16), or STREAMLENS_PRECISION_CANDIDATES
/// (comma-separated, e.g. "f32,bf16") when set. Each candidate is compiled and the precision the
/// compiled model reports is what counts (a CPU without bf16 runs a bf16 hint in f32).
public func precisionCandidates(capabilities: [String]) -> [String] {
    if let listed = ProcessInfo.processInfo.environment["STREAMLENS_PRECISION_CANDIDATES"], !listed.isEmpty {
        return commaList(listed).map { $0.lowercased() }
    }
    let names = ["FP32": "f32", "BF16": "bf16", "FP16": "f16"]
    let found = capabilities.compactMap { names[$0.uppercased()] }
    return found.isEmpty ? ["f32"] : ["f32", "bf16", "f16"].filter(found.contains)
}
