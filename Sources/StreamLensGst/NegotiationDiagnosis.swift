import CGStreamer
import CGstShim
import StreamLensCore

/// Says why two elements do not fit together, in a user's words: which element offered which
/// caps, which one wanted which, and the element that would fix it ("put a videoconvert between
/// lenspass0 and capsfilter1"). GStreamer itself only says "not-negotiated" or "could not link".
///
/// Caps are described in a few words (media type, formats, a fixed size and rate: see
/// `sl_caps_describe`), never as the full caps string, which runs to kilobytes for a converter.
enum NegotiationDiagnosis {
    /// "video/x-raw I420 320x240 30 fps"; consumes nothing (the caller keeps its reference).
    static func describe(_ caps: UnsafeMutablePointer<GstCaps>?) -> String {
        takeString(sl_caps_describe(caps)) ?? "?"
    }

    /// What would make `offer` (from `from`) fit `wants` (of `to`), as a sentence (CapsAdvice
    /// chooses); nil when the caps meet or nothing is known to help.
    static func fix(offer: UnsafeMutablePointer<GstCaps>, wants: UnsafeMutablePointer<GstCaps>,
                    from: UnsafeMutablePointer<GstElement>, to: UnsafeMutablePointer<GstElement>) -> String? {
        let (a, b) = (objectName(from), objectName(to))
        switch CapsAdvice.advise(offer: offer, wants: wants) {
        case .convert(let elements) where elements.count == 1:
            return "put \(article(elements[0])) \(elements[0]) between \(a) and \(b)"
        case .convert(let elements):
            return "put \(elements.joined(separator: " ! ")) between \(a) and \(b)"
        case .encode(let encoder):
            return "\(b) takes encoded \(kind(offer)): put an encoder (e.g. \(encoder)) between \(a) and \(b)"
        case .decode:
            return "\(a) gives encoded data: put a decodebin between \(a) and \(b)"
        case .otherMedia:
            let given = kind(offer), wanted = kind(wants)
            if isDemuxer(from) { return "the input has no \(wanted) stream (only \(given))" }
            return "\(b) takes \(wanted), not \(given): link it to \(article(wanted)) \(wanted) stream"
        case .none, .unknown:
            return nil
        }
    }

    /// "A gives …, B takes …[; fix]". What B takes is shown for the offer's media kind only (a
    /// muxer's audio formats say nothing about a video link).
    static func mismatch(_ from: UnsafeMutablePointer<GstElement>, gives offer: UnsafeMutablePointer<GstCaps>, verb: String = "gives",
                         _ to: UnsafeMutablePointer<GstElement>, takes wants: UnsafeMutablePointer<GstCaps>, wantVerb: String = "takes",
                         fixFrom: UnsafeMutablePointer<GstElement>? = nil) -> String {
        let shown = sl_caps_of_kind(wants, sl_caps_media_kind(offer))
        defer { gst_caps_unref(shown) }
        var text = "\(objectName(from)) \(verb) \(describe(offer)), \(objectName(to)) \(wantVerb) \(describe(shown))"
        if let fix = fix(offer: offer, wants: wants, from: fixFrom ?? from, to: to) { text += "; \(fix)" }
        return text
    }

    private static func kind(_ caps: UnsafeMutablePointer<GstCaps>) -> String { String(cString: sl_caps_media_kind(caps)) }

    private static func article(_ word: String) -> String { word.first.map { "aeiou".contains($0) } == true ? "an" : "a" }

    /// A decodebin, a demuxer: its streams are the input's.
    static func isDemuxer(_ element: UnsafeMutablePointer<GstElement>) -> Bool {
        let factory = sl_element_factory_name(element).map { String(cString: $0) } ?? ""
        return String(cString: sl_element_klass(element)).contains("Demux") || factory.hasSuffix("decodebin") || factory.hasSuffix("decodebin3")
            || factory == "parsebin"
    }

    /// A link that failed while parsing (`could not link A to B[, B can't handle caps C]`), in
    /// the half-built pipeline gst_parse returned: both elements' pads are asked what they
    /// carry. Returns "cannot link A to B: A gives …, B takes …; put a …".
    static func link(in pipeline: UnsafeMutablePointer<GstElement>, parseMessage: String) -> String? {
        guard let r = parseMessage.range(of: "could not link ") else { return nil }
        let rest = parseMessage[r.upperBound...]
        guard let to = rest.range(of: " to ") else { return nil }
        let fromName = String(rest[..<to.lowerBound])
        let afterTo = rest[to.upperBound...]
        let toName = String(afterTo.prefix { $0 != "," })
        var filter: UnsafeMutablePointer<GstCaps>?
        if let c = parseMessage.range(of: "can't handle caps ") {
            filter = gst_caps_from_string(String(parseMessage[c.upperBound...]))
        }
        defer { if let filter { gst_caps_unref(filter) } }
        return unlinkedMismatch(in: pipeline, fromName, toName, filter: filter).map { "cannot link \(fromName) to \(toName): " + $0 }
    }

    /// A link gst_parse could not make when a dynamic pad appeared (its warning "Delayed linking
    /// failed", debug "failed delayed linking … named A to … named B"): A's streams fit nothing B
    /// takes, so B will never get data (the pipeline would wait for ever, or fail later with
    /// not-linked).
    static func delayedLink(in pipeline: UnsafeMutablePointer<GstElement>, debug: String) -> String? {
        let parts = debug.components(separatedBy: " named ")
        guard parts.count >= 3, let fromName = parts[1].components(separatedBy: " to ").first else { return nil }
        let toName = parts.last!.trimmingCharacters(in: .whitespacesAndNewlines)
        return unlinkedMismatch(in: pipeline, fromName, toName).map { "no stream of \(fromName) can link to \(toName): " + $0 }
    }

    /// `mismatch` of the pipeline's elements named `fromName` and `toName`, between what the
    /// first offers on its unlinked source pads (narrowed by `filter`) and what the second takes
    /// on its unlinked sink pads; nil when either element is not found.
    private static func unlinkedMismatch(in pipeline: UnsafeMutablePointer<GstElement>, _ fromName: String, _ toName: String,
                                         filter: UnsafeMutablePointer<GstCaps>? = nil) -> String? {
        let bin = UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstBin.self)
        guard let from = gst_bin_get_by_name(bin, fromName) else { return nil }
        defer { gst_object_unref(from) }
        guard let to = gst_bin_get_by_name(bin, toName) else { return nil }
        defer { gst_object_unref(to) }
        var offer = sl_element_side_caps(from, GST_PAD_SRC, 1)!
        if let filter {
            let narrowed = gst_caps_intersect(offer, filter)!
            gst_caps_unref(offer)
            offer = narrowed
        }
        defer { gst_caps_unref(offer) }
        let wants = sl_element_side_caps(to, GST_PAD_SINK, 1)!
        defer { gst_caps_unref(wants) }
        return mismatch(from, gives: offer, to, takes: wants)
    }

    /// Caps negotiation failed in a running pipeline. Looks at each StreamLens stage, sources
    /// first: on its input side, what upstream offered (the caps it actually sent, else what it
    /// can give) against what the stage takes; for a stage whose output is its input, that
    /// against what downstream wants. Then, for pipelines where no stage is the cause, every
    /// other link. nil when no link shows the conflict.
    static func negotiation(stages: [UnsafeMutablePointer<GstElement>], elements: [UnsafeMutablePointer<GstElement>]) -> String? {
        for stage in stages {
            if let text = aroundStage(stage) { return text }
        }
        for element in elements where sl_is_stage(element) == 0 {
            if let text = afterElement(element) { return text }
        }
        return nil
    }

    private static func aroundStage(_ stage: UnsafeMutablePointer<GstElement>) -> String? {
        guard let sinkPad = gst_element_get_static_pad(stage, "sink") else { return nil }
        defer { gst_object_unref(sinkPad) }
        guard let upstream = sl_element_neighbour(stage, "sink") else { return nil }
        defer { gst_object_unref(upstream) }
        let name = objectName(stage)
        let takes = gst_pad_get_pad_template_caps(sinkPad)!
        defer { gst_caps_unref(takes) }
        let offered = sl_stage_offered_caps(stage) ?? gst_pad_peer_query_caps(sinkPad, nil)!
        defer { gst_caps_unref(offered) }
        if gst_caps_can_intersect(offered, takes) == 0 {
            return "caps could not be negotiated at \(name)'s input: " + mismatch(upstream, gives: offered, verb: "offers", stage, takes: takes)
        }
        guard StageElements.descriptor(of: stage)?.capsPassthrough == true,
              let srcPad = gst_element_get_static_pad(stage, "src") else { return nil }
        defer { gst_object_unref(srcPad) }
        guard let downstream = sl_element_neighbour(stage, "src") else { return nil }
        defer { gst_object_unref(downstream) }
        let through = gst_caps_intersect(offered, takes)!
        defer { gst_caps_unref(through) }
        let wants = gst_pad_peer_query_caps(srcPad, nil)!
        defer { gst_caps_unref(wants) }
        guard gst_caps_can_intersect(through, wants) == 0 else { return nil }
        // The converter goes after the stage: the stage keeps seeing the frames as they come.
        return "caps could not be negotiated around \(name), which passes frames on unchanged: "
            + mismatch(upstream, gives: through, verb: "offers", downstream, takes: wants, wantVerb: "wants", fixFrom: stage)
    }

    /// The first src pad of `element` whose caps cannot meet what its peer accepts.
    private static func afterElement(_ element: UnsafeMutablePointer<GstElement>) -> String? {
        let it = gst_element_iterate_src_pads(element)
        defer { gst_iterator_free(it) }
        var value = GValue()
        var result: String?
        while result == nil, gst_iterator_next(it, &value) == GST_ITERATOR_OK {
            defer { g_value_unset(&value) }
            guard let pad = g_value_get_object(&value)?.assumingMemoryBound(to: GstPad.self),
                  let peer = gst_pad_get_peer(pad) else { continue }
            defer { gst_object_unref(peer) }
            guard let downstream = gst_pad_get_parent_element(peer) else { continue }
            defer { gst_object_unref(downstream) }
            let offer = gst_pad_get_current_caps(pad) ?? gst_pad_query_caps(pad, nil)!
            defer { gst_caps_unref(offer) }
            let wants = gst_pad_query_caps(peer, nil)!
            defer { gst_caps_unref(wants) }
            guard gst_caps_can_intersect(offer, wants) == 0 else { continue }
            result = "caps could not be negotiated between \(objectName(element)) and \(objectName(downstream)): "
                + mismatch(element, gives: offer, verb: "offers", downstream, takes: wants, wantVerb: "wants")
        }
        return result
    }
}
