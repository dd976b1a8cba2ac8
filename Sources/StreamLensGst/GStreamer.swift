import CGStreamer
import CGstShim
import StreamLensCore

/// Process-wide GStreamer set-up: `gst_init` once, then the stage elements registered
/// in-process so `gst_parse_launch` finds them like any installed element.
public enum GStreamer {
    /// Initialises GStreamer (idempotent) and registers `stages` as elements.
    public static func initialize(stages: [any Stage.Type]) throws {
        gst_init(nil, nil)
        // The same stages installed as a plugin (make install-plugin) would register the same
        // types a second time when loaded: this process uses its own, so the plugin is ignored.
        sl_registry_forget_plugin(pluginName)
        try StageElements.register(stages)
    }

    /// The plugin's name: libgst<name>.so, GST_PLUGIN_DEFINE's name.
    public static let pluginName = "streamlens"

    /// Registers `stages` as the features of a plugin being loaded by GStreamer (called from the
    /// plugin's init function, Sources/CStreamLensPlugin). Returns false, with a GStreamer
    /// warning, when registration fails.
    public static func registerPlugin(_ plugin: UnsafeMutableRawPointer, stages: [any Stage.Type]) -> Bool {
        do {
            try StageElements.register(stages, plugin: OpaquePointer(plugin))
            return true
        } catch {
            return false
        }
    }

    /// "GStreamer 1.22.0"
    public static var versionString: String {
        guard let s = gst_version_string() else { return "GStreamer" }
        defer { g_free(s) }
        return String(cString: s)
    }

}

/// An error of some kind (what the caller acts on: an exit code, an HTTP status) with one
/// message, the one a person reads.
public struct KindedError<Kind: Sendable & Equatable>: Error, CustomStringConvertible, Sendable, Equatable {
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) { (self.kind, self.message) = (kind, message) }
    public var description: String { message }
}

/// An error the host reports: one message, and the exit code the CLI returns for it.
public typealias HostError = KindedError<HostErrorKind>

public enum HostErrorKind: Sendable, Equatable {
    /// The spec is wrong (syntax, unknown element/stage/property, link): exit 2.
    case spec
    /// The pipeline failed while starting or running: exit 1.
    case runtime
}

extension KindedError where Kind == HostErrorKind {
    public var exitCode: Int32 { kind == .spec ? 2 : 1 }
}

/// Turns a GError from gst_parse_launch into a message that names the problem.
func parseErrorMessage(_ error: UnsafeMutablePointer<GError>) -> String {
    let raw = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
    let quoted = raw.split(separator: "\"", omittingEmptySubsequences: false)
    if error.pointee.domain == gst_parse_error_quark() {
        switch GstParseError(rawValue: UInt32(error.pointee.code)) {
        case GST_PARSE_ERROR_NO_SUCH_ELEMENT:
            let name = quoted.count >= 2 ? String(quoted[1]) : raw
            if name.hasPrefix(StageDescriptor.namePrefix) {
                return "unknown stage '\(name)' (`streamlens stages` lists the stages)"
            }
            return "unknown element '\(name)' (not installed? `gst-inspect-1.0 \(name)` tells)"
        case GST_PARSE_ERROR_SYNTAX, GST_PARSE_ERROR_EMPTY_BIN, GST_PARSE_ERROR_EMPTY:
            return "syntax error in pipeline spec: \(raw)"
        case GST_PARSE_ERROR_NO_SUCH_PROPERTY:
            return raw
        case GST_PARSE_ERROR_COULD_NOT_SET_PROPERTY:
            // `could not set property "delay" in element "lenspass" to "abc"`: for a stage, say
            // what the property takes (its table's type and range).
            if quoted.count >= 4, let spec = StageElements.registry.withLock({ types in
                types.first { $0.descriptor.name == String(quoted[3]) }?.descriptor.properties.first { $0.name == String(quoted[1]) }
            }) {
                return "\(raw) (\(spec.name) takes \(spec.constraint))"
            }
            return raw
        case GST_PARSE_ERROR_LINK:
            return "cannot link: \(raw)"
        default:
            return raw
        }
    }
    return raw
}

/// Takes a C string GLib allocated, frees it.
func takeString(_ p: UnsafeMutablePointer<gchar>?) -> String? {
    guard let p else { return nil }
    defer { g_free(p) }
    return String(cString: p)
}

func objectName(_ object: UnsafeMutableRawPointer) -> String {
    takeString(gst_object_get_name(object.assumingMemoryBound(to: GstObject.self))) ?? "?"
}
