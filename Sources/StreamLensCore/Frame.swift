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

    public init(pixelFormat: String, width: Int, height: Int, framerate: (Int, Int), strides: [Int], offsets: [Int], size: Int) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.framerate = (framerate.0, framerate.1)
        self.strides = strides
        self.offsets = offsets
        self.size = size
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
    /// GstVideoRegionOfInterestMeta, so elements downstream see it.
    func addRegionOfInterest(_ region: RegionOfInterest)
    /// The regions of interest the frame already carries — a detector's results when this stage
    /// follows one (lensdetect, or any GStreamer element that adds the meta).
    func regionsOfInterest() -> [RegionOfInterest]
    /// The GstSample* behind the frame, for stages that hand frames to other GStreamer code
    /// (the RTSP server's pipeline) without copying pixels. Valid only during the call.
    func withSample<R>(_ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R
}

/// A rectangle of interest in frame pixels, with its label and score when known.
public struct RegionOfInterest: Sendable, Equatable {
    public var label: String
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public var score: Double?
    public init(label: String, x: Int, y: Int, width: Int, height: Int, score: Double? = nil) {
        self.label = label; self.x = x; self.y = y; self.width = width; self.height = height; self.score = score
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

    public init(format: VideoFormat, pts: UInt64?, duration: UInt64?, index: Int, pixels: any FramePixels, ageOnArrival: UInt64? = nil) {
        self.format = format
        self.pts = pts
        self.duration = duration
        self.index = index
        self.pixels = pixels
        self.ageOnArrival = ageOnArrival
    }
}
