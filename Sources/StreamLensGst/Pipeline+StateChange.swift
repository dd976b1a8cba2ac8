import CGStreamer
import CGstShim
import Foundation

/// One state change of a pipeline, made on a thread of its own so that whoever asked for it can
/// stop waiting. `gst_element_set_state` returns only when every element has made its part of
/// the change, and an element can block there without end: filesrc opening a FIFO nobody writes,
/// or a file on an unresponsive network mount (READY→PAUSED). The caller waits with a deadline;
/// past it, the change is abandoned: the thread keeps its reference to the pipeline, nobody else
/// touches the pipeline again, and if the change ever returns, the thread takes the pipeline to
/// NULL and lets it go.
///
/// @unchecked Sendable: `result` and `abandoned` are behind `condition`.
final class StateChange: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: GstStateChangeReturn?
    private var abandoned = false

    /// Starts setting `element` to `state`.
    init(_ element: UnsafeMutablePointer<GstElement>, to state: GstState) {
        gst_object_ref(element)
        let target = ElementReference(element)
        Thread.detachNewThread { [self] in
            let r = gst_element_set_state(target.pointer, state)
            condition.lock()
            result = r
            let left = abandoned
            condition.broadcast()
            condition.unlock()
            if left { gst_element_set_state(target.pointer, GST_STATE_NULL) }
            gst_object_unref(target.pointer)
        }
    }

    /// The change's return, waiting up to `seconds` for it; nil when it has not returned.
    func wait(seconds: Double) -> GstStateChangeReturn? {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while result == nil, condition.wait(until: deadline) {}
        return result
    }

    /// Leaves the change to its thread. False when it returned meanwhile (nothing is left: use
    /// the result).
    func abandon() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard result == nil else { return false }
        abandoned = true
        return true
    }
}

extension Pipeline {
    /// How long stopping (the state change to NULL) may take before the pipeline is left behind.
    static let stopDeadline: Double = 15

    /// How a state change waited for by `changeState` ended.
    enum StateChangeEnd {
        /// It returned (success, async, no-preroll or failure).
        case returned(GstStateChangeReturn)
        /// `overdue` said the deadline had passed: the pipeline is left behind.
        case overdue
        /// `cancelled` said to stop waiting: the pipeline is left behind.
        case cancelled
    }

    /// Sets the pipeline to `state` on a thread of its own, asking `cancelled` and `overdue`
    /// every 100 ms while it has not returned. When either says so, the change is abandoned
    /// (`StateChange`) and `leftBehind` says why: from then on the pipeline is not touched again.
    func changeState(to state: GstState, cancelled: () -> Bool = { false }, overdue: () -> Bool) -> StateChangeEnd {
        let change = StateChange(pipeline, to: state)
        while true {
            if let result = change.wait(seconds: 0.1) { return .returned(result) }
            let cancel = cancelled()
            guard cancel || overdue() else { continue }
            // Said before the change is left: the pipeline is not read after that.
            let stuck = stuckElements(starting: state != GST_STATE_NULL)
            guard change.abandon() else { continue }
            leftBehind = stuck
            return cancel ? .cancelled : .overdue
        }
    }

    /// What a state change that does not return is waiting for, as "uridecodebin0/source
    /// (file:///srv/cam.fifo)": when `starting`, the inputs not open yet (source elements not yet
    /// PAUSED, with the file or URI each reads); else, or if there are none, the innermost
    /// elements still in a change (a sink still changing waits for its first buffer, from
    /// upstream: left out).
    func stuckElements(starting: Bool) -> String {
        func object(_ e: UnsafeMutablePointer<GstElement>) -> UnsafeMutablePointer<GstObject> {
            UnsafeMutableRawPointer(e).assumingMemoryBound(to: GstObject.self)
        }
        func flag(_ e: UnsafeMutablePointer<GstElement>, _ f: GstElementFlags) -> Bool { e.pointee.object.flags & f.rawValue != 0 }
        func input(_ e: UnsafeMutablePointer<GstElement>) -> String? {
            ["location", "uri"].lazy.compactMap { (name: String) in takeString(sl_object_get_as_string(e, name)) }.first { !$0.isEmpty }
        }
        func named(_ e: UnsafeMutablePointer<GstElement>) -> String {
            // The path below the pipeline ("/GstPipeline:pipeline0/GstURIDecodeBin:uridecodebin0/GstFileSrc:source"
            // → "uridecodebin0/source"): "source" alone does not say whose.
            let path = takeString(gst_object_get_path_string(object(e))).map { path in
                path.split(separator: "/").dropFirst().map { $0.split(separator: ":").last.map(String.init) ?? "" }.joined(separator: "/")
            }
            return (path ?? objectName(e)) + (input(e).map { " (\($0))" } ?? "")
        }
        var states: [(element: UnsafeMutablePointer<GstElement>, current: GstState, changing: Bool)] = allElements().map { e in
            var current = GST_STATE_NULL, pending = GST_STATE_NULL
            let r = gst_element_get_state(e, &current, &pending, 0)
            return (e, current, r == GST_STATE_CHANGE_ASYNC && pending != GST_STATE_VOID_PENDING)
        }
        let unopened = states.filter { flag($0.element, GST_ELEMENT_FLAG_SOURCE) && $0.current.rawValue < GST_STATE_PAUSED.rawValue && input($0.element) != nil }
        if starting, !unopened.isEmpty { return unopened.map { named($0.element) }.joined(separator: ", ") }
        states.removeAll { !$0.changing || flag($0.element, GST_ELEMENT_FLAG_SINK) }
        // A bin is changing while one of its children is: name the children.
        let innermost = states.map(\.element).filter { element in
            !states.contains { other in other.element != element && gst_object_has_as_ancestor(object(other.element), object(element)) != 0 }
        }
        return innermost.isEmpty ? "the pipeline" : innermost.map(named).joined(separator: ", ")
    }
}
