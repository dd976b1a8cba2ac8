import CGStreamer
import CGstShim
import Foundation
import StreamLensCore
import Synchronization

/// Registers Swift stages as GStreamer elements (GstBin subclasses made in CGstShim) and
/// connects each element's life cycle to a `StageWorker`:
/// READY→PAUSED builds the stage and starts its worker; PAUSED→READY stops and joins it.
enum StageElements {
    /// Registered stage types; an element's type id is its index here.
    static let registry = Mutex<[any Stage.Type]>([])

    /// One registration at a time (tests register from several threads): GObject's type
    /// registration is check-then-register.
    static func register(_ types: [any Stage.Type], plugin: OpaquePointer? = nil) throws {
        try registry.withLock { list throws(HostError) in try register(types, plugin: plugin, into: &list) }
    }

    private static func register(_ types: [any Stage.Type], plugin: OpaquePointer?, into list: inout [any Stage.Type]) throws(HostError) {
        let callbacks = SLStageCallbacks(start: startStage, stop: stopStage, property_changed: propertyChanged, frame_arrived: frameArrived,
                                         audio_arrived: audioArrived, audio_ended: audioEnded)
        sl_stage_set_callbacks(callbacks)
        for type in types {
            let id: UInt32
            if let i = list.firstIndex(where: { $0 == type }) {
                id = UInt32(i)
            } else {
                list.append(type)
                id = UInt32(list.count - 1)
            }
            let d = type.descriptor
            // C strings live until sl_stage_register has copied them.
            var strings: [UnsafeMutablePointer<CChar>] = []
            func c(_ s: String) -> UnsafePointer<CChar> {
                let p = strdup(s)!
                strings.append(p)
                return UnsafePointer(p)
            }
            defer { strings.forEach { free($0) } }
            var props: [SLPropSpec] = d.properties.map { p in
                var spec = SLPropSpec()
                spec.name = c(p.name)
                spec.blurb = c(p.readOnly ? "\(p.help) (read-only: the stage's reading)"
                               : "\(p.help) [\(p.constraint)]" + (p.live ? " (can change while playing)" : ""))
                spec.mutable_playing = p.live ? 1 : 0
                spec.read_only = p.readOnly ? 1 : 0
                switch (p.kind, p.defaultValue) {
                case (.bool, .bool(let v)):
                    spec.kind = SL_PROP_BOOL; spec.default_number = v ? 1 : 0
                case (.int, .int(let v)):
                    spec.kind = SL_PROP_INT; spec.default_number = Double(v)
                case (.double, .double(let v)):
                    spec.kind = SL_PROP_DOUBLE; spec.default_number = v
                case (.string, .string(let v)), (.choice, .string(let v)):
                    spec.kind = SL_PROP_STRING; spec.default_string = c(v)
                default:
                    preconditionFailure("\(d.name).\(p.name): default does not match the kind")
                }
                return spec
            }
            let ok = props.withUnsafeMutableBufferPointer { buffer -> gboolean in
                var info = SLStageInfo()
                info.name = c(d.name)
                info.longname = c("StreamLens \(d.name)")
                info.description = c(d.summary)
                info.sink_caps = c(d.sinkCaps)
                info.caps_passthrough = d.capsPassthrough ? 1 : 0
                info.is_sink = d.isSink ? 1 : 0
                info.audio_caps = d.audioCaps.map(c)
                info.type_id = id
                info.props = UnsafePointer(buffer.baseAddress)
                info.n_props = UInt32(buffer.count)
                return sl_stage_register(&info, plugin)
            }
            guard ok != 0 else { throw HostError(.runtime, "could not register stage \(d.name)") }
        }
    }

    static func type(id: UInt32) -> (any Stage.Type)? {
        registry.withLock { Int(id) < $0.count ? $0[Int(id)] : nil }
    }

    /// The element's current property values, as the stage's settings.
    static func settings(of element: UnsafeMutablePointer<GstElement>, descriptor: StageDescriptor) -> PropertyValues {
        var values: [String: PropertyValue] = [:]
        for (i, p) in descriptor.properties.enumerated() {
            let index = UInt32(i)
            switch p.kind {
            case .bool: values[p.name] = .bool(sl_stage_get_bool(element, index) != 0)
            case .int: values[p.name] = .int(Int(sl_stage_get_int(element, index)))
            case .double: values[p.name] = .double(sl_stage_get_double(element, index))
            case .string, .choice: values[p.name] = .string(takeString(sl_stage_dup_string(element, index)) ?? "")
            }
        }
        return PropertyValues(descriptor: descriptor, values: values)
    }

    /// The descriptor of a stage element's type (by factory name), nil for other elements.
    static func descriptor(of element: UnsafeMutablePointer<GstElement>) -> StageDescriptor? {
        guard sl_is_stage(element) != 0, let factory = sl_element_factory_name(element).map({ String(cString: $0) }) else { return nil }
        return registry.withLock { $0.first { $0.descriptor.name == factory }?.descriptor }
    }

    static func worker(of element: UnsafeMutablePointer<GstElement>) -> StageWorker? {
        guard let context = sl_stage_get_context(element) else { return nil }
        return Unmanaged<StageWorker>.fromOpaque(context).takeUnretainedValue()
    }
}

// C callbacks: capture nothing; state is found through the element.

private func startStage(_ element: UnsafeMutablePointer<GstElement>?, _ typeID: guint) -> gboolean {
    guard let element, let type = StageElements.type(id: typeID) else { return 0 }
    let descriptor = type.descriptor
    let settings = StageElements.settings(of: element, descriptor: descriptor)
    do {
        try settings.validate(against: descriptor)
        let worker = try StageWorker(element: element, type: type, settings: settings)
        sl_stage_set_context(element, Unmanaged.passRetained(worker).toOpaque()) { context in
            guard let context else { return }
            Unmanaged<StageWorker>.fromOpaque(context).release()
        }
        worker.start()
        return 1
    } catch {
        sl_stage_post_error(element, "\(error)", nil)
        return 0
    }
}

private func stopStage(_ element: UnsafeMutablePointer<GstElement>?) {
    guard let element, let worker = StageElements.worker(of: element) else { return }
    worker.stop()
    sl_stage_set_context(element, nil, nil) // releases the worker
}

private func frameArrived(_ element: UnsafeMutablePointer<GstElement>?) -> GstFlowReturn {
    guard let element, let worker = StageElements.worker(of: element) else { return GST_FLOW_OK }
    return worker.takeInline()
}

// The audio input's (SLStageInfo.audio_caps), on the audio's streaming thread: a stage that
// declares one is an `AudioInput`.
private func audioArrived(_ element: UnsafeMutablePointer<GstElement>?, _ sample: OpaquePointer?) {
    guard let element, let sample, let worker = StageElements.worker(of: element) else { return }
    worker.audioArrived(EncodedFrame(audio: sample))
}

private func audioEnded(_ element: UnsafeMutablePointer<GstElement>?) {
    guard let element, let worker = StageElements.worker(of: element) else { return }
    worker.audioEnded()
}

private func propertyChanged(_ element: UnsafeMutablePointer<GstElement>?, _ index: guint) {
    guard let element, let worker = StageElements.worker(of: element) else { return }
    worker.settingsDidChange()
}
