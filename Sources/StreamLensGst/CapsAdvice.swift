import CGStreamer
import CGstShim

/// Which element would make what one element offers meet what the next one takes: the policy
/// behind the advice in NegotiationDiagnosis ("put a videoconvert between …"). GStreamer answers
/// the facts (which kinds of stream each side carries, whether the caps meet once a converter's
/// fields are set aside, which installed encoder makes something the far side takes); the choices
/// are made here.
enum CapsAdvice: Equatable {
    /// The caps meet: nothing to fix.
    case none
    /// Raw on both sides: these converters, in pipeline order ("videoconvert", "videoscale").
    case convert([String])
    /// Raw offered, encoded wanted: an installed encoder that makes what is wanted.
    case encode(String)
    /// Encoded offered, raw wanted.
    case decode
    /// Video offered where audio is wanted, or the other way round.
    case otherMedia
    /// Nothing known helps.
    case unknown

    /// A converter and the caps fields it changes.
    struct Converter: Sendable {
        let element: String
        let changes: [String]
    }

    /// In the order they go in a pipeline. videoconvert also changes colorimetry, chroma siting
    /// and interlacing metadata; videoscale the size and pixel aspect ratio; videorate the rate.
    static let videoConverters = [
        Converter(element: "videoconvert", changes: ["format", "colorimetry", "chroma-site", "interlace-mode"]),
        Converter(element: "videoscale", changes: ["width", "height", "pixel-aspect-ratio"]),
        Converter(element: "videorate", changes: ["framerate"]),
    ]
    static let audioConverters = [
        Converter(element: "audioconvert", changes: ["format", "layout", "channels", "channel-mask"]),
        Converter(element: "audioresample", changes: ["rate"]),
    ]
    /// Encodings an encoder is first looked for in, when the far side takes them: what most
    /// muxers and players take (H.264 for video; MPEG audio, AAC among it, for audio).
    static let preferredEncodings = (video: "video/x-h264", audio: "audio/mpeg")

    /// The kinds of stream a caps can carry.
    struct Kinds: OptionSet {
        let rawValue: UInt32
        static let rawVideo = Kinds(rawValue: UInt32(SL_CAPS_RAW_VIDEO))
        static let rawAudio = Kinds(rawValue: UInt32(SL_CAPS_RAW_AUDIO))
        static let codedVideo = Kinds(rawValue: UInt32(SL_CAPS_CODED_VIDEO))
        static let codedAudio = Kinds(rawValue: UInt32(SL_CAPS_CODED_AUDIO))
        static let video: Kinds = [.rawVideo, .codedVideo]
        static let audio: Kinds = [.rawAudio, .codedAudio]

        init(rawValue: UInt32) { self.rawValue = rawValue }
        init(_ caps: UnsafeMutablePointer<GstCaps>) { rawValue = UInt32(sl_caps_classes(caps)) }
    }

    /// The advice for a link where `offer` meets `wants`; neither reference is consumed.
    static func advise(offer: UnsafeMutablePointer<GstCaps>, wants: UnsafeMutablePointer<GstCaps>) -> CapsAdvice {
        if gst_caps_can_intersect(offer, wants) != 0 { return .none }
        let o = Kinds(offer), w = Kinds(wants)
        if o.contains(.rawVideo), w.contains(.rawVideo) {
            return converters(videoConverters, offer: offer, wants: wants).map(CapsAdvice.convert) ?? .unknown
        }
        if o.contains(.rawAudio), w.contains(.rawAudio) {
            return converters(audioConverters, offer: offer, wants: wants).map(CapsAdvice.convert) ?? .unknown
        }
        if o.contains(.rawVideo), w.contains(.codedVideo) {
            return encoder(making: wants, video: true).map(CapsAdvice.encode) ?? .unknown
        }
        if o.contains(.rawAudio), w.contains(.codedAudio) {
            return encoder(making: wants, video: false).map(CapsAdvice.encode) ?? .unknown
        }
        if (o.contains(.codedVideo) && w.contains(.rawVideo)) || (o.contains(.codedAudio) && w.contains(.rawAudio)) {
            return .decode
        }
        let onlyVideo = { (k: Kinds) in !k.isDisjoint(with: .video) && k.isDisjoint(with: .audio) }
        let onlyAudio = { (k: Kinds) in !k.isDisjoint(with: .audio) && k.isDisjoint(with: .video) }
        if (onlyVideo(o) && onlyAudio(w)) || (onlyAudio(o) && onlyVideo(w)) { return .otherMedia }
        return .unknown
    }

    /// The fewest converters of `table` after which the caps meet, in the table's order: each
    /// one alone first, then pairs, then more; nil when even all of them do not help.
    static func converters(_ table: [Converter], offer: UnsafeMutablePointer<GstCaps>,
                           wants: UnsafeMutablePointer<GstCaps>) -> [String]? {
        let masks = 1..<(1 << table.count)
        for size in table.indices.map({ $0 + 1 }) {
            for mask in masks where mask.nonzeroBitCount == size {
                let chosen = table.indices.filter { mask & (1 << $0) != 0 }
                let fields = chosen.flatMap { table[$0].changes }.joined(separator: ",")
                if sl_caps_meet_without(offer, wants, fields) != 0 { return chosen.map { table[$0].element } }
            }
        }
        return nil
    }

    /// The best-ranked encoder making what `wants` takes, one making the preferred encoding first
    /// when `wants` takes it.
    static func encoder(making wants: UnsafeMutablePointer<GstCaps>, video: Bool) -> String? {
        let preferred = gst_caps_from_string(video ? preferredEncodings.video : preferredEncodings.audio)!
        defer { gst_caps_unref(preferred) }
        let narrowed = gst_caps_intersect(wants, preferred)!
        defer { gst_caps_unref(narrowed) }
        return takeString(sl_encoder_making(narrowed, video ? 1 : 0)) ?? takeString(sl_encoder_making(wants, video ? 1 : 0))
    }
}
