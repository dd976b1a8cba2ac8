/// A box's constant-velocity Kalman filter: the state is the box's centre, width and height
/// and their velocities (SORT / ByteTrack's eight numbers, here centre x, centre y, width,
/// height as in BoT-SORT), measured by detections of the box alone.
///
/// With the noises diagonal, as in DeepSORT and ByteTrack, the eight-state filter falls apart
/// into four independent filters of a position and its velocity (the motion model couples each
/// coordinate only with its own velocity; a diagonal start stays block-diagonal), so each
/// coordinate is a 2×2 filter here: the same numbers as the 8×8 matrices, without them.
/// Noises scale with the box (DeepSORT's weights: 1/20 of the size for positions, 1/160 for
/// velocities per frame), so a large near box and a small far one are trusted alike.
public struct KalmanBox: Sendable, Equatable {
    /// One coordinate: position, velocity (per frame) and their covariance [[a, b], [b, c]].
    struct Axis: Sendable, Equatable {
        var position: Double
        var velocity = 0.0
        var a: Double, b = 0.0, c: Double

        init(_ position: Double, positionStd: Double, velocityStd: Double) {
            self.position = position
            a = positionStd * positionStd
            c = velocityStd * velocityStd
        }

        /// x ← F x, P ← F P Fᵀ + Q (F = [[1, 1], [0, 1]]).
        mutating func predict(positionStd: Double, velocityStd: Double) {
            position += velocity
            a += 2 * b + c + positionStd * positionStd
            b += c
            c += velocityStd * velocityStd
        }

        /// The standard update with a measurement of the position (H = [1, 0]).
        mutating func update(_ measured: Double, std: Double) {
            let s = a + std * std
            guard s > 0 else { return }
            let k0 = a / s, k1 = b / s
            let innovation = measured - position
            position += k0 * innovation
            velocity += k1 * innovation
            let (a0, b0) = (a, b)
            a = (1 - k0) * a0
            b = (1 - k0) * b0
            c -= k1 * b0
        }
    }

    static let positionWeight = 1.0 / 20
    static let velocityWeight = 1.0 / 160

    var x: Axis, y: Axis, w: Axis, h: Axis

    /// A new track at a detected box: velocities unknown (a wide start, DeepSORT's 10× weight).
    public init(_ box: Box) {
        let (pw, ph) = (Self.positionWeight, Self.positionWeight)
        let (vw, vh) = (10 * Self.velocityWeight, 10 * Self.velocityWeight)
        let bw = max(1, box.width), bh = max(1, box.height)
        x = Axis(box.center.x, positionStd: 2 * pw * bw, velocityStd: vw * bw)
        y = Axis(box.center.y, positionStd: 2 * ph * bh, velocityStd: vh * bh)
        w = Axis(box.width, positionStd: 2 * pw * bw, velocityStd: vw * bw)
        h = Axis(box.height, positionStd: 2 * ph * bh, velocityStd: vh * bh)
    }

    /// The box now (after the last predict or update).
    public var box: Box {
        let width = max(0, w.position), height = max(0, h.position)
        return Box(xMin: x.position - width / 2, yMin: y.position - height / 2, xMax: x.position + width / 2, yMax: y.position + height / 2)
    }

    /// Velocity of the centre, pixels per frame.
    public var velocity: Point { Point(x: x.velocity, y: y.velocity) }

    /// One frame ahead; `holdingSize`: the size stays as it is (ByteTrack does so for a track
    /// it has lost: an object going out of sight seems to shrink, and that shrinking is not
    /// motion to carry on).
    public mutating func predict(holdingSize: Bool = false) {
        if holdingSize { w.velocity = 0; h.velocity = 0 }
        let bw = max(1, w.position), bh = max(1, h.position)
        x.predict(positionStd: Self.positionWeight * bw, velocityStd: Self.velocityWeight * bw)
        y.predict(positionStd: Self.positionWeight * bh, velocityStd: Self.velocityWeight * bh)
        w.predict(positionStd: Self.positionWeight * bw, velocityStd: Self.velocityWeight * bw)
        h.predict(positionStd: Self.positionWeight * bh, velocityStd: Self.velocityWeight * bh)
        // A box predicted to shrink through zero stops there (it would turn inside out).
        if w.position < 1 { w.position = 1; w.velocity = 0 }
        if h.position < 1 { h.position = 1; h.velocity = 0 }
    }

    /// Corrected by a detection of this box.
    public mutating func update(_ box: Box) {
        let bw = max(1, w.position), bh = max(1, h.position)
        x.update(box.center.x, std: Self.positionWeight * bw)
        y.update(box.center.y, std: Self.positionWeight * bh)
        w.update(box.width, std: Self.positionWeight * bw)
        h.update(box.height, std: Self.positionWeight * bh)
    }
}
