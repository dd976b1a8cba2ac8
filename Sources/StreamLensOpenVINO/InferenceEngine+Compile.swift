import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

// Reading a model, fixing its input's shape, compiling OpenVINO's pre-processing in front of it
// (or taking the input sampled in Swift).

extension InferenceEngine {
    /// Whether a model's input is sampled out of the frame in Swift (`SwiftPreprocessor`, on the
    /// stage's thread, while the previous frame's request runs) rather than by OpenVINO's
    /// compiled steps, which need the whole frame copied into the request first (and, for a
    /// letterbox, padded: a 720p frame for a square detector is a 1280x1280 tensor). Sampling
    /// reads only the pixels the input takes, so it wins when the input is much smaller than the
    /// frame (a face detector's 128x128 out of 720p, or out of 640x360); a large input (a 640x640
    /// YOLO, CenterFace's 640x384 out of 720p) is resampled faster by OpenVINO's vectorized code. Batches keep the compiled steps
    /// (BatchedModel packs frames).
    static func samplesInput(_ input: ImageInput, frame: FrameLayout, batch: Int) -> Bool {
        batch == 1 && input.width * input.height * samplingRatio <= frame.width * frame.height
    }
    /// Frame pixels per input pixel from which sampling in Swift is used (measured: see
    /// docs/inference.md, "Pre-processing").
    static let samplingRatio = 4

    /// `model` with OpenVINO's pre-processing for `frame` and `region` in front, compiled; with
    /// `sampled`, taking the input's f32 tensor as `SwiftPreprocessor` writes it instead.
    func compile(_ model: OpaquePointer, input: ImageInput, frame: FrameLayout, colorFormat: ov_color_format_e, region: FrameRegion,
                 options: InferenceOptions, plan: ThreadPlan, resizable: Bool, batch: Int, sampled: Bool = false,
                 label path: String) throws -> CompiledModel {
        let inputs = try ports(model, inputs: true)
        let imageIndex = try input.imageInputIndex(among: inputs.map(\.name), of: path)
        try makeStatic(model, index: imageIndex, name: inputs.count > 1 ? inputs[imageIndex].name : nil, input: input, resizable: resizable, batch: batch)

        let ppp = try handle("ov_preprocess_prepostprocessor_create") { ov_preprocess_prepostprocessor_create(model, $0) }
        defer { ov_preprocess_prepostprocessor_free(ppp) }
        let inputInfo = try handle("ov_preprocess_prepostprocessor_get_input_info_by_index") { ov_preprocess_prepostprocessor_get_input_info_by_index(ppp, imageIndex, $0) }
        defer { ov_preprocess_input_info_free(inputInfo) }

        let tensorInfo = try handle("ov_preprocess_input_info_get_tensor_info") { ov_preprocess_input_info_get_tensor_info(inputInfo, $0) }
        defer { ov_preprocess_input_tensor_info_free(tensorInfo) }
        let modelInfo = try handle("ov_preprocess_input_info_get_model_info") { ov_preprocess_input_info_get_model_info(inputInfo, $0) }
        defer { ov_preprocess_input_model_info_free(modelInfo) }
        try withLayout(input.layout) { try check(ov_preprocess_input_model_info_set_layout(modelInfo, $0), "ov_preprocess_input_model_info_set_layout") }
        var padding = (top: 0, left: 0, bottom: 0, right: 0)
        let tensorShape: [Int]
        if sampled {
            // The tensor is the model's input, f32 in its layout: OpenVINO converts only what the
            // network computes in.
            try check(ov_preprocess_input_tensor_info_set_element_type(tensorInfo, F32), "ov_preprocess_input_tensor_info_set_element_type")
            try withLayout(input.layout) { try check(ov_preprocess_input_tensor_info_set_layout(tensorInfo, $0), "ov_preprocess_input_tensor_info_set_layout") }
            tensorShape = input.tensorShape
        } else {
            padding = try compileSteps(inputInfo, tensorInfo, input: input, frame: frame, colorFormat: colorFormat, region: region, batch: batch, label: path)
            tensorShape = [batch, frame.height + padding.top + padding.bottom, frame.width + padding.left + padding.right, frame.channels]
        }

        // Every output handed over as f32, whatever the model computes it in (f16, u8, i8, i32…):
        // OpenVINO converts at the end of the network, and the readers below only know f32.
        for i in 0..<(try portCount(model, inputs: false)) {
            let outputInfo = try handle("ov_preprocess_prepostprocessor_get_output_info_by_index") { ov_preprocess_prepostprocessor_get_output_info_by_index(ppp, i, $0) }
            defer { ov_preprocess_output_info_free(outputInfo) }
            let outputTensor = try handle("ov_preprocess_output_info_get_tensor_info") { ov_preprocess_output_info_get_tensor_info(outputInfo, $0) }
            defer { ov_preprocess_output_tensor_info_free(outputTensor) }
            try check(ov_preprocess_output_set_element_type(outputTensor, F32), "ov_preprocess_output_set_element_type")
        }

        let built = try handle("ov_preprocess_prepostprocessor_build") { ov_preprocess_prepostprocessor_build(ppp, $0) }
        defer { ov_model_free(built) }

        let outputs = try ports(built, inputs: false)
        let otherInputs = try ports(built, inputs: true).enumerated().filter { $0.offset != imageIndex }.map(\.element)
        let sampler = sampled ? try SwiftPreprocessor(Preprocessing(input: input, frame: frame, region: region), shape: tensorShape) : nil
        let (compiled, precision) = try compileChoosingPrecision(built, options: options, plan: plan, tensorShape: tensorShape,
                                                                 elementType: sampled ? F32 : U8, imageInput: imageIndex, label: path)
        return CompiledModel(engine: self, pointer: compiled, frame: frame, padding: padding, sampler: sampler, imageInput: imageIndex,
                             otherInputs: otherInputs, outputs: outputs, settings: "\(precision), \(plan)" + (sampled ? ", input sampled in Swift" : ""))
    }

    /// OpenVINO's steps from a U8 frame (NHWC, its colour format) to the model's input: crop
    /// or letterbox, resize, colour, f32, mean and scale. Returns the letterbox padding.
    private func compileSteps(_ inputInfo: OpaquePointer, _ tensorInfo: OpaquePointer, input: ImageInput, frame: FrameLayout,
                              colorFormat: ov_color_format_e, region: FrameRegion, batch: Int,
                              label path: String) throws -> (top: Int, left: Int, bottom: Int, right: Int) {
        try check(ov_preprocess_input_tensor_info_set_element_type(tensorInfo, U8), "ov_preprocess_input_tensor_info_set_element_type")
        try withLayout("NHWC") { try check(ov_preprocess_input_tensor_info_set_layout(tensorInfo, $0), "ov_preprocess_input_tensor_info_set_layout") }
        try check(ov_preprocess_input_tensor_info_set_color_format(tensorInfo, colorFormat), "ov_preprocess_input_tensor_info_set_color_format")
        // Letterbox padding is done by placing the frame's rows into a zeroed buffer of the padded
        // size (a copy, no resampling): OpenVINO pads only f32 tensors, and converting the whole
        // frame to f32 before resizing works on every frame pixel, costing more than a small
        // model's inference.
        var padding = (top: 0, left: 0, bottom: 0, right: 0)
        if case let .pad(top, left, bottom, right) = region { padding = (top, left, bottom, right) }
        let tensorHeight = frame.height + padding.top + padding.bottom, tensorWidth = frame.width + padding.left + padding.right
        try check(ov_preprocess_input_tensor_info_set_spatial_static_shape(tensorInfo, tensorHeight, tensorWidth), "ov_preprocess_input_tensor_info_set_spatial_static_shape")

        let steps = try handle("ov_preprocess_input_info_get_preprocess_steps") { ov_preprocess_input_info_get_preprocess_steps(inputInfo, $0) }
        defer { ov_preprocess_preprocess_steps_free(steps) }
        // Crop and resize first, on u8; colour conversion and f32 only at the model's size, so
        // they work on the input's pixels, not on the whole frame's (which, for a small model,
        // would cost more than the model).
        if case let .crop(x, y, width, height) = region {
            var begin: [Int32] = [0, Int32(y), Int32(x), 0]
            var end: [Int32] = [Int32(batch), Int32(y + height), Int32(x + width), Int32(frame.channels)]
            try check(ov_preprocess_preprocess_steps_crop(steps, &begin, 4, &end, 4), "ov_preprocess_preprocess_steps_crop")
        }
        try check(ov_preprocess_preprocess_steps_resize(steps, RESIZE_LINEAR), "ov_preprocess_preprocess_steps_resize")
        if colorFormat == GRAY {
            guard input.colorOrder == "GRAY" else { throw InferenceError("\(path): grey frames for a model that takes \(input.colorOrder)") }
        } else {
            try check(ov_preprocess_preprocess_steps_convert_color(steps, input.colorOrder == "BGR" ? BGR : RGB), "ov_preprocess_preprocess_steps_convert_color")
        }
        try check(ov_preprocess_preprocess_steps_convert_element_type(steps, F32), "ov_preprocess_preprocess_steps_convert_element_type")
        // One value for all channels, or one per channel (in the model's channel order).
        var mean = input.mean, scale = input.scale
        if Set(mean).count == 1 { mean = [mean[0]] }
        if Set(scale).count == 1 { scale = [scale[0]] }
        if mean.count > 1 {
            try check(ov_preprocess_preprocess_steps_mean_multi_channels(steps, &mean, Int32(mean.count)), "ov_preprocess_preprocess_steps_mean_multi_channels")
        } else if mean[0] != 0 {
            try check(ov_preprocess_preprocess_steps_mean(steps, mean[0]), "ov_preprocess_preprocess_steps_mean")
        }
        if scale.count > 1 {
            try check(ov_preprocess_preprocess_steps_scale_multi_channels(steps, &scale, Int32(scale.count)), "ov_preprocess_preprocess_steps_scale_multi_channels")
        } else if scale[0] != 1 {
            try check(ov_preprocess_preprocess_steps_scale(steps, scale[0]), "ov_preprocess_preprocess_steps_scale")
        }

        return padding
    }

    /// One compilation with `precision` (nil: the device's default) and the thread plan.
    func compileOnce(_ built: OpaquePointer, options: InferenceOptions, plan: ThreadPlan, precision: String?) throws -> OpaquePointer {
        var pairs: [(String, String)] = []
        if let precision { pairs.append(("INFERENCE_PRECISION_HINT", precision)) }
        if let threads = plan.threads { pairs.append(("INFERENCE_NUM_THREADS", String(threads))) }
        if plan.streams > 1 {
            pairs.append(("NUM_STREAMS", String(plan.streams)))
        } else if let h = options.performanceHint {
            pairs.append(("PERFORMANCE_HINT", h))
        }
        if let pinning = plan.pinning { pairs.append(("ENABLE_CPU_PINNING", pinning ? "YES" : "NO")) }
        // A directory of blobs for each precision: OpenVINO's model cache (2026.4, CPU) does not
        // key a blob by INFERENCE_PRECISION_HINT. The same model compiled at f16 after f32 in one
        // CACHE_DIR loads the f32 blob (LOADED_FROM_CACHE, f32's speed) while reporting f16, so
        // a pinned precision could run another and precision=auto would time one blob twice.
        if let c = options.cacheDirectory { pairs.append(("CACHE_DIR", c + "/" + (precision ?? "default"))) }
        var compiled: OpaquePointer?
        try withProperties(pairs) { count, properties in
            try check(ov_core_compile_model_props(core, built, options.device, count, properties, &compiled), "ov_core_compile_model_props")
        }
        return compiled!
    }

    func portCount(_ model: OpaquePointer, inputs: Bool) throws -> Int {
        var n = 0
        if inputs { try check(ov_model_inputs_size(model, &n), "ov_model_inputs_size") } else { try check(ov_model_outputs_size(model, &n), "ov_model_outputs_size") }
        return n
    }

    /// Batch → 1 when dynamic (otherwise inference "succeeds" on an empty tensor) or `resizable`;
    /// height and width → `input`'s, by reshaping when they are dynamic or differ; a dynamic channel count
    /// → 3. A model that cannot take that size is refused with a message saying so.
    /// `batch` > 1: the batch → `batch`, whatever the model says (it may refuse: thrown).
    func makeStatic(_ model: OpaquePointer, index: Int, name: String?, input: ImageInput, resizable: Bool, batch: Int) throws {
        let port = try handle("ov_model_const_input_by_index") { ov_model_const_input_by_index(model, index, $0) }
        defer { ov_output_const_port_free(port) }
        var partial = ov_partial_shape_t()
        try check(ov_port_get_partial_shape(port, &partial), "ov_port_get_partial_shape")
        defer { ov_partial_shape_free(&partial) }
        guard partial.rank.min == 4, partial.rank.max == 4 else {
            throw InferenceError("the model's input is not an image (rank \(partial.rank.min)…\(partial.rank.max), expected 4)")
        }
        let nchw = input.layout == "NCHW"
        let current = (0..<4).map { (partial.dims[$0].min, partial.dims[$0].max) }
        let channels = current[nchw ? 1 : 3]
        let wanted: Int64 = input.colorOrder == "GRAY" ? 1 : 3
        guard channels.0 != channels.1 || channels.0 == wanted else {
            throw InferenceError("the model's image input has \(channels.0) channels in \(input.layout) layout; the manifest's \(input.colorOrder) gives \(wanted) (is its layout or color_order right?)")
        }
        var dims: [Int64] = (0..<4).map { i in
            switch (i, nchw) {
            // A resizable model's fixed batch (CenterFace's file says 10) is one frame too.
            case (0, _) where batch > 1: return Int64(batch)
            case (0, _): return current[0].0 == current[0].1 && !resizable ? current[0].0 : 1
            case (2, true), (1, false): return Int64(input.height)
            case (3, true), (2, false): return Int64(input.width)
            default: return current[i].0 == current[i].1 ? current[i].0 : wanted
            }
        }
        let was = current.map { $0.0 == $0.1 ? String($0.0) : "?" }.joined(separator: ",")
        if !ov_partial_shape_is_dynamic(partial) {
            if current.map(\.0) == dims { return }
            // A batch is the one change a model that is not resizable may take.
            guard resizable || batch > 1 && Array(current.dropFirst().map(\.0)) == Array(dims.dropFirst()) else {
                throw InferenceError("the model's image input is [\(was)] but the manifest says \(input.width)x\(input.height) \(input.layout)"
                                     + " (a fully convolutional detector may say \"resizable\": true in its input)")
            }
        }
        var fixed = ov_partial_shape_t()
        try check(ov_partial_shape_create_static(4, &dims, &fixed), "ov_partial_shape_create_static")
        defer { ov_partial_shape_free(&fixed) }
        do {
            if let name {
                try check(ov_model_reshape_input_by_name(model, name, fixed), "ov_model_reshape_input_by_name")
            } else {
                try check(ov_model_reshape_single_input(model, fixed), "ov_model_reshape_single_input")
            }
        } catch let error as InferenceError {
            // OpenVINO's text names the shape check that failed deep inside the graph: its first
            // line is enough.
            let detail = error.message.split(separator: "\n").first.map(String.init) ?? error.message
            throw InferenceError("the model's image input [\(was)] cannot take " + (batch > 1 ? "a batch of \(batch), " : "")
                                 + "\(input.width)x\(input.height) (\(detail))")
        }
    }

    /// Names and shapes of a model's inputs or outputs (a dynamic dimension shows as -1).
    func ports(_ model: OpaquePointer, inputs: Bool) throws -> [(name: String, shape: [Int])] {
        try (0..<portCount(model, inputs: inputs)).map { i in
            var port: OpaquePointer?
            if inputs {
                try check(ov_model_const_input_by_index(model, i, &port), "ov_model_const_input_by_index")
            } else {
                try check(ov_model_const_output_by_index(model, i, &port), "ov_model_const_output_by_index")
            }
            defer { ov_output_const_port_free(port) }
            var cName: UnsafeMutablePointer<CChar>?
            let name: String
            if ov_port_get_any_name(port, &cName) == OK, let cName {
                name = String(cString: cName)
                ov_free(cName)
            } else {
                name = String(i)
            }
            var partial = ov_partial_shape_t()
            try check(ov_port_get_partial_shape(port, &partial), "ov_port_get_partial_shape")
            defer { ov_partial_shape_free(&partial) }
            guard partial.rank.min == partial.rank.max else { return (name, []) }
            return (name, (0..<Int(partial.rank.min)).map { partial.dims[$0].min == partial.dims[$0].max ? Int(partial.dims[$0].min) : -1 })
        }
    }

    func withLayout(_ text: String, _ body: (OpaquePointer) throws -> Void) throws {
        let layout = try handle("ov_layout_create") { ov_layout_create(text, $0) }
        defer { ov_layout_free(layout) }
        try body(layout)
    }

    /// Literal property names (Swift 6 rejects the C API's global key symbols).
    func withProperties(_ pairs: [(String, String)], _ body: (Int, UnsafePointer<ov_property_t>?) throws -> Void) throws {
        let strings = pairs.flatMap { [strdup($0.0)!, strdup($0.1)!] }
        defer { strings.forEach { free($0) } }
        var properties = (0..<pairs.count).map { i in
            ov_property_t(key: UnsafePointer(strings[2 * i]), value: UnsafeRawPointer(strings[2 * i + 1]))
        }
        try properties.withUnsafeMutableBufferPointer { try body($0.count, UnsafePointer($0.baseAddress)) }
    }
}
