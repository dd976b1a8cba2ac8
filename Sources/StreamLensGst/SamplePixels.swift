import CGStreamer
import CGstShim
import Foundation
import StreamLensCore

/// Owns the sample being processed and maps its buffer on demand. The sample comes from the
/// stage's input (`sl_stage_pull`) holding the only reference to the buffer: write access then
/// costs no copy unless another element really holds the frame (a tee's other branch), and
/// such a copy of the pixels is counted (`copiedPixels`, the summary's "copies").
///
/// Used only on the worker thread, for one frame.
final class SamplePixels: FramePixels {
    /// The sample to push on: the pulled one, or the fresh one after write access.
    private var reference: SampleReference
    var sample: OpaquePointer { reference.pointer }

    init(taking sample: OpaquePointer) { reference = SampleReference(adopting: sample) }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard let buffer = gst_sample_get_buffer(sample) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        defer { gst_buffer_unmap(buffer, &map) }
        return try body(UnsafeRawBufferPointer(start: map.data, count: Int(map.size)))
    }

    func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        makeBufferWritable()
        let buffer = gst_sample_get_buffer(sample)!
        if sl_buffer_pixels_shared(buffer) != 0 { copiedPixels = true } // the map below copies them
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GstMapFlags(GST_MAP_READ.rawValue | GST_MAP_WRITE.rawValue)) != 0 else {
            return try body(UnsafeMutableRawBufferPointer(start: nil, count: 0))
        }
        defer { gst_buffer_unmap(buffer, &map) }
        return try body(UnsafeMutableRawBufferPointer(start: map.data, count: Int(map.size)))
    }

    /// The negotiated frame size: regions are normalised to it on the meta (DL Streamer's layout).
    var frameSize = (width: 0, height: 0)

    /// Where every region enters and leaves the buffer: bounded to the frame here
    /// (`FrameBounds`), whichever stage, model or upstream element made it.
    private var bounds: FrameBounds { FrameBounds(width: frameSize.width, height: frameSize.height) }

    func addRegionOfInterest(_ region: RegionOfInterest) {
        let region = bounds.clamp(region)
        makeBufferWritable()
        Self.withCRegion(region) { r, keypoints, names, values, results in
            sl_buffer_add_region(gst_sample_get_buffer(sample), guint(frameSize.width), guint(frameSize.height), r, keypoints, names, values, results)
        }
    }

    func updateRegionOfInterest(_ region: RegionOfInterest, at index: Int) -> Bool {
        guard index >= 0 else { return false }
        let region = bounds.clamp(region)
        makeBufferWritable()
        return Self.withCRegion(region) { r, keypoints, names, values, results in
            sl_buffer_set_region(gst_sample_get_buffer(sample), guint(index), guint(frameSize.width), guint(frameSize.height),
                                 r, keypoints, names, values, results) != 0
        }
    }

    /// The region as the C fence takes it: the struct, its keypoints as x, y pairs, its
    /// attributes as two arrays of C strings (sorted by name, so the meta is the same every run),
    /// and what second models found (classifications, landmarks).
    private static func withCRegion<R>(_ region: RegionOfInterest,
                                       _ body: (UnsafePointer<SLRegion>, UnsafePointer<Double>?, UnsafePointer<UnsafePointer<CChar>?>?,
                                                UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<SLRegionResults>?) -> R) -> R {
        withCResults(region) { results in withCRegionOnly(region) { body($0, $1, $2, $3, results) } }
    }

    private static func withCResults<R>(_ region: RegionOfInterest, _ body: (UnsafePointer<SLRegionResults>?) -> R) -> R {
        guard !region.classifications.isEmpty || region.landmarks != nil || region.mask != nil else { return body(nil) }
        let c = region.classifications
        let names = c.map { strdup(RegionOfInterest.attributeName($0.name)) }, labels = c.map { strdup($0.label) }
        let landmarkName = strdup(region.landmarks?.name ?? "landmarks")
        defer { (names + labels + [landmarkName]).forEach { free($0) } }
        let ids = c.map { gint(clamping: $0.labelId) }, confidences = c.map(\.confidence)
        let dims = region.landmarks?.points.first?.count ?? 0
        let points = (region.landmarks?.points ?? []).filter { $0.count == dims }
        let flat = points.flatMap { $0 }
        let cNames = names.map { UnsafePointer($0) }, cLabels = labels.map { UnsafePointer($0) }
        let mask = region.mask
        return cNames.withUnsafeBufferPointer { n in cLabels.withUnsafeBufferPointer { l in ids.withUnsafeBufferPointer { i in
            confidences.withUnsafeBufferPointer { cf in flat.withUnsafeBufferPointer { p in (mask?.values ?? []).withUnsafeBufferPointer { m in
                var results = SLRegionResults(classification_count: guint(c.count), classification_names: n.baseAddress,
                                              classification_labels: l.baseAddress, classification_ids: i.baseAddress,
                                              classification_confidences: cf.baseAddress, landmark_count: guint(points.count),
                                              landmark_dims: guint(dims), landmarks: p.baseAddress, landmark_name: UnsafePointer(landmarkName),
                                              landmark_presence: region.landmarks?.presence ?? -1,
                                              mask_width: guint(mask?.width ?? 0), mask_height: guint(mask?.height ?? 0),
                                              mask: mask == nil ? nil : m.baseAddress)
                return withUnsafePointer(to: &results) { body($0) }
            } } }
        } } }
    }

    private static func withCRegionOnly<R>(_ region: RegionOfInterest,
                                           _ body: (UnsafePointer<SLRegion>, UnsafePointer<Double>?, UnsafePointer<UnsafePointer<CChar>?>?,
                                                    UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        var r = SLRegion()
        withUnsafeMutableBytes(of: &r.label) { raw in
            let bytes = Array(region.label.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        r.x = region.x; r.y = region.y; r.width = region.width; r.height = region.height
        r.confidence = region.confidence ?? -1
        r.label_id = gint(clamping: region.labelId)
        r.object_id = gint(clamping: region.objectId)
        withUnsafeMutableBytes(of: &r.estimate) { raw in
            let bytes = Array((region.estimate?.rawValue ?? "").utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        r.keypoint_count = guint(region.keypoints.count)
        let attributes = region.attributes.sorted { $0.key < $1.key }
        r.attribute_count = guint(attributes.count)
        let keypoints = region.keypoints.flatMap { [$0.x, $0.y] }
        let names = attributes.map { strdup(RegionOfInterest.attributeName($0.key)) }
        let values = attributes.map { strdup($0.value) }
        defer { (names + values).forEach { free($0) } }
        let cNames = names.map { UnsafePointer($0) }, cValues = values.map { UnsafePointer($0) }
        return keypoints.withUnsafeBufferPointer { kp in
            cNames.withUnsafeBufferPointer { n in
                cValues.withUnsafeBufferPointer { v in
                    withUnsafePointer(to: &r) { body($0, kp.baseAddress, n.baseAddress, v.baseAddress) }
                }
            }
        }
    }

    /// Every region on the buffer (no cap), with its keypoints and attributes.
    func regionsOfInterest() -> [RegionOfInterest] {
        let buffer = gst_sample_get_buffer(sample)
        let (w, h) = (guint(frameSize.width), guint(frameSize.height))
        let count = Int(sl_buffer_get_regions(buffer, w, h, nil, 0))
        guard count > 0 else { return [] }
        var regions = [SLRegion](repeating: SLRegion(), count: count)
        let n = min(count, Int(sl_buffer_get_regions(buffer, w, h, &regions, guint(count))))
        let bounds = self.bounds
        return (0..<n).map { i in
            var r = regions[i]
            let label = withUnsafeBytes(of: &r.label) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            var keypoints: [Point] = []
            if r.keypoint_count > 0 {
                var xy = [Double](repeating: 0, count: Int(r.keypoint_count) * 2)
                let got = Int(sl_region_keypoints(&r, w, h, &xy, r.keypoint_count))
                keypoints = (0..<got).map { Point(x: xy[2 * $0], y: xy[2 * $0 + 1]) }
            }
            var attributes: [String: String] = [:]
            for a in 0..<r.attribute_count {
                var name: UnsafePointer<CChar>?, value: UnsafePointer<CChar>?
                if sl_region_attribute(&r, a, &name, &value) != 0, let name, let value {
                    attributes[String(cString: name)] = String(cString: value)
                }
            }
            let estimate = withUnsafeBytes(of: &r.estimate) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            var region = RegionOfInterest(label: label, labelId: Int(r.label_id), x: r.x, y: r.y, width: r.width, height: r.height,
                                          confidence: r.confidence >= 0 ? r.confidence : nil, objectId: Int(r.object_id),
                                          keypoints: keypoints, attributes: attributes, estimate: RegionOfInterest.Estimate(rawValue: estimate))
            for n in 0..<r.classification_count {
                var name: UnsafePointer<CChar>?, label: UnsafePointer<CChar>?, id: gint = -1, confidence = 0.0
                if sl_region_classification(&r, n, &name, &label, &id, &confidence) != 0, let name, let label {
                    region.classifications.append(.init(name: String(cString: name), label: String(cString: label), labelId: Int(id), confidence: confidence))
                }
            }
            if r.landmark_count > 0 {
                let d = Int(r.landmark_dims)
                var values = [Double](repeating: 0, count: Int(r.landmark_count) * d)
                var name: UnsafePointer<CChar>?
                let got = Int(sl_region_landmarks(&r, w, h, &values, r.landmark_count, &name))
                region.landmarks = .init(name: name.map { String(cString: $0) } ?? "landmarks",
                                         points: (0..<got).map { Array(values[($0 * d)..<($0 * d + d)]) },
                                         presence: r.landmark_presence >= 0 ? r.landmark_presence : nil)
            }
            if r.mask_width > 0, r.mask_height > 0 {
                var values = [UInt8](repeating: 0, count: Int(r.mask_width) * Int(r.mask_height))
                if sl_region_mask(&r, &values, gsize(values.count)) != 0 {
                    region.mask = ObjectMask(width: Int(r.mask_width), height: Int(r.mask_height), values: values)
                }
            }
            return bounds.clamp(region)
        }
    }

    func frameRecord(_ kind: String) -> String? {
        sl_buffer_frame_field(gst_sample_get_buffer(sample), kind).map { String(cString: $0) }
    }

    func setFrameRecord(_ kind: String, json: String) {
        makeBufferWritable()
        sl_buffer_set_frame_field(gst_sample_get_buffer(sample), kind, json)
    }

    /// The frame's events when it reached the stage (`StageWorker.postEvents` posts the ones the
    /// stage added).
    var eventsOnArrival: String?

    /// Whether the stage's writes copied the frame's pixels (their memory was held elsewhere).
    private(set) var copiedPixels = false

    private var writable = false
    private func makeBufferWritable() {
        guard !writable else { return }
        writable = true
        let buffer = gst_sample_get_buffer(sample)!
        guard gst_mini_object_is_writable(UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: GstMiniObject.self)) == 0 else { return }
        // Held elsewhere too: a buffer of our own (its metas copied; the pixels stay shared until
        // written, see withMutableBytes), in a sample of our own.
        let own = sl_buffer_make_writable(gst_buffer_ref(buffer))
        let fresh = gst_sample_new(own, gst_sample_get_caps(sample), gst_sample_get_segment(sample), nil)!
        gst_buffer_unref(own)
        reference = SampleReference(adopting: fresh)
    }

    /// Hands the buffer over (the caller owns the reference): the sample keeps its caps and
    /// segment, so the stage holds nothing of a frame it passed on. Nil once taken.
    func takeBuffer() -> UnsafeMutablePointer<GstBuffer>? {
        guard let buffer = gst_sample_get_buffer(sample) else { return nil }
        gst_buffer_ref(buffer)
        let fresh = gst_sample_new(nil, gst_sample_get_caps(sample), gst_sample_get_segment(sample), nil)!
        reference = SampleReference(adopting: fresh)
        return buffer
    }
}

/// A frame seen outside a stage — the next frame at a point of a running pipeline (the HTTP
/// API's look at its regions) — read as a stage reads its frames: its regions and records. It
/// owns its sample (the buffer by reference, and caps) until it goes. Never written.
public final class ObservedFrame: @unchecked Sendable {
    // @unchecked: the sample is only read (a GstSample and its buffer are immutable while shared).
    private let reference: SampleReference

    init(adopting sample: OpaquePointer) { reference = SampleReference(adopting: sample) }

    /// Calls `body` with the frame; nil when the sample has no buffer or no video caps. The
    /// frame's `index` is -1: a point in the pipeline counts no frames.
    public func read<R>(_ body: (Frame) -> R) -> R? {
        let s = reference.pointer
        guard let caps = gst_sample_get_caps(s), let format = VideoFormat(caps: caps), let buffer = gst_sample_get_buffer(s) else { return nil }
        let pixels = SamplePixels(taking: gst_sample_ref(s)!)
        pixels.frameSize = (format.width, format.height)
        let pts = sl_buffer_pts(buffer)
        return body(Frame(format: format, pts: pts == GstClockTime.max ? nil : UInt64(pts), duration: nil, index: -1, pixels: pixels))
    }
}

extension SampleReference {
    /// The GstSample a frame came in, referenced: the bridge's own; for a frame made in memory
    /// (a test's), one made from a copy of its bytes, with caps from its format, times and
    /// keyframe flag from the frame. Nil when no caps can be made of the format.
    static func of(_ frame: Frame) -> SampleReference? {
        if let pixels = frame.pixels as? SamplePixels { return SampleReference(retaining: pixels.sample) }
        gst_init(nil, nil) // idempotent; a frame made in memory may come before any pipeline
        let format = frame.format
        let text = format.caps ?? "video/x-raw,format=\(format.pixelFormat),width=\(format.width),height=\(format.height),framerate=\(format.framerate.numerator)/\(format.framerate.denominator)"
        guard let caps = gst_caps_from_string(text) else { return nil }
        defer { gst_caps_unref(caps) }
        let buffer = frame.pixels.withBytes { bytes in gst_buffer_new_memdup(bytes.baseAddress, gsize(bytes.count)) }
        guard let buffer else { return nil }
        defer { gst_buffer_unref(buffer) }
        if let pts = frame.pts { buffer.pointee.pts = GstClockTime(pts) }
        if let dts = frame.dts { buffer.pointee.dts = GstClockTime(dts) }
        if let duration = frame.duration { buffer.pointee.duration = GstClockTime(duration) }
        if !frame.keyframe { buffer.pointee.mini_object.flags |= GST_BUFFER_FLAG_DELTA_UNIT.rawValue }
        return gst_sample_new(buffer, caps, nil, nil).map { SampleReference(adopting: $0) }
    }
}
