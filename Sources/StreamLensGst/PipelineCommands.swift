import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// One pipeline's control commands (see `ControlCommand`): changes element properties of the
/// running pipeline. A StreamLens stage's property is checked against its table first (exists,
/// may change while playing, type and range), then set with g_object_set like any element's;
/// the stage picks the new value up between two frames. A bad command changes nothing and is
/// answered with an error; a `set` of several properties is all or nothing.
///
/// @unchecked Sendable: the pipeline is a reference-counted GstObject (held as long as this
/// lives) whose properties GObject lets any thread set.
public final class PipelineCommands: @unchecked Sendable {
    private let reference: ObjectReference<GstElement>
    private var pipeline: UnsafeMutablePointer<GstElement> { reference.pointer }
    private let access: ControlAccess
    /// Told of each `set` carried out: the stage's name and the settings among the assignments
    /// (requests left out).
    private let onSet: (@Sendable (_ stage: String, _ settings: [SourceChange.Assignment]) -> Void)?

    public convenience init(pipeline: Pipeline, access: ControlAccess) {
        self.init(pipeline: pipeline.pipeline, access: access)
    }

    init(pipeline: UnsafeMutablePointer<GstElement>, access: ControlAccess,
         onSet: (@Sendable (_ stage: String, _ settings: [SourceChange.Assignment]) -> Void)? = nil) {
        reference = ObjectReference(retaining: pipeline)
        self.access = access
        self.onSet = onSet
    }

    /// Carries out one command line and returns the reply.
    public func execute(_ line: String) -> String {
        ControlCommand.answer(line) { command in
            switch command {
            case .help: return ControlCommand.usage // answered by `answer` already
            case .list:
                return stageElements().map { describe($0) }.joined(separator: "; ")
            case .get(let name, let property):
                let element = try target(name)
                defer { gst_object_unref(element) }
                guard sl_object_property_flags(element, property) != 0 else {
                    throw ControlError("\(objectName(element)) has no property \(property)")
                }
                if stageDescriptor(of: element) == nil, Self.looksSecret(property) {
                    throw ControlError("property \(property) of \(objectName(element)) is not shown (it may hold a secret)")
                }
                return takeString(sl_object_get_as_string(element, property)) ?? ""
            case .set(let name, let assignments):
                try set(element: name, assignments)
                return "ok"
            }
        }
    }

    /// Sets properties of one element (nil: the only StreamLens stage), all or nothing: every
    /// assignment is checked first (the property exists, may change while playing, its value's
    /// type and range, no control character in it), then a stage checks the change as a whole
    /// (`Stage.checkLiveChange`: its files, colours, devices), then all are applied. What the
    /// control socket's `set`, the HTTP API's PATCH and the keys do.
    public func set(element name: String?, _ assignments: [(name: String, value: String)]) throws(ControlError) {
        try assign(name, assignments, playing: true)
    }

    /// Sets properties of a pipeline that is not playing yet (a source's stage values from
    /// serve's config): any property that can be set, each checked as `set` checks it (the
    /// stage checks the whole when it starts). Stages only, unless --control-elements.
    public func configure(element name: String, _ assignments: [(name: String, value: String)]) throws(ControlError) {
        try assign(name, assignments, playing: false)
    }

    private func assign(_ name: String?, _ assignments: [(name: String, value: String)], playing: Bool) throws(ControlError) {
        let element = try target(name)
        defer { gst_object_unref(element) }
        let elementName = objectName(element)
        let descriptor = stageDescriptor(of: element)
        for (property, value) in assignments {
            try check(element, elementName, descriptor, property, value, playing: playing)
        }
        if playing, let descriptor, let stage = StageElements.registry.withLock({ $0.first { $0.descriptor.name == descriptor.name } }) {
            var values = StageElements.settings(of: element, descriptor: descriptor).values
            for (property, value) in assignments {
                if let spec = descriptor.properties.first(where: { $0.name == property }) { values[property] = try? spec.parse(value) }
            }
            do {
                try stage.checkLiveChange(PropertyValues(descriptor: descriptor, values: values), changing: Set(assignments.map(\.name)))
            } catch {
                throw ControlError("\(elementName): \((error as? StageError)?.message ?? "\(error)")", property: assignments.count == 1 ? assignments[0].name : nil)
            }
        }
        for (property, value) in assignments { _ = sl_object_set_checked(element, property, value) }
        let settings = assignments.filter { a in descriptor?.properties.first { $0.name == a.name }?.isRequest != true }
        if playing, let onSet, !settings.isEmpty { onSet(elementName, settings.map { SourceChange.Assignment(name: $0.name, value: $0.value) }) }
    }

    /// One assignment checked before anything is set: no control character in the value, the
    /// property exists and can be set (not a reading), its value's type and range (a stage's
    /// table, then GObject's own check); `playing`: it must also be one that may change while
    /// the pipeline runs (a stage's live property, or one GStreamer marks changeable).
    private func check(_ element: UnsafeMutablePointer<GstElement>, _ elementName: String, _ descriptor: StageDescriptor?,
                       _ property: String, _ value: String, playing: Bool) throws(ControlError) {
        // A line break in a value forged a log line (and a clip's file name); an escape
        // sequence would drive the terminal that shows the log.
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw ControlError("the value of property \(property) of \(elementName) holds a control character (a line break, a tab, an escape): refused", property: property)
        }
        let flags = sl_object_property_flags(element, property)
        guard flags != 0 else {
            let names = descriptor.map { d in
                playing ? " (live properties: \(d.properties.filter(\.live).map(\.name).joined(separator: ", ")))"
                        : " (properties: \(d.properties.filter { !$0.readOnly }.map(\.name).joined(separator: ", ")))"
            } ?? ""
            throw ControlError("\(elementName) has no property \(property)\(names)", property: property)
        }
        guard flags & UInt32(SL_PROPERTY_WRITABLE) != 0 else { throw ControlError("property \(property) of \(elementName) cannot be set", property: property) }
        if let descriptor, let spec = descriptor.properties.first(where: { $0.name == property }) {
            guard !spec.readOnly else { throw ControlError("property \(property) of \(elementName) is a reading: get it, it cannot be set", property: property) }
            guard spec.live || !playing else {
                let live = descriptor.properties.filter(\.live).map(\.name).joined(separator: ", ")
                throw ControlError("property \(property) of \(elementName) cannot change while the pipeline runs (live: \(live))", property: property)
            }
            do { _ = try spec.parse(value) } catch { throw ControlError("\(elementName): \((error as? StageError)?.message ?? "\(error)")", property: property) }
        } else if playing, flags & UInt32(SL_PROPERTY_MUTABLE_PLAYING) == 0 {
            throw ControlError("property \(property) of \(elementName) cannot change while the pipeline runs (GStreamer marks it neither changeable while playing nor controllable)", property: property)
        }
        guard sl_object_value_valid(element, property, value) != 0 else {
            throw ControlError("'\(value)' is not a valid value for property \(property) of \(elementName)", property: property)
        }
    }

    /// One property of a stage as it is now: its table row and its value.
    public struct PropertyState: Sendable {
        public var spec: PropertySpec
        /// The value now, read from the element (a reading's text as published).
        public var value: PropertyValue
    }

    /// A StreamLens stage of the pipeline and every property in its table.
    public struct StageState: Sendable {
        public var name: String
        public var factory: String
        public var properties: [PropertyState]
        /// The keys the stage binds in a preview window (and the console).
        public var keys: [KeyBinding]
    }

    /// The pipeline, for a tap of its video (WebTap).
    var pipelineElement: UnsafeMutablePointer<GstElement> { pipeline }

    /// A key pressed in a view of the pipeline (the console; named as a browser or as X names
    /// it: "-" or "minus"): what a preview window does with it. Space pauses or resumes; a stage's binding (`StageDescriptor.keys`) becomes a `set`
    /// of its property. The commands carried out, each with its answer; empty when no stage
    /// binds the key.
    public func press(key browserKey: String) -> [String] {
        let key = KeyBinding.keysym(browserKey)
        if HostKeys.pause.keys.contains(key) {
            var state = GST_STATE_NULL, pending = GST_STATE_NULL
            gst_element_get_state(pipeline, &state, &pending, 0)
            let pause = (pending == GST_STATE_VOID_PENDING ? state : pending) == GST_STATE_PLAYING
            gst_element_set_state(pipeline, pause ? GST_STATE_PAUSED : GST_STATE_PLAYING)
            return [pause ? "paused (space resumes)" : "playing"]
        }
        var done: [String] = []
        for element in stageElements() {
            guard let descriptor = stageDescriptor(of: element) else { continue }
            let name = objectName(element)
            for binding in descriptor.keys where binding.keys.contains(key) {
                guard let (property, value) = binding.assignment(properties: descriptor.properties, current: { takeString(sl_object_get_as_string(element, $0)) })
                else { continue }
                let command = KeyBinding.command(element: name, property: property, value: value)
                done.append("\(command) -> \(execute(command))")
            }
        }
        return done
    }

    /// The pipeline's StreamLens stages, by name.
    public func stages() -> [StageState] {
        stageElements().compactMap { state(of: $0) }
    }

    /// One stage by its element name; a `ControlError` when there is no such stage.
    public func stage(_ name: String) throws(ControlError) -> StageState {
        guard let found = stageElements().first(where: { objectName($0) == name }), let state = state(of: found) else {
            let names = stageElements().map { objectName($0) }
            throw ControlError("no stage named \(name)" + (names.isEmpty ? "" : " (stages: \(names.joined(separator: ", ")))"))
        }
        return state
    }

    private func state(of element: UnsafeMutablePointer<GstElement>) -> StageState? {
        guard let d = stageDescriptor(of: element) else { return nil }
        let properties = d.properties.map { spec -> PropertyState in
            let text = takeString(sl_object_get_as_string(element, spec.name)) ?? ""
            return PropertyState(spec: spec, value: (try? spec.parse(text)) ?? .string(text))
        }
        return StageState(name: objectName(element), factory: d.name, properties: properties, keys: d.keys)
    }

    /// Property names that usually hold a password or a key: never read back to a client.
    static func looksSecret(_ property: String) -> Bool {
        let p = property.lowercased()
        return ["pass", "pw", "secret", "token", "credential", "key"].contains { p.contains($0) } && !p.contains("key-int")
    }

    /// The element a command names (a new reference), or the only StreamLens stage. Without
    /// --control-elements only stages are reached; a stage's inner parts (its bridge's input
    /// and output) never.
    private func target(_ name: String?) throws(ControlError) -> UnsafeMutablePointer<GstElement> {
        let bin = UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self)
        if let name {
            guard let element = gst_bin_get_by_name(bin, name), !isInsideAStage(element) else {
                let names = stageElements().map { objectName($0) }
                throw ControlError("no element named \(name)" + (names.isEmpty ? "" : " (stages: \(names.joined(separator: ", ")))"))
            }
            if sl_is_stage(element) == 0 && !access.otherElements {
                gst_object_unref(element)
                throw ControlError("\(name) is not a StreamLens stage: other elements' properties are reached only with --control-elements (and only those GStreamer marks as changeable while playing or controllable)")
            }
            return element
        }
        let stages = stageElements()
        guard stages.count == 1 else {
            throw ControlError(stages.isEmpty ? "the pipeline has no StreamLens stage; name the element"
                                              : "the pipeline has \(stages.count) stages (\(stages.map { objectName($0) }.joined(separator: ", "))); name one")
        }
        gst_object_ref(stages[0])
        return stages[0]
    }

    /// An element that is part of a stage's bridge (found by gst_bin_get_by_name, which looks
    /// into every bin).
    private func isInsideAStage(_ element: UnsafeMutablePointer<GstElement>) -> Bool {
        var parent = gst_object_get_parent(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self))
        while let current = parent {
            defer { gst_object_unref(current) }
            if sl_is_stage(UnsafeMutableRawPointer(current).assumingMemoryBound(to: GstElement.self)) != 0 {
                gst_object_unref(element)
                return true
            }
            parent = gst_object_get_parent(current)
        }
        return false
    }

    /// The pipeline's StreamLens stages (borrowed references: the pipeline holds them).
    private func stageElements() -> [UnsafeMutablePointer<GstElement>] {
        var result: [UnsafeMutablePointer<GstElement>] = []
        let it = gst_bin_iterate_recurse(UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self))
        defer { gst_iterator_free(it) }
        var value = GValue()
        while gst_iterator_next(it, &value) == GST_ITERATOR_OK {
            if let object = g_value_get_object(&value) {
                let element = object.assumingMemoryBound(to: GstElement.self)
                if sl_is_stage(element) != 0 { result.append(element) }
            }
            g_value_unset(&value)
        }
        return result.sorted { objectName($0) < objectName($1) }
    }

    private func stageDescriptor(of element: UnsafeMutablePointer<GstElement>) -> StageDescriptor? {
        guard sl_is_stage(element) != 0, let factory = sl_element_factory_name(element).map({ String(cString: $0) }) else { return nil }
        return StageElements.registry.withLock { $0.first { $0.descriptor.name == factory }?.descriptor }
    }

    private func describe(_ element: UnsafeMutablePointer<GstElement>) -> String {
        let name = objectName(element)
        guard let d = stageDescriptor(of: element) else { return name }
        let values = d.properties.filter(\.live).map { "\($0.name)=\(takeString(sl_object_get_as_string(element, $0.name)) ?? "")" }
        return "\(name) (\(d.name)): " + values.joined(separator: " ")
    }
}
