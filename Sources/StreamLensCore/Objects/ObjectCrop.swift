import Foundation

/// How a region of a frame becomes a second model's input (a manifest's `object_crop`):
/// the region's box grown by `scale`, made square or kept to the model's aspect, optionally
/// turned upright by two of the region's keypoints (MediaPipe's face mesh is trained on faces
/// with the eyes level: its graph rotates the detection's box by the angle of the eye line).
///
/// ```json
/// "object_crop": { "mode": "square", "scale": 1.5, "rotation_keypoints": [0, 1], "target_angle": 0 }
/// ```
///
/// Or a square set by two keypoints alone, the box ignored (`alignment-points`): BlazePose's
/// detector gives the face's box, and the body's crop is centred on its hip centre, its side
/// twice the distance to the full-body point, upright along the line between them:
///
/// ```json
/// "object_crop": { "mode": "alignment-points", "scale": 1.25, "rotation_keypoints": [0, 1], "target_angle": 90 }
/// ```
public struct ObjectCrop: Sendable, Codable, Equatable {
    public enum Mode: String, Sendable, Codable, CaseIterable {
        /// The box's longer side, both ways (MediaPipe's `square_long`).
        case square
        /// The box grown to the model input's aspect ratio (nothing of the box is cut).
        case keepAspect = "keep-aspect"
        /// The box as it is, stretched to the input.
        case stretch
        /// Not the box: a square centred on the first of `rotation_keypoints`, its side twice
        /// their distance (MediaPipe's AlignmentPointsRectsCalculator, which its pose graph
        /// turns BlazePose's detections into body crops with), then grown by `scale`.
        case alignmentPoints = "alignment-points"
        /// A line of text, by four keypoints at its corners (top-left, top-right, bottom-right,
        /// bottom-left: the `db` detector's): cut out along its slant (its longer top or
        /// bottom edge wide, its longer side edge high; turned a quarter when it stands at
        /// least 1.5 times taller than wide), then scaled to the input's height, keeping its
        /// aspect, from the left; the input's width beyond it is padded with what the network
        /// sees as 0 (PaddleOCR's `get_rotate_crop_image` and `resize_norm_img`). A line wider
        /// than the input's aspect is squeezed to fit.
        case textLine = "text-line"
    }

    public var mode: Mode
    /// Growth of the box (1.5: half as large again, around its centre), after `mode`.
    public var scale: Double
    /// Two keypoint indices of the region (from, to): the crop is rotated so that the line
    /// between them points at `target_angle` degrees (0: to the right). Nil: no rotation.
    public var rotationKeypoints: [Int]?
    public var targetAngle: Double
    /// Only regions wholly in view are cropped: their box keeps this many of its shorter side
    /// (a text line's height) from the frame's edges (nil: every region). 0 skips boxes touching an edge; a line of
    /// text may go on beyond the edge with its cut letter not found at all, so text readers
    /// keep one line height (Frigate reads plates only when whole).
    public var edgeMargin: Double?

    public init(mode: Mode = .stretch, scale: Double = 1, rotationKeypoints: [Int]? = nil, targetAngle: Double = 0, edgeMargin: Double? = nil) {
        self.mode = mode; self.scale = scale; self.rotationKeypoints = rotationKeypoints; self.targetAngle = targetAngle
        self.edgeMargin = edgeMargin
    }

    enum CodingKeys: String, CodingKey {
        case mode, scale
        case rotationKeypoints = "rotation_keypoints"
        case targetAngle = "target_angle"
        case edgeMargin = "edge_margin"
    }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        mode = try c.decodeIfPresent(Mode.self, forKey: .mode) ?? .stretch
        scale = try c.decodeIfPresent(Double.self, forKey: .scale) ?? 1
        rotationKeypoints = try c.decodeIfPresent([Int].self, forKey: .rotationKeypoints)
        targetAngle = try c.decodeIfPresent(Double.self, forKey: .targetAngle) ?? 0
        edgeMargin = try c.decodeIfPresent(Double.self, forKey: .edgeMargin)
    }

    public func validate() throws {
        guard scale.isFinite, scale > 0, scale <= 10 else { throw StageError("object_crop.scale \(scale) is not in (0, 10]") }
        if let k = rotationKeypoints {
            guard k.count == 2, k.allSatisfy({ $0 >= 0 }), k[0] != k[1] else {
                throw StageError("object_crop.rotation_keypoints must be two different keypoint indices, got \(k)")
            }
        }
        guard targetAngle.isFinite else { throw StageError("object_crop.target_angle is not a number") }
        if let m = edgeMargin, !(m >= 0 && m <= 100) { throw StageError("object_crop.edge_margin \(m) is not in 0…100 (box sides)") }
        if mode == .textLine, rotationKeypoints != nil { throw StageError("object_crop.mode text-line turns the crop by the line's own four corners: give no rotation_keypoints") }
        if mode == .alignmentPoints, rotationKeypoints == nil {
            throw StageError("object_crop.mode alignment-points needs rotation_keypoints (the crop's centre, and the point that sets its size and turn)")
        }
    }

    /// Whether `region` is in view enough to be cropped (`edge_margin`) in a frame of
    /// `width` × `height` pixels.
    public func inView(_ region: RegionOfInterest, width: Int, height: Int) -> Bool {
        guard let edgeMargin else { return true }
        // A text line's own height (its box is taller when it slants).
        var side = min(region.width, region.height)
        if mode == .textLine, region.keypoints.count >= 4 {
            let k = region.keypoints
            side = min(side, max(hypot(k[3].x - k[0].x, k[3].y - k[0].y), hypot(k[2].x - k[1].x, k[2].y - k[1].y)))
        }
        let m = max(1, edgeMargin * side), box = region.box
        return box.xMin >= m && box.yMin >= m && box.xMax <= Double(width) - m && box.yMax <= Double(height) - m
    }

    /// Where the crop of `region` lies in the frame, for a model input of `width` × `height`;
    /// nil when the region has not the keypoints the rotation needs, or no size.
    public func placement(of region: RegionOfInterest, inputWidth width: Int, inputHeight height: Int) -> Placement? {
        let box = region.box
        guard box.width > 0, box.height > 0, box.width.isFinite, box.height.isFinite else { return nil }
        if mode == .textLine { return textLine(region.keypoints, inputWidth: width, inputHeight: height) }
        var rotation = 0.0
        if let k = rotationKeypoints {
            guard k.allSatisfy({ $0 < region.keypoints.count }) else { return nil }
            let (a, b) = (region.keypoints[k[0]], region.keypoints[k[1]])
            // MediaPipe's: target − atan2(−dy, dx), y pointing down; normalised to −π…π.
            rotation = targetAngle * .pi / 180 - atan2(-(b.y - a.y), b.x - a.x)
            rotation -= 2 * .pi * (rotation / (2 * .pi)).rounded()
        }
        var (w, h) = (box.width, box.height)
        if mode == .alignmentPoints, let k = rotationKeypoints {
            let (a, b) = (region.keypoints[k[0]], region.keypoints[k[1]])
            let side = 2 * hypot(b.x - a.x, b.y - a.y) * scale
            guard side > 0, side.isFinite, a.x.isFinite, a.y.isFinite else { return nil }
            return Placement(centerX: a.x, centerY: a.y, width: side, height: side, rotation: rotation)
        }
        switch mode {
        case .square: (w, h) = (max(w, h), max(w, h))
        case .keepAspect:
            let aspect = Double(width) / Double(height)
            if w / h < aspect { w = h * aspect } else { h = w / aspect }
        case .stretch, .alignmentPoints, .textLine: break
        }
        return Placement(centerX: box.center.x, centerY: box.center.y, width: w * scale, height: h * scale, rotation: rotation)
    }

    /// `text-line`: the line's rectangle from its four corners, filling the input from the left.
    func textLine(_ corners: [Point], inputWidth: Int, inputHeight: Int) -> Placement? {
        guard corners.count >= 4, corners.prefix(4).allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { return nil }
        func distance(_ a: Int, _ b: Int) -> Double { hypot(corners[b].x - corners[a].x, corners[b].y - corners[a].y) }
        var w = max(distance(0, 1), distance(3, 2)) * scale, h = max(distance(0, 3), distance(1, 2)) * scale
        guard w >= 1, h >= 1 else { return nil }
        var rotation = atan2(corners[1].y - corners[0].y, corners[1].x - corners[0].x)
        if h >= 1.5 * w { (w, h, rotation) = (h, w, rotation + .pi / 2) }
        let center = corners.prefix(4).reduce(Point(x: 0, y: 0)) { Point(x: $0.x + $1.x / 4, y: $0.y + $1.y / 4) }
        let columns = min(Double(inputWidth), (Double(inputHeight) * w / h).rounded(.up))
        return Placement(centerX: center.x, centerY: center.y, width: w, height: h, rotation: rotation, filled: columns / Double(inputWidth))
    }

    /// A rectangle of the frame, turned by `rotation` (radians) around its centre: a model
    /// input's pixel (u, v) of W × H is at `frame(u / W, v / H)`. With `filled` under 1 the
    /// rectangle fills that part of the input's width, from the left (the rest is padding).
    public struct Placement: Sendable, Equatable {
        public var centerX, centerY, width, height, rotation: Double
        public var filled: Double = 1

        public init(centerX: Double, centerY: Double, width: Double, height: Double, rotation: Double, filled: Double = 1) {
            self.centerX = centerX; self.centerY = centerY; self.width = width; self.height = height
            self.rotation = rotation; self.filled = filled
        }

        /// The frame point of a point of the crop given in 0…1 of its width and height.
        public func frame(_ nx: Double, _ ny: Double) -> Point {
            let (x, y) = ((nx / filled - 0.5) * width, (ny - 0.5) * height)
            let (c, s) = (cos(rotation), sin(rotation))
            return Point(x: centerX + c * x - s * y, y: centerY + s * x + c * y)
        }

        /// The inverse of `frame`: where a frame point lies in the crop, in 0…1 of its width and
        /// height (outside 0…1: outside the crop).
        public func crop(_ p: Point) -> (x: Double, y: Double) {
            let (dx, dy) = (p.x - centerX, p.y - centerY)
            let (c, s) = (cos(rotation), sin(rotation))
            return (((c * dx + s * dy) / width + 0.5) * filled, (-s * dx + c * dy) / height + 0.5)
        }

        /// The smallest axis-aligned box of the frame holding the (turned) crop.
        public var enclosingBox: Box {
            let corners = [frame(0, 0), frame(filled, 0), frame(0, 1), frame(filled, 1)]
            return Box(xMin: corners.map(\.x).min()!, yMin: corners.map(\.y).min()!, xMax: corners.map(\.x).max()!, yMax: corners.map(\.y).max()!)
        }

        /// A mask the model gave over its input (so over this crop) as an `ObjectMask` over
        /// `box` of the frame: each of its pixels read from the crop's mask at the point its
        /// centre maps to, bilinearly, and 0 outside the crop (MediaPipe's own inverse warp of
        /// BlazePose's mask, WarpAffineCalculator with BORDER_ZERO, does the same). At the crop
        /// mask's density over the frame, never finer than one pixel a frame pixel; nil when
        /// `box` is empty or not a number.
        public func frameMask(_ cropMask: ObjectMask, over box: Box) -> ObjectMask? {
            guard box.width > 0, box.height > 0, box.width.isFinite, box.height.isFinite, width > 0, height > 0 else { return nil }
            let density = min(1, max(Double(cropMask.width) / width, Double(cropMask.height) / height))
            let w = min(ObjectMask.maxSide, max(1, Int((box.width * density).rounded(.up))))
            let h = min(ObjectMask.maxSide, max(1, Int((box.height * density).rounded(.up))))
            let (c, s) = (cos(rotation), sin(rotation))
            var out = [UInt8](repeating: 0, count: w * h)
            for j in 0..<h {
                let dy = box.yMin + (Double(j) + 0.5) / Double(h) * box.height - centerY
                for i in 0..<w {
                    let dx = box.xMin + (Double(i) + 0.5) / Double(w) * box.width - centerX
                    // `crop`, its cosine and sine taken once.
                    let u = ((c * dx + s * dy) / width + 0.5) * filled, v = (-s * dx + c * dy) / height + 0.5
                    guard u >= 0, u <= 1, v >= 0, v <= 1 else { continue }
                    out[j * w + i] = UInt8((cropMask.coverage(u: u, v: v) * 255).rounded())
                }
            }
            return ObjectMask(width: w, height: h, values: out)
        }
    }
}
