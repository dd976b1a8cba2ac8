import Foundation
import Testing
@testable import StreamLensCore

/// lensstylize's temporal=blend in pieces: the flow finds a known motion, the confidence marks
/// what the motion does not explain, and the blend takes shimmer out without dragging the past.
@Suite struct MotionBlendTests {
    /// A textured picture defined everywhere (sinusoids of several sizes and directions, and
    /// blobs), so a moved copy is exact, sub-pixel included. Grey 0…255.
    static func texture(_ x: Float, _ y: Float) -> Float {
        var v: Float = 128
        v += 40 * sin(x * 0.21 + y * 0.05) + 30 * sin(y * 0.17 - x * 0.07) + 20 * sin((x + y) * 0.43)
        for (cx, cy, r) in [(60 as Float, 40 as Float, 9 as Float), (150, 100, 14), (250, 60, 7), (200, 150, 11)] {
            let d = ((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (r * r)
            v += 50 * exp(-d)
        }
        return max(0, min(255, v))
    }

    static func picture(_ w: Int, _ h: Int, moved: (Float, Float)) -> [Float] {
        var g = [Float](repeating: 0, count: w * h)
        for y in 0..<h { for x in 0..<w { g[y * w + x] = texture(Float(x) - moved.0, Float(y) - moved.1) } }
        return g
    }

    static func median(_ v: [Float]) -> Float { v.sorted()[v.count / 2] }

    @Test func theFlowFindsASubPixelPan() {
        let w = 320, h = 180
        for motion in [(Float(4), Float(4) / 3), (-2.5, 0.75), (0, 0)] {
            let before = Self.picture(w, h, moved: (0, 0)), after = Self.picture(w, h, moved: motion)
            let flow = DenseFlow.lucasKanade(from: after, to: before, width: w, height: h)
            // Inside a margin of the motion (the borders see content that came into view).
            var ex: [Float] = [], ey: [Float] = []
            for y in 12..<(h - 12) { for x in 12..<(w - 12) {
                ex.append(abs(flow.dx[y * w + x] + motion.0)); ey.append(abs(flow.dy[y * w + x] + motion.1))
            } }
            #expect(Self.median(ex) < 0.1 && Self.median(ey) < 0.1, "motion \(motion): median error \(Self.median(ex)), \(Self.median(ey))")
            let within = zip(ex, ey).filter { $0 < 0.5 && $1 < 0.5 }.count
            #expect(Double(within) > 0.95 * Double(ex.count), "motion \(motion): \(within) of \(ex.count) within half a pixel")
            let confidence = flow.confidence(current: after, previous: before, tolerance: 24)
            let inner = (12..<(h - 12)).flatMap { y in (12..<(w - 12)).map { confidence[y * w + $0] } }
            #expect(inner.reduce(0, +) / Float(inner.count) > 0.9)
        }
    }

    @Test func whatTheMotionDoesNotExplainIsNotBlended() {
        let w = 320, h = 180
        let before = Self.picture(w, h, moved: (0, 0))
        var after = Self.picture(w, h, moved: (3, 1))
        // An object coming into view: a flat dark square where the texture was.
        for y in 60..<110 { for x in 100..<160 { after[y * w + x] = 20 } }
        let flow = DenseFlow.lucasKanade(from: after, to: before, width: w, height: h)
        let confidence = flow.confidence(current: after, previous: before, tolerance: 24)
        let inside = (70..<100).flatMap { y in (110..<150).map { confidence[y * w + $0] } }
        #expect(inside.reduce(0, +) / Float(inside.count) < 0.1)
        // A cut: an unrelated picture.
        let other = Self.picture(w, h, moved: (0, 0)).map { 255 - $0 }
        let cut = DenseFlow.lucasKanade(from: other, to: before, width: w, height: h)
        let c = cut.confidence(current: other, previous: before, tolerance: 24)
        #expect(c.reduce(0, +) / Float(c.count) < 0.2)
    }

    /// A per-frame "style" whose marks do not follow the picture (noise drawn afresh each frame,
    /// as a network's crawling marks): blended along the motion, the shimmer falls by the
    /// expected factor, and the scene's own content keeps up with the motion (no lag).
    @Test func theBlendTakesShimmerOutAndKeepsUp() {
        let w = 160, h = 90
        var blend = MotionBlend(weight: 0.6)
        var rng = SystemRandomNumberGenerator()
        var outputs: [[UInt8]] = [], clean: [[Float]] = []
        for t in 0..<24 {
            let g = Self.picture(w, h, moved: (Float(t) * 2, Float(t) * 0.5))
            let input = g.flatMap { v in [UInt8](repeating: UInt8(v), count: 3) }
            var out = g.flatMap { v in (0..<3).map { _ in UInt8(max(0, min(255, v + Float(Int.random(in: -20...20, using: &rng))))) } }
            input.withUnsafeBytes { i in out.withUnsafeMutableBufferPointer { o in
                blend.apply(input: i, width: w, height: h, output: o, outputWidth: w, outputHeight: h)
            } }
            outputs.append(out); clean.append(g)
        }
        // Error against the noise-free picture, inside a margin, once the blend has settled.
        func rms(_ t: Int) -> Double {
            var s = 0.0, n = 0
            for y in 10..<(h - 10) { for x in 10..<(w - 10) {
                let d = Double(outputs[t][(y * w + x) * 3 + 1]) - Double(clean[t][y * w + x]); s += d * d; n += 1
            } }
            return (s / Double(n)).squareRoot()
        }
        let unblended = (Double(41 * 41 - 1) / 12).squareRoot() // uniform noise in -20…20
        let settled = (12..<24).map(rms).reduce(0, +) / 12
        // (1 - w) / sqrt(1 - w²)·σ for w = 0.6: 0.5σ; interpolation of the past softens it a little more.
        #expect(settled < 0.65 * unblended, "rms \(settled) against \(unblended) per frame")
        #expect(settled > 0.2 * unblended, "rms \(settled): the blend is not that strong")
    }

    /// Tiny and changing sizes (a model whose output is 1 pixel, a stream that changes size):
    /// no crash, and a frame after a change of size is its own output.
    @Test func tinyAndChangingSizesAreTakenAsTheyCome() {
        var blend = MotionBlend(weight: 0.6)
        for (w, h) in [(1, 1), (1, 1), (2, 2), (2, 2), (3, 1), (64, 48), (64, 48), (2, 2)] {
            let input = [UInt8](repeating: 100, count: w * h * 3)
            var out = (0..<(w * h * 3)).map { UInt8($0 % 256) }
            let before = out
            input.withUnsafeBytes { i in out.withUnsafeMutableBufferPointer { o in
                blend.apply(input: i, width: w, height: h, output: o, outputWidth: w, outputHeight: h)
            } }
            #expect(out.count == before.count)
        }
        var changed = MotionBlend(weight: 0.9)
        for (w, h, value) in [(64, 48, UInt8(10)), (80, 60, UInt8(200))] {
            let input = [UInt8](repeating: 100, count: w * h * 3)
            var out = [UInt8](repeating: value, count: w * h * 3)
            input.withUnsafeBytes { i in out.withUnsafeMutableBufferPointer { o in
                changed.apply(input: i, width: w, height: h, output: o, outputWidth: w, outputHeight: h)
            } }
            #expect(out.allSatisfy { $0 == value }, "\(w)x\(h): the first frame at a size is its own output")
        }
    }

    /// A still scene (the same input twice: zero motion, full confidence) blends every channel of
    /// every pixel by the weight: the vector path (pairs of pixels away from the edges) and the
    /// scalar path (the last columns and row) give the same arithmetic, lane for lane. Output
    /// sizes twice, four times and one and a half times the flow's, odd sizes included.
    @Test func aStillSceneBlendsEveryChannelByTheWeight() {
        for (w, h, ow, oh) in [(64, 36, 64, 36), (64, 36, 128, 72), (63, 35, 95, 53)] {
            let input = Self.picture(w, h, moved: (0, 0)).flatMap { v in [UInt8(v), UInt8(255 - v), UInt8(v / 2)] }
            var blend = MotionBlend(weight: 0.7)
            var first = (0..<(ow * oh * 3)).map { UInt8(($0 * 7) % 256) }
            let history = first
            var second = (0..<(ow * oh * 3)).map { UInt8(($0 * 13 + 5) % 256) }
            let fresh = second
            input.withUnsafeBytes { i in
                first.withUnsafeMutableBufferPointer { blend.apply(input: i, width: w, height: h, output: $0, outputWidth: ow, outputHeight: oh) }
                second.withUnsafeMutableBufferPointer { blend.apply(input: i, width: w, height: h, output: $0, outputWidth: ow, outputHeight: oh) }
            }
            #expect(first == history, "the first frame is its own output")
            let expected = zip(history, fresh).map { UInt8((Float($0) * 0.7 + Float($1) * 0.3).rounded()) }
            let wrong = zip(second, expected).enumerated().filter { $0.element.0 != $0.element.1 }
            #expect(wrong.isEmpty, "\(w)x\(h) → \(ow)x\(oh): \(wrong.count) channels differ, first at \(wrong.first.map { "\($0.offset): \($0.element)" } ?? "")")
        }
    }

    /// The flow's grey is made at half the input's size, from each 2×2 block: (R + 2G + B) / 4 averaged.
    @Test func theGreyIsTheBlocksMeanAtHalfSize() {
        let w = 5, h = 3
        let rgb = (0..<(w * h * 3)).map { UInt8(($0 * 37) % 256) }
        let grey = rgb.withUnsafeBytes { MotionBlend.halfGray($0, width: w, height: h) }
        #expect(grey.count == 2 * 1)
        for x in 0..<2 {
            var sum: Float = 0
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let i = ((dy) * w + 2 * x + dx) * 3
                sum += (Float(rgb[i]) + 2 * Float(rgb[i + 1]) + Float(rgb[i + 2])) / 4
            }
            #expect(abs(grey[x] - sum / 4) < 1e-4, "cell \(x): \(grey[x]) against \(sum / 4)")
        }
    }
}
