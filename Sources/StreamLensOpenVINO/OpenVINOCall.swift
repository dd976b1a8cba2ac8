import COpenVINO
import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

// The OpenVINO backend: the only module that imports COpenVINO. Every file of it calls the C
// API through `check`, which carries the failing call's name and OpenVINO's own message.

/// One status-to-throw helper for the whole C API.
func check(_ status: ov_status_e, _ call: StaticString) throws {
    guard status != OK else { return }
    // The message is a copy the caller owns (OpenVINO allocates it per call): freed with ov_free,
    // found by LeakSanitizer (make test-asan).
    let detail = ov_get_last_err_msg().map { text -> String in
        defer { ov_free(text) }
        return String(cString: text)
    }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    throw InferenceError("\(call) failed (status \(status.rawValue))" + (detail.isEmpty ? "" : ": \(detail)"))
}

/// Calls a C API function that hands out a handle through its last argument: the status
/// checked, a missing handle an error too (never a force-unwrap). The handle is the caller's to free.
func handle(_ call: StaticString, _ get: (UnsafeMutablePointer<OpaquePointer?>) -> ov_status_e) throws -> OpaquePointer {
    var handle: OpaquePointer?
    try check(get(&handle), call)
    guard let handle else { throw InferenceError("\(call) gave no handle") }
    return handle
}

extension FrameLayout {
    /// OpenVINO's name for the frame's pixel format (nil: not one a model can be fed).
    var colorFormat: ov_color_format_e? {
        switch pixelFormat {
        case "GRAY8": return GRAY
        case "RGB": return RGB
        case "BGR": return BGR
        case "RGBx", "RGBA": return RGBX
        case "BGRx", "BGRA": return BGRX
        default: return nil
        }
    }
}

/// Output `index` of a finished request as f32 values (the tensor: the caller frees it, after
/// the last use of the values, which it holds).
func f32Output(of request: OpaquePointer, index: Int, name: String) throws -> (tensor: OpaquePointer?, values: UnsafeBufferPointer<Float>) {
    let tensor = try handle("ov_infer_request_get_output_tensor_by_index") { ov_infer_request_get_output_tensor_by_index(request, index, $0) }
    do {
        var type = DYNAMIC
        try check(ov_tensor_get_element_type(tensor, &type), "ov_tensor_get_element_type")
        guard type == F32 else { throw InferenceError("output \(name) is not f32 (element type \(type.rawValue))") }
        var count = 0
        try check(ov_tensor_get_size(tensor, &count), "ov_tensor_get_size")
        var data: UnsafeMutableRawPointer?
        try check(ov_tensor_data(tensor, &data), "ov_tensor_data")
        return (tensor, UnsafeBufferPointer(start: data!.assumingMemoryBound(to: Float.self), count: count))
    } catch {
        ov_tensor_free(tensor)
        throw error
    }
}
