/// A region's crop, sampled out of a packed RGB-family frame into a second model's input:
/// each input pixel's centre mapped into the frame through the crop's placement (rotation
/// included), read bilinearly, edges clamped (MediaPipe's ImageToTensor replicates the border
/// the same way). The output is packed RGB, or one grey channel (OpenCV's weights).
public enum CropSampling {
    /// `frame`: `width` × `height` pixels of `bytesPerPixel` (3 or 4) with rows `stride` apart,
    /// red at byte `red` and blue at `blue` of a pixel (RGB: 0, 2; BGR/BGRx: 2, 0).
    public struct Source {
        public var width: Int, height: Int, stride: Int, bytesPerPixel: Int, red: Int, blue: Int
        public init(width: Int, height: Int, stride: Int, pixelFormat: String) {
            self.width = width; self.height = height; self.stride = stride
            bytesPerPixel = pixelFormat.count == 3 ? 3 : 4
            (red, blue) = pixelFormat.hasPrefix("B") ? (2, 0) : (0, 2)
        }
    }

    /// Fills `output` (outWidth × outHeight × (gray ? 1 : 3) bytes, packed, no row padding).
    /// Columns past the placement's `filled` part of the width are `padding` (one value a
    /// channel, R, G, B or grey).
    public static func sample(_ frame: UnsafeRawBufferPointer, _ source: Source, placement: ObjectCrop.Placement,
                              outWidth: Int, outHeight: Int, gray: Bool, padding: [UInt8] = [0, 0, 0], into output: inout [UInt8]) {
        let channels = gray ? 1 : 3
        if output.count != outWidth * outHeight * channels { output = [UInt8](repeating: 0, count: outWidth * outHeight * channels) }
        guard let base = frame.baseAddress?.assumingMemoryBound(to: UInt8.self), source.width > 0, source.height > 0,
              frame.count >= (source.height - 1) * source.stride + source.width * source.bytesPerPixel else { return }
        let bpp = source.bytesPerPixel, (r, b) = (source.red, source.blue)
        // The placement is affine: frame = origin + u·du + v·dv, stepping per input pixel.
        let origin = placement.frame(0.5 / Double(outWidth), 0.5 / Double(outHeight))
        let right = placement.frame(1.5 / Double(outWidth), 0.5 / Double(outHeight))
        let down = placement.frame(0.5 / Double(outWidth), 1.5 / Double(outHeight))
        let du = (x: right.x - origin.x, y: right.y - origin.y), dv = (x: down.x - origin.x, y: down.y - origin.y)
        let maxX = Double(source.width - 1), maxY = Double(source.height - 1)
        let columns = min(outWidth, max(0, Int((placement.filled * Double(outWidth)).rounded())))
        let pad = (0..<channels).map { padding.indices.contains($0) ? padding[$0] : 0 }
        output.withUnsafeMutableBufferPointer { out in
            var o = 0
            for v in 0..<outHeight {
                defer {
                    for _ in columns..<outWidth {
                        for c in 0..<channels { out[o + c] = pad[c] }
                        o += channels
                    }
                }
                // Pixel centres: frame pixel i covers i…i+1, its centre is i + 0.5.
                var x = origin.x + Double(v) * dv.x - 0.5, y = origin.y + Double(v) * dv.y - 0.5
                for _ in 0..<columns {
                    let cx = min(max(x, 0), maxX), cy = min(max(y, 0), maxY)
                    let x0 = Int(cx), y0 = Int(cy)
                    let x1 = min(x0 + 1, source.width - 1), y1 = min(y0 + 1, source.height - 1)
                    let fx = cx - Double(x0), fy = cy - Double(y0)
                    let p00 = base + y0 * source.stride + x0 * bpp, p01 = base + y0 * source.stride + x1 * bpp
                    let p10 = base + y1 * source.stride + x0 * bpp, p11 = base + y1 * source.stride + x1 * bpp
                    func at(_ c: Int) -> Double {
                        let top = Double(p00[c]) + (Double(p01[c]) - Double(p00[c])) * fx
                        let bottom = Double(p10[c]) + (Double(p11[c]) - Double(p10[c])) * fx
                        return top + (bottom - top) * fy
                    }
                    let (red, green, blue) = (at(r), at(1), at(b))
                    if gray {
                        out[o] = UInt8(min(255, max(0, (0.299 * red + 0.587 * green + 0.114 * blue).rounded())))
                    } else {
                        out[o] = UInt8(min(255, max(0, red.rounded())))
                        out[o + 1] = UInt8(min(255, max(0, green.rounded())))
                        out[o + 2] = UInt8(min(255, max(0, blue.rounded())))
                    }
                    o += channels
                    x += du.x; y += du.y
                }
            }
        }
    }
}
