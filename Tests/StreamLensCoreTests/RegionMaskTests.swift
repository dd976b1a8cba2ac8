import Foundation
import Testing
@testable import StreamLensCore

/// The mask that limits lensstylize to regions of interest (regions=inside|outside): its weights,
/// row by row, and the blend through it.
@Suite struct RegionMaskTests {
    typealias Image = ResamplingTests.Image

    @Test func weightRampsLinearlyInsideTheEdge() {
        #expect(RegionMask.weight(distanceInside: -3, feather: 8) == 0)
        #expect(RegionMask.weight(distanceInside: 0, feather: 8) == 0)
        #expect(RegionMask.weight(distanceInside: 0.5, feather: 8) == 0.0625)
        #expect(RegionMask.weight(distanceInside: 4, feather: 8) == 0.5)
        #expect(RegionMask.weight(distanceInside: 8, feather: 8) == 1)
        #expect(RegionMask.weight(distanceInside: 300, feather: 8) == 1)
        // A hard edge: all or nothing at the edge.
        #expect(RegionMask.weight(distanceInside: 0.01, feather: 0) == 1)
        #expect(RegionMask.weight(distanceInside: 0, feather: 0) == 0)
        #expect(RegionMask.weight(distanceInside: -0.01, feather: 0) == 0)
    }

    /// `fillRow` gives, for the columns it names, what the per-pixel definition gives, and the
    /// background everywhere else: overlapping boxes, one partly off the frame, a degenerate one.
    @Test func rowsAgreeWithThePixelDefinition() {
        let (width, height) = (40, 30)
        let boxes = [Box(xMin: 3.4, yMin: 2.5, xMax: 20.2, yMax: 17.8), Box(xMin: 15, yMin: 10, xMax: 55, yMax: 26),
                     Box(xMin: .nan, yMin: 0, xMax: 10, yMax: 10), Box(xMin: 30, yMin: 5, xMax: 30, yMax: 9)]
        for side in RegionMask.Side.allCases {
            for feather in [0, 1, 4, 8] {
                let mask = RegionMask(boxes: boxes, side: side, feather: feather, width: width, height: height)
                #expect(mask.boxes.count == 2, "non-finite and empty boxes are left out")
                var row = [Int16](repeating: -1, count: width)
                for y in 0..<height {
                    let span = row.withUnsafeMutableBufferPointer { mask.fillRow(y, width: width, scale: 128, into: $0.baseAddress!) }
                    for x in 0..<width {
                        let expected = mask.weight(x: x, y: y) * 128
                        let got = span.contains(x) ? Double(row[x]) : Double(mask.background(scale: 128))
                        #expect(abs(got - expected) <= 0.5 + 1e-9, "\(side) feather \(feather) at \(x),\(y): \(got) vs \(expected)")
                    }
                }
            }
        }
        // Outside every box: 0 inside-mode, full outside-mode; deep inside: the reverse.
        let inside = RegionMask(boxes: boxes, side: .inside, feather: 4, width: width, height: height)
        let outside = RegionMask(boxes: boxes, side: .outside, feather: 4, width: width, height: height)
        #expect(inside.weight(x: 1, y: 1) == 0 && outside.weight(x: 1, y: 1) == 1)
        #expect(inside.weight(x: 10, y: 9) == 1 && outside.weight(x: 10, y: 9) == 0)
        #expect(abs(inside.weight(x: 4, y: 9) - 0.275) < 1e-9, "centre 4.5: 1.1 px inside the left edge, of a 4 px ramp")
    }

    /// Through the mask, pixels of weight 0 are not touched (bit for bit, the fourth byte too),
    /// weight 1 is the stylized picture exactly, and the ramp lies in between, growing inward.
    @Test func blendThroughTheMask() {
        let (w, h) = (64, 48)
        let styled = Image(width: 32, height: 24, layout: .rgb) { x, y, c in UInt8(200 - 3 * x - 2 * y + 10 * c) }
        let box = Box(xMin: 10, yMin: 8, xMax: 42, yMax: 40)
        for format in ["RGB", "BGRx"] {
            let layout = PackedRGBLayout(pixelFormat: format)!
            func frame() -> Image { Image(width: w, height: h, layout: layout) { x, y, c in UInt8((x * 7 + y * 5 + c * 11) % 256) } }
            let original = frame(), full = frame()
            styled.withPlane { s in full.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 1) } }
            for side in RegionMask.Side.allCases {
                let mask = RegionMask(boxes: [box], side: side, feather: 6, width: w, height: h)
                let out = frame()
                styled.withPlane { s in out.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 1, mask: mask) } }
                var ramp: [Double] = []
                for y in 0..<h { for x in 0..<w {
                    let weight = mask.weight(x: x, y: y)
                    if weight == 0 {
                        #expect(out.rgb(x, y) == original.rgb(x, y), "\(format) \(side) \(x),\(y) changed")
                    } else if weight == 1 {
                        #expect(out.rgb(x, y) == full.rgb(x, y), "\(format) \(side) \(x),\(y) not fully stylized")
                    } else {
                        for c in 0..<3 {
                            let expected = Double(original.rgb(x, y)[c]) + weight * (Double(full.rgb(x, y)[c]) - Double(original.rgb(x, y)[c]))
                            #expect(abs(Double(out.rgb(x, y)[c]) - expected) <= 1.5, "\(format) \(side) \(x),\(y)")
                        }
                    }
                    if y == 24 && x >= 10 && x < 17 { ramp.append(weight) }
                } }
                if layout.bytesPerPixel == 4 {
                    #expect(stride(from: 3, to: out.bytes.count, by: 4).allSatisfy { out.bytes[$0] == 77 }, "the fourth byte is left alone")
                }
                // Columns 10…16 of the middle row: the ramp's 6 px, then full (inverted outside).
                let twelfths: [Double] = side == .inside ? [1, 3, 5, 7, 9, 11, 12] : [11, 9, 7, 5, 3, 1, 0]
                let expected = twelfths.map { $0 / 12 }
                #expect(zip(ramp, expected).allSatisfy { abs($0 - $1) < 1e-9 }, "\(side): \(ramp)")
            }
        }
        // A mask whose boxes cover nothing leaves the frame as it was (inside) or stylizes it all (outside).
        let original = Image(width: w, height: h, layout: .rgb) { x, _, _ in UInt8(x) }
        for side in RegionMask.Side.allCases {
            let out = Image(width: w, height: h, layout: .rgb) { x, _, _ in UInt8(x) }, full = Image(width: w, height: h, layout: .rgb) { x, _, _ in UInt8(x) }
            let mask = RegionMask(boxes: [Box(xMin: 100, yMin: 100, xMax: 120, yMax: 120)], side: side, feather: 8, width: w, height: h)
            styled.withPlane { s in
                out.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 0.6, mask: mask) }
                full.withPlane { Resampling.bilinearBlend(s, onto: $0, strength: 0.6) }
            }
            #expect(out.bytes == (side == .inside ? original.bytes : full.bytes), "\(side)")
        }
    }
}
