/// How a frame becomes a model input of another size or shape.
public enum CropMode: String, Sendable, Codable, CaseIterable {
    /// Pad the frame (centred) to the model's aspect ratio, then scale: the whole frame is
    /// seen, at the cost of some input pixels spent on padding. The default.
    case letterbox
    /// Cut the largest centred rectangle with the model's aspect ratio, then scale: more pixels
    /// per face, but faces outside the crop (the sides of a 16:9 frame) are never seen.
    case centerCrop = "center-crop"
    /// Scale the frame to the model's size, distorting it: faces come out squashed, which
    /// detectors trained on undistorted faces like less.
    case stretch
}

/// The arithmetic between one frame size and one model input size: the pre-processing plan in
/// whole frame pixels, and the mapping of the model's normalised (0…1) output back onto the
/// frame, exactly inverse to that plan.
///
/// Letterbox sees the whole frame (the default); centre-crop loses faces outside the crop;
/// stretch sees everything but distorts it. Frame pixel coordinates are continuous: the frame
/// spans 0…width and 0…height, so pixel (i, j) covers i…i+1, j…j+1.
public struct FrameGeometry: Sendable, Equatable {
    public let frameWidth: Int
    public let frameHeight: Int
    public let modelWidth: Int
    public let modelHeight: Int
    public let mode: CropMode

    /// The frame region (frame pixels, possibly reaching outside the frame for letterbox)
    /// that is scaled onto the whole model input.
    let regionX: Int
    let regionY: Int
    let regionWidth: Int
    let regionHeight: Int

    public init(frameWidth: Int, frameHeight: Int, modelWidth: Int, modelHeight: Int, mode: CropMode) {
        precondition(frameWidth > 0 && frameHeight > 0 && modelWidth > 0 && modelHeight > 0, "sizes must be positive")
        self.frameWidth = frameWidth
        self.frameHeight = frameHeight
        self.modelWidth = modelWidth
        self.modelHeight = modelHeight
        self.mode = mode

        // Compare aspect ratios exactly, in integers: frameW/frameH against modelW/modelH.
        let frameIsWider = frameWidth * modelHeight > frameHeight * modelWidth
        let frameIsTaller = frameWidth * modelHeight < frameHeight * modelWidth
        // Rounded integer division: the nearest whole-pixel size with the model's aspect ratio.
        func scaled(_ a: Int, _ num: Int, _ den: Int) -> Int { (a * num + den / 2) / den }

        switch mode {
        case .stretch:
            (regionX, regionY, regionWidth, regionHeight) = (0, 0, frameWidth, frameHeight)
        case .letterbox:
            if frameIsWider {
                let padded = max(frameHeight, scaled(frameWidth, modelHeight, modelWidth))
                (regionX, regionY, regionWidth, regionHeight) = (0, -((padded - frameHeight) / 2), frameWidth, padded)
            } else if frameIsTaller {
                let padded = max(frameWidth, scaled(frameHeight, modelWidth, modelHeight))
                (regionX, regionY, regionWidth, regionHeight) = (-((padded - frameWidth) / 2), 0, padded, frameHeight)
            } else {
                (regionX, regionY, regionWidth, regionHeight) = (0, 0, frameWidth, frameHeight)
            }
        case .centerCrop:
            if frameIsWider {
                let cropped = max(1, min(frameWidth, scaled(frameHeight, modelWidth, modelHeight)))
                (regionX, regionY, regionWidth, regionHeight) = ((frameWidth - cropped) / 2, 0, cropped, frameHeight)
            } else if frameIsTaller {
                let cropped = max(1, min(frameHeight, scaled(frameWidth, modelHeight, modelWidth)))
                (regionX, regionY, regionWidth, regionHeight) = (0, (frameHeight - cropped) / 2, frameWidth, cropped)
            } else {
                (regionX, regionY, regionWidth, regionHeight) = (0, 0, frameWidth, frameHeight)
            }
        }
    }

    /// Rows and columns of padding to add around the frame, in frame pixels, before scaling to
    /// the model size: centred, an odd remainder to the bottom or right. A 1280x720 frame for a
    /// square model pads 280 rows top and 280 bottom, giving 1280x1280. All zero unless
    /// `mode` is letterbox (or when the frame already has the model's aspect ratio).
    public var padding: (top: Int, left: Int, bottom: Int, right: Int) {
        guard mode == .letterbox else { return (0, 0, 0, 0) }
        return (top: -regionY, left: -regionX,
                bottom: regionHeight - frameHeight + regionY, right: regionWidth - frameWidth + regionX)
    }

    /// The frame rectangle to cut out before scaling to the model size, in frame pixels: the
    /// largest centred one with the model's aspect ratio, an odd remainder to the bottom or
    /// right (1280x720, square model: x 280, y 0, 720x720). The whole frame unless `mode` is
    /// centre-crop.
    public var crop: (x: Int, y: Int, width: Int, height: Int) {
        guard mode == .centerCrop else { return (0, 0, frameWidth, frameHeight) }
        return (x: regionX, y: regionY, width: regionWidth, height: regionHeight)
    }

    /// A point in normalised model-input coordinates to frame pixels (not clamped).
    public func toFrame(_ p: Point) -> Point {
        Point(x: Double(regionX) + p.x * Double(regionWidth), y: Double(regionY) + p.y * Double(regionHeight))
    }

    /// Frame pixels to normalised model-input coordinates: the inverse of `toFrame(_: Point)`.
    public func toModel(_ p: Point) -> Point {
        Point(x: (p.x - Double(regionX)) / Double(regionWidth), y: (p.y - Double(regionY)) / Double(regionHeight))
    }

    /// A detection in normalised model-input coordinates to frame pixels, bounded as every
    /// number from a model must be (`FrameBounds`): the box clamped to the frame (a face half out
    /// of the picture keeps its visible half), keypoints to the frame grown by its size on every
    /// side (an ear just past the edge keeps its place; a server's 1e20 does not reach drawing).
    public func toFrame(_ d: Detection) -> Detection {
        let bounds = FrameBounds(width: frameWidth, height: frameHeight)
        let topLeft = toFrame(Point(x: d.box.xMin, y: d.box.yMin))
        let bottomRight = toFrame(Point(x: d.box.xMax, y: d.box.yMax))
        let whole = Box(xMin: topLeft.x, yMin: topLeft.y, xMax: bottomRight.x, yMax: bottomRight.y)
        let box = bounds.clamp(whole) ?? Box(xMin: 0, yMin: 0, xMax: 0, yMax: 0)
        // A mask covers its box: the part of it over the clamped box (letterbox padding cut off).
        let mask = d.mask.flatMap { $0.cropped(from: whole, to: box) }
        return Detection(box: box, score: d.score, keypoints: bounds.clamp(keypoints: d.keypoints.map(toFrame)), label: d.label, labelId: d.labelId,
                         mask: mask)
    }
}
