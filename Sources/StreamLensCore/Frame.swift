/// The negotiated video format of a stage's frames (GStreamer's video info, without C).
public struct VideoFormat: Sendable, Equatable, CustomStringConvertible {
    /// GStreamer's format name: "RGB", "BGRx", "I420", …
    public var pixelFormat: String
    public var width: Int
    public var height: Int
    /// Frames per second as a fraction (0/1 when variable or unknown).
    public var framerate: (numerator: Int, denominator: Int)
    /// Bytes per row of each plane, and each plane's offset in the buffer.
    public var strides: [Int]
    public var offsets: [Int]
    /// Total bytes of one frame.
    public var size: Int
    /// The caps as GStreamer writes them, when the bridge negotiated them; nil for a format a
    /// test made (raw video's caps follow from the fields; encoded video's need it: an H.264
    /// stream's `stream-format`). Not part of `==`.
    public var caps: String?

    public init(pixelFormat: String, width: Int, height: Int, framerate: (Int, Int), strides: [Int], offsets: [Int], size: Int, caps: String? = nil) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.framerate = (framerate.0, framerate.1)
        self.strides = strides
        self.offsets = offsets
        self.size = size
        self.caps = caps
    }

    public static func == (a: VideoFormat, b: VideoFormat) -> Bool {
        a.pixelFormat == b.pixelFormat && a.width == b.width && a.height == b.height
            && a.framerate == b.framerate && a.strides == b.strides && a.offsets == b.offsets && a.size == b.size
    }

    /// Nanoseconds per frame, when the rate is known.
    public var frameDurationNanoseconds: UInt64? {
        guard framerate.numerator > 0, framerate.denominator > 0 else { return nil }
        return UInt64(1_000_000_000 * Double(framerate.denominator) / Double(framerate.numerator))
    }

    /// Encoded video (H.264, H.265…): `pixelFormat` is the caps' media type ("video/x-h264"),
    /// the size what the caps say (0×0 when they don't), and a frame has no planes.
    public init(encoded mediaType: String, width: Int, height: Int, framerate: (Int, Int), caps: String? = nil) {
        self.init(pixelFormat: mediaType, width: width, height: height, framerate: framerate, strides: [], offsets: [], size: 0, caps: caps)
    }

    /// Encoded video: its frames are compressed access units, not pixels.
    public var isEncoded: Bool { pixelFormat.contains("/") }

    public var description: String {
        "\(pixelFormat) \(width)x\(height) @ \(framerate.numerator)/\(framerate.denominator)"
    }
}

/// Access to a frame's pixels, provided by the bridge. Pixels are mapped only when a stage
/// asks, so a stage that only looks at timestamps costs no map and no copy.
public protocol FramePixels: AnyObject {
    /// Read-only view of the frame's bytes.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// Writable view; the bridge makes the buffer writable first (a copy only if it is shared).
    func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R
    /// Attaches a region of interest (frame pixels) to the outgoing buffer as a
    /// GstVideoRegionOfInterestMeta in DL Streamer's layout, so elements downstream see it.
    func addRegionOfInterest(_ region: RegionOfInterest)
    /// Replaces the `index`-th region (as `regionsOfInterest` lists them) in place: a tracker
    /// giving it an id, a classifier adding an attribute. False when there is no such region.
    @discardableResult
    func updateRegionOfInterest(_ region: RegionOfInterest, at index: Int) -> Bool
    /// The regions of interest the frame already carries, in order, all of them — a detector's
    /// results when this stage follows one (lensdetect, or any GStreamer element that adds the meta).
    func regionsOfInterest() -> [RegionOfInterest]
    /// A record about the whole frame by kind (`FrameRecords`: "events", "zones"), as the JSON
    /// text a stage before this one stored; nil when there is none.
    func frameRecord(_ kind: String) -> String?
    /// Stores (replaces) the frame's record of that kind.
    func setFrameRecord(_ kind: String, json: String)
}

/// One object found on a frame, as every stage after the one that found it sees it: a rectangle
/// in frame pixels, what it is (label and label id), how sure the model was, the object's id
/// once a tracker has given it one, keypoints, and attributes later stages add (a classifier's
/// result, a zone's name). On the buffer it is a GstVideoRegionOfInterestMeta in Intel DL
/// Streamer's layout (see streamlens_gst.h and docs/metadata.md).
public struct RegionOfInterest: Sendable, Equatable {
    public var label: String
    /// The label's index in the model's labels; -1 when unknown.
    public var labelId: Int
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double
    /// 0…1, when known.
    public var confidence: Double?
    /// The object's id across frames; -1 until a tracker assigns one.
    public var objectId: Int
    /// Frame pixels.
    public var keypoints: [Point]
    /// Free-form results of later stages, by name (names are made of letters, digits, `_`, `-`,
    /// `.`; others become `_` on the buffer).
    public var attributes: [String: String]
    /// nil when the box was measured on this frame; otherwise how it was estimated.
    public var estimate: Estimate?
    /// What classifiers run on the region said (lensclassify), one per model, in order.
    public var classifications: [Classification] = []
    /// Points a landmark model found on the region (lensclassify), frame pixels.
    public var landmarks: Landmarks?
    /// The object's outline over the region's box (a segmentation decoder's), nil for a box alone.
    public var mask: ObjectMask?

    /// One classifier's answer on a region (DL Streamer writes the same three fields in one
    /// structure per classification).
    public struct Classification: Sendable, Equatable, Codable {
        /// What was classified ("emotion"): the structure's name on the meta.
        public var name: String
        public var label: String
        public var labelId: Int
        public var confidence: Double
        public init(name: String, label: String, labelId: Int, confidence: Double) {
            self.name = name; self.label = label; self.labelId = labelId; self.confidence = confidence
        }
        enum CodingKeys: String, CodingKey {
            case name, label, confidence
            case labelId = "label_id"
        }
    }

    /// A landmark model's points on a region: x, y in frame pixels (and z, when the model gives
    /// depth, in the same pixel scale as x), in the model's output order.
    public struct Landmarks: Sendable, Equatable, Codable {
        public var name: String
        /// [x, y] or [x, y, z] each.
        public var points: [[Double]]
        /// The model's confidence that the object is there (face mesh's face flag), 0…1.
        public var presence: Double?
        public init(name: String, points: [[Double]], presence: Double? = nil) {
            self.name = name; self.points = points; self.presence = presence
        }
    }

    /// A box not measured on its frame.
    public enum Estimate: String, Sendable, Equatable, Codable {
        /// A detector's box from an earlier frame, repeated unchanged (lensdetect `interval`).
        case held
        /// A tracker's estimate from the object's motion (the detector did not find it here,
        /// or did not run).
        case predicted
    }

    public init(label: String, labelId: Int = -1, x: Double, y: Double, width: Double, height: Double, confidence: Double? = nil,
                objectId: Int = -1, keypoints: [Point] = [], attributes: [String: String] = [:], estimate: Estimate? = nil) {
        self.label = label; self.labelId = labelId
        self.x = x; self.y = y; self.width = width; self.height = height
        self.confidence = confidence; self.objectId = objectId; self.keypoints = keypoints; self.attributes = attributes
        self.estimate = estimate
    }

    /// A detection (box and keypoints already in frame pixels) as a region.
    public init(_ detection: Detection) {
        self.init(label: detection.label ?? "", labelId: detection.labelId, x: detection.box.xMin, y: detection.box.yMin,
                  width: detection.box.width, height: detection.box.height, confidence: detection.score,
                  keypoints: detection.keypoints)
        mask = detection.mask
    }

    public var box: Box {
        get { Box(xMin: x, yMin: y, xMax: x + width, yMax: y + height) }
        set { x = newValue.xMin; y = newValue.yMin; width = newValue.width; height = newValue.height }
    }

    /// An attribute name as GStreamer structures take field names: a letter first, then
    /// letters, digits, `_`, `-`, `.`.
    public static func attributeName(_ name: String) -> String {
        var out = String(name.unicodeScalars.map { s -> Character in
            s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || "_-.".unicodeScalars.contains(s)) ? Character(s) : "_"
        })
        if out.first.map({ !$0.isLetter }) ?? true { out = "a" + out }
        return out
    }
}

/// One video frame as a stage sees it, valid only during `Stage.process` — or, when the stage
/// answered `.pending`, until `Stage.finishOldest` has given its outcome.
public struct Frame {
    public let format: VideoFormat
    /// Presentation time in nanoseconds (nil when the buffer has none).
    public let pts: UInt64?
    public let duration: UInt64?
    /// Index of the frame since the stage started.
    public let index: Int
    public let pixels: any FramePixels
    /// Live sources: how long ago the frame was captured when it reached the stage, in
    /// nanoseconds (pipeline running time now minus the frame's); nil otherwise.
    public let ageOnArrival: UInt64?
    /// Decoding time in nanoseconds: encoded video's, when the encoder reorders frames; nil
    /// otherwise.
    public let dts: UInt64?
    /// False for a frame that needs earlier ones to be decoded (GStreamer's DELTA_UNIT flag):
    /// encoded video's frames between keyframes. Raw video's frames are all keyframes.
    public let keyframe: Bool

    public init(format: VideoFormat, pts: UInt64?, duration: UInt64?, index: Int, pixels: any FramePixels, ageOnArrival: UInt64? = nil,
                dts: UInt64? = nil, keyframe: Bool = true) {
        self.format = format
        self.pts = pts
        self.duration = duration
        self.index = index
        self.pixels = pixels
        self.ageOnArrival = ageOnArrival
        self.dts = dts
        self.keyframe = keyframe
    }
}
