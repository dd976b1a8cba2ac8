import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// What the host does for a pipeline that shows video in a window (ximagesink, glimagesink,
/// xvimagesink, autovideosink): keys pressed in the window, the window closed, no display.
///
/// Keys: a video sink turns key presses into navigation events sent upstream, and posts each one
/// no element handled on the bus. Stages do not handle them in the stream — a compositor, the
/// usual way to show two stages side by side, passes key events to none of its inputs — so every
/// key reaches the host here, once. The host answers space itself (pause / resume) and gives
/// every other key to each stage that binds it (`StageDescriptor.keys`): the binding names a
/// property change, carried out as the control channel's `set` command. Unknown keys are ignored.
final class PreviewKeys {
    private let pipeline: UnsafeMutablePointer<GstElement>
    private let control: ControlChannel
    private let log: (String) -> Void
    /// The value last asked for by a cycling key, per "element.property": a value the stage
    /// refused (a device not present) is set back, and the next press goes on from the refused
    /// one instead of asking for it again.
    private var requested: [String: String] = [:]
    private(set) var paused = false

    init(pipeline: UnsafeMutablePointer<GstElement>, control: ControlChannel, log: @escaping (String) -> Void) {
        self.pipeline = pipeline
        self.control = control
        self.log = log
    }

    /// Back to PLAYING (an end of stream sent to a paused pipeline would wait for ever).
    func resume() {
        guard paused else { return }
        paused = false
        gst_element_set_state(pipeline, GST_STATE_PLAYING)
    }

    func press(_ key: String, stages: [UnsafeMutablePointer<GstElement>]) {
        if HostKeys.pause.keys.contains(key) {
            paused.toggle()
            gst_element_set_state(pipeline, paused ? GST_STATE_PAUSED : GST_STATE_PLAYING)
            log("key \(key): \(paused ? "paused (space resumes)" : "playing")")
            return
        }
        for stage in stages {
            guard let descriptor = StageElements.descriptor(of: stage) else { continue }
            let name = objectName(stage)
            for binding in descriptor.keys where binding.keys.contains(key) {
                var cycled: String?
                if case .cycle(let property, _) = binding.action { cycled = property }
                let assignment = binding.assignment(properties: descriptor.properties) { property in
                    if property == cycled, let asked = self.requested["\(name).\(property)"] { return asked }
                    return takeString(sl_object_get_as_string(stage, property))
                }
                guard let (property, value) = assignment else { continue }
                if let cycled { requested["\(name).\(cycled)"] = value }
                let command = KeyBinding.command(element: name, property: property, value: value)
                log("key \(key): \(command) -> \(control.execute(command))")
            }
        }
    }
}

/// Video sinks that open a window, and whether this process can open one.
enum DisplayCheck {
    static let windowSinks: Set<String> = ["ximagesink", "xvimagesink", "glimagesink", "autovideosink", "gtksink", "gtkglsink"]
    /// Sinks that can use Wayland as well as X.
    static let waylandCapable: Set<String> = ["glimagesink", "autovideosink", "gtksink", "gtkglsink"]

    /// Why `factory` cannot open its window here, or nil when it can (as far as can be told
    /// without opening it: DISPLAY names an X server whose socket answers).
    static func problem(factory: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        guard windowSinks.contains(factory) else { return nil }
        if waylandCapable.contains(factory), let wayland = environment["WAYLAND_DISPLAY"], !wayland.isEmpty { return nil }
        guard let display = environment["DISPLAY"], !display.isEmpty else {
            return "it shows video in a window and DISPLAY is not set: run it in a desktop session, with `ssh -X`, or under a virtual display (Xvfb :99 & DISPLAY=:99 streamlens run …); to show nothing, use fakesink"
        }
        if let reason = unreachable(display) {
            return "it shows video in a window and cannot open the X display DISPLAY=\(display) (\(reason)): start the X server, or set DISPLAY to one that runs"
        }
        return nil
    }

    /// Tries to connect to a local X display (":N", "unix:N", ":N.S"); nil when it answers or
    /// cannot be checked this way (a remote host: left to the sink).
    static func unreachable(_ display: String) -> String? {
        var host = "", rest = Substring(display)
        if let colon = display.lastIndex(of: ":") {
            host = String(display[..<colon])
            rest = display[display.index(after: colon)...]
        } else {
            return "not of the form [host]:N"
        }
        guard host.isEmpty || host == "unix", let number = Int(rest.split(separator: ".").first ?? "") else { return nil }
        let path = "/tmp/.X11-unix/X\(number)"
        guard UnixSocketAddress.someoneListens(at: path) == false else { return nil }
        return FileManager.default.fileExists(atPath: path) ? "nothing answers at \(path)" : "no X server: \(path) does not exist"
    }
}
