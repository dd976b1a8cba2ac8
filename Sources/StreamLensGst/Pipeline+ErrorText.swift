import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

extension Pipeline {
    /// The first error already on the bus, printed.
    func drainError(_ bus: UnsafeMutablePointer<GstBus>) -> String? {
        while let message = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR) {
            defer { gst_message_unref(message) }
            let text = errorText(message)
            log("error: \(text)")
            return text
        }
        return nil
    }

    /// "<element>: <message>" plus the debug text, with known causes explained.
    func errorText(_ message: UnsafeMutablePointer<GstMessage>) -> String {
        var error: UnsafeMutablePointer<GError>?
        var debug: UnsafeMutablePointer<gchar>?
        gst_message_parse_error(message, &error, &debug)
        var text = error.flatMap { $0.pointee.message }.map { String(cString: $0) } ?? "unknown error"
        if let error { g_error_free(error) }
        let debugText = takeString(debug)
        if let debugText, let explained = explain(text, debug: debugText) {
            text = explained
        }
        text = Self.explainDevice(text)
        let full = "\(sourceName(message)): \(text)" + (debugText.map { "\n  debug: \($0)" } ?? "")
        return outputFiles?.userNames(in: full) ?? full
    }

    /// GStreamer's message for an error whose text hides the cause, said with the cause: which
    /// caps met where negotiation failed, which address is taken, which file is empty or cut.
    private func explain(_ text: String, debug: String) -> String? {
        if debug.contains("not-negotiated") {
            return NegotiationDiagnosis.negotiation(stages: stages, elements: allElements())
                ?? Self.knownCauses.first { debug.contains($0.debugContains) }?.message
        }
        if debug.contains("Address already in use"), let r = debug.range(of: "on host '"),
           let address = debug[r.upperBound...].split(separator: "'").first {
            return "address \(address) is already in use (another program is listening there; choose another port=)"
        }
        if let r = debug.range(of: "No such file \""), let path = debug[r.upperBound...].split(separator: "\"").first {
            return "file \(path) not found"
        }
        let file = inputFile()
        if text.hasPrefix("This appears to be a text file"), let file {
            return "\(file) is a text file, not a video"
        }
        if debug.contains("Can't typefind empty stream") {
            return "the input \(file.map { "file \($0) " } ?? "")is empty (0 bytes): there is nothing to decode"
        }
        if text.hasPrefix("Could not determine type of stream"), let file {
            return "\(file) is not a media file GStreamer can read (could not determine the type of stream)"
        }
        if debug.contains("no known streams found"), let file, Self.isMP4WithoutIndex(file) {
            return Self.noIndexMessage(file)
        }
        return Self.knownCauses.first { debug.contains($0.debugContains) }?.message
    }

    /// The file the pipeline reads, when it reads exactly one (a filesrc's location).
    private func inputFile() -> String? {
        let locations = allElements().filter { sl_element_factory_name($0).map { String(cString: $0) } == "filesrc" }
            .compactMap { takeString(sl_object_get_as_string($0, "location")) }
        return locations.count == 1 ? locations[0] : nil
    }

    /// v4l2src's camera errors, said in a user's words (the device stays named).
    static func explainDevice(_ text: String) -> String {
        func device(after prefix: String) -> String? {
            guard let r = text.range(of: prefix) else { return nil }
            return text[r.upperBound...].split(separator: "'").first.map(String.init)
        }
        if let d = device(after: "Cannot identify device '") {
            return "camera \(d) not found (no such device: is the camera connected? `ls /dev/video*` lists them)"
        }
        if let d = device(after: "Device '"), text.contains("is busy") {
            return "camera \(d) is busy (another program is using it)"
        }
        return text
    }

    /// Errors whose GStreamer message hides the cause, recognised by their debug text.
    static let knownCauses: [(debugContains: String, message: String)] = [
        ("not-negotiated", "caps could not be negotiated (no format both neighbours accept; a videoconvert or a different caps filter may be missing)"),
        ("reason not-linked", "a pad is not linked (for example decodebin found no video stream to link: is the input a video?)"),
        ("Address already in use", "the address or port is already in use (another program is listening there)"),
    ]

    /// The element a message comes from, named as the user wrote it: a stage's inner
    /// input and output report as the stage.
    func sourceName(_ message: UnsafeMutablePointer<GstMessage>) -> String {
        guard let src = message.pointee.src else { return "pipeline" }
        var object: UnsafeMutablePointer<GstObject>? = src
        gst_object_ref(src)
        var name = objectName(src)
        while let current = object {
            if sl_is_stage(UnsafeMutableRawPointer(current).assumingMemoryBound(to: GstElement.self)) != 0 {
                name = objectName(current)
            }
            let parent = gst_object_get_parent(current)
            gst_object_unref(current)
            object = parent
        }
        return name
    }
}
