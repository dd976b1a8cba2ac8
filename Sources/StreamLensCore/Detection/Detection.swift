/// A point, in whatever space its detection is in (normalised model input or frame pixels).
public struct Point: Sendable, Equatable, Codable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }
}

/// An axis-aligned rectangle by its corners. Normalised (0…1 of the model input) straight out
/// of a decoder, frame pixels after `FrameGeometry.toFrame`. Nothing here assumes which.
public struct Box: Sendable, Equatable, Codable {
    public var xMin: Double
    public var yMin: Double
    public var xMax: Double
    public var yMax: Double

    public init(xMin: Double, yMin: Double, xMax: Double, yMax: Double) {
        self.xMin = xMin
        self.yMin = yMin
        self.xMax = xMax
        self.yMax = yMax
    }

    /// A box from its centre and size (YOLO's cx, cy, w, h); nil when a value is not finite or
    /// the size is negative (a model's garbage must not become a box).
    public init?(centreX: Double, centreY: Double, width: Double, height: Double) {
        guard centreX.isFinite, centreY.isFinite, width.isFinite, height.isFinite, width >= 0, height >= 0 else { return nil }
        self.init(xMin: centreX - width / 2, yMin: centreY - height / 2, xMax: centreX + width / 2, yMax: centreY + height / 2)
    }

    public var width: Double { xMax - xMin }
    public var height: Double { yMax - yMin }
    /// Zero for an inverted box (never negative).
    public var area: Double { max(0, width) * max(0, height) }
    public var center: Point { Point(x: (xMin + xMax) / 2, y: (yMin + yMax) / 2) }

    /// Intersection over union, 0…1; 0 when either box is empty.
    public func iou(_ other: Box) -> Double {
        let w = min(xMax, other.xMax) - max(xMin, other.xMin)
        let h = min(yMax, other.yMax) - max(yMin, other.yMin)
        guard w > 0, h > 0 else { return 0 }
        let intersection = w * h
        let union = area + other.area - intersection
        return union > 0 ? intersection / union : 0
    }
}

/// One detected object: a box, a confidence, optional landmarks (BlazeFace: right eye, left
/// eye, nose tip, mouth centre, right ear tragion, left ear tragion, from the subject's view).
public struct Detection: Sendable, Equatable, Codable {
    public var box: Box
    /// Confidence 0…1 (after the decoder's sigmoid, for logit models).
    public var score: Double
    /// In the same space as `box`.
    public var keypoints: [Point]
    public var label: String?
    /// The class's index in the model's labels; -1 when unknown.
    public var labelId: Int
    /// The object's outline over `box` (segmentation decoders), nil for a box alone.
    public var mask: ObjectMask?

    public init(box: Box, score: Double, keypoints: [Point] = [], label: String? = nil, labelId: Int = -1, mask: ObjectMask? = nil) {
        self.box = box
        self.score = score
        self.keypoints = keypoints
        self.label = label
        self.labelId = labelId
        self.mask = mask
    }
}
