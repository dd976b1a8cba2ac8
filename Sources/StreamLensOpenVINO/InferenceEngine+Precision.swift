import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

// precision=auto: the candidates a device runs, measured on the model's own input, the faster kept.

extension InferenceEngine {
    /// The precision a compiled model runs at, as OpenVINO reports it ("f32", "bf16", "f16").
    func reportedPrecision(_ compiled: OpaquePointer) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard ov_compiled_model_get_property(compiled, "INFERENCE_PRECISION_HINT", &value) == OK, let value else { return nil }
        defer { ov_free(value) }
        let text = String(cString: value).lowercased()
        return ["float32": "f32", "bfloat16": "bf16", "float16": "f16"][text] ?? text
    }

    /// Compiles with the precision asked for; for "auto" on the CPU, with the faster of the
    /// candidates the CPU runs (timed in this process on the model's own input shape, a few
    /// inferences each, interleaved, or read from an earlier start's decision). Returns the
    /// compiled model and what to say about its precision.
    func compileChoosingPrecision(_ built: OpaquePointer, options: InferenceOptions, plan: ThreadPlan, tensorShape: [Int],
                                  elementType: ov_element_type_e, imageInput: Int, label path: String) throws -> (OpaquePointer, String) {
        guard options.precision == "auto" else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: options.precision)
            if let asked = options.precision { return (compiled, "precision \(asked)") }
            return (compiled, "precision \(reportedPrecision(compiled) ?? "?") (\(options.device)'s default)")
        }
        guard options.device == "CPU" else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: nil)
            return (compiled, "precision auto → \(reportedPrecision(compiled) ?? "?") (\(options.device) chooses its own)")
        }
        let candidates = precisionCandidates(capabilities: capabilities(of: options.device))
        let file = options.cacheDirectory.map {
            PrecisionDecision.file(in: $0, model: path, device: options.device, shape: tensorShape, plan: plan, candidates: candidates)
        }
        if let file, let decision = PrecisionDecision.load(file), candidates.contains(decision.precision) {
            return (try compileOnce(built, options: options, plan: plan, precision: decision.precision), decision.summary(device: options.device, cached: true))
        }
        // Each candidate compiled; one the device runs as another precision (a bf16 hint on a
        // CPU without bf16 runs in f32) is not a candidate here.
        var runs: [(precision: String, compiled: OpaquePointer)] = []
        var dropped: [String] = []
        for candidate in candidates {
            guard let compiled = try? compileOnce(built, options: options, plan: plan, precision: candidate) else { dropped.append(candidate); continue }
            let real = reportedPrecision(compiled) ?? candidate
            if real != candidate || runs.contains(where: { $0.precision == real }) {
                ov_compiled_model_free(compiled)
                dropped.append(candidate)
                continue
            }
            runs.append((candidate, compiled))
        }
        guard !runs.isEmpty else {
            let compiled = try compileOnce(built, options: options, plan: plan, precision: "f32")
            return (compiled, "precision auto → f32 (none of \(candidates.joined(separator: ", ")) compiled as itself)")
        }
        let decision: PrecisionDecision
        if runs.count == 1 {
            decision = PrecisionDecision(precision: runs[0].precision, milliseconds: [:],
                                         reason: "the only precision \(options.device) runs here" + (dropped.isEmpty ? "" : "; \(dropped.joined(separator: ", ")) would run as \(runs[0].precision)"))
        } else {
            do {
                decision = PrecisionDecision.fastest(try medianMilliseconds(runs, tensorShape: tensorShape, elementType: elementType, imageInput: imageInput))!
            } catch {
                runs.forEach { ov_compiled_model_free($0.compiled) }
                throw error
            }
        }
        for run in runs where run.precision != decision.precision { ov_compiled_model_free(run.compiled) }
        if let file { decision.store(file) }
        return (runs.first { $0.precision == decision.precision }!.compiled, decision.summary(device: options.device, cached: false))
    }

    /// Median milliseconds of one inference of each compiled model on a zero frame: one warm-up,
    /// then rounds taking one inference of each in turn (so a load that comes and goes weighs on
    /// all alike) — at least `minimumRounds`, and more until each candidate has run for
    /// `minimumMilliseconds` (at most `maximumRounds`): five rounds of a model of a few
    /// milliseconds are too few for the same choice from one start to the next, while a slow
    /// model (a style) has run long enough after five.
    func medianMilliseconds(_ runs: [(precision: String, compiled: OpaquePointer)], tensorShape: [Int], elementType: ov_element_type_e, imageInput: Int,
                                    minimumRounds: Int = 5, maximumRounds: Int = 100, minimumMilliseconds: Double = 300) throws -> [String: Double] {
        var requests: [OpaquePointer] = []
        var tensors: [OpaquePointer] = []
        defer {
            requests.forEach { ov_infer_request_free($0) }
            tensors.forEach { ov_tensor_free($0) }
        }
        var dims = tensorShape.map(Int64.init)
        var shape = ov_shape_t()
        try check(ov_shape_create(Int64(dims.count), &dims, &shape), "ov_shape_create")
        defer { ov_shape_free(&shape) }
        for run in runs {
            let request = try handle("ov_compiled_model_create_infer_request") { ov_compiled_model_create_infer_request(run.compiled, $0) }
            requests.append(request)
            let tensor = try handle("ov_tensor_create") { ov_tensor_create(elementType, shape, $0) }
            tensors.append(tensor)
            var data: UnsafeMutableRawPointer?
            var size = 0
            try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
            try check(ov_tensor_get_byte_size(tensor, &size), "ov_tensor_get_byte_size")
            data!.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            try check(ov_infer_request_set_input_tensor_by_index(request, imageInput, tensor), "ov_infer_request_set_input_tensor_by_index")
            try check(ov_infer_request_infer(request), "ov_infer_request_infer") // warm-up
        }
        var times = [[Double]](repeating: [], count: runs.count)
        var rounds = 0
        while rounds < minimumRounds || rounds < maximumRounds && times.contains(where: { $0.reduce(0, +) < minimumMilliseconds }) {
            for (i, request) in requests.enumerated() {
                let start = DispatchTime.now().uptimeNanoseconds
                try check(ov_infer_request_infer(request), "ov_infer_request_infer")
                let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                times[i].append(ms)
            }
            rounds += 1
        }
        var result: [String: Double] = [:]
        for (i, run) in runs.enumerated() { result[run.precision] = times[i].sorted()[rounds / 2] }
        return result
    }
}
