import Foundation
import StreamLensCore
import StreamLensDraw

/// Draws regions of interest on a frame: each box, a label with its score (and the object's id
/// once a tracker gave one), its keypoints and its attributes; optionally a line of text in the
/// top-left corner (the stage's frame rate and latency). The one drawing code behind
/// `lensoverlay` and lensdetect's `draw` shortcut.
struct RegionPainter {
    /// The packed RGB formats the painter draws on (lensdetect's, lensoverlay's caps).
    static let sinkCaps = "video/x-raw,format={BGRx,BGRA,RGBx,RGBA,RGB,BGR}"

    enum Coloring {
        /// Every region in this colour.
        case fixed((Double, Double, Double))
        /// A colour per label id (the palette's first is green: a one-class detector looks as
        /// lensdetect always drew).
        case perClass
        /// A colour per object id (per class while a region has none).
        case perObject
    }

    var coloring: Coloring = .fixed((0, 1, 0))
    var thickness: Double = 3
    var labels = true
    var keypoints = true
    var attributes = true
    /// How opaque a region's mask is painted in its colour (0: masks not drawn).
    var maskOpacity = 0.4

    /// The `color` property: `#rrggbb`, `class` or `id`; a StageError naming it otherwise.
    static func coloring(property text: String) throws -> Coloring {
        switch text {
        case "class": return .perClass
        case "id": return .perObject
        default:
            guard let color = RGBColour(hex: text) else { throw StageError("property color=\(text) is not a #rrggbb colour, class or id") }
            return .fixed(color.unit)
        }
    }

    /// Twelve colours far apart (green first), cycled by class or object id.
    static let palette: [(Double, Double, Double)] = [
        (0, 1, 0), (1, 0.3, 0.3), (0.3, 0.6, 1), (1, 0.85, 0), (1, 0.3, 1), (0, 1, 1),
        (1, 0.6, 0.2), (0.6, 1, 0.4), (0.7, 0.5, 1), (1, 1, 1), (0.4, 0.8, 0.7), (0.9, 0.6, 0.7),
    ]

    func color(of region: RegionOfInterest) -> (Double, Double, Double) {
        let index: Int
        switch coloring {
        case .fixed(let c): return c
        case .perClass: index = max(0, region.labelId)
        case .perObject: index = region.objectId >= 0 ? region.objectId : max(0, region.labelId)
        }
        return Self.palette[index % Self.palette.count]
    }

    /// "face 0.87", "car #12 0.64": what the region's label box says.
    static func caption(_ region: RegionOfInterest) -> String {
        var text = region.label.isEmpty ? (region.labelId >= 0 ? "class \(region.labelId)" : "object") : region.label
        if region.objectId >= 0 { text += " #\(region.objectId)" }
        if let c = region.confidence { text += String(format: " %.2f", c) }
        return text
    }

    /// Zones (lenszone's) are drawn in these colours, lines and areas apart, whatever `coloring`
    /// says (that is the boxes').
    static let lineColor = (1.0, 0.85, 0.0), areaColor = (0.0, 0.9, 1.0)

    /// Each region's mask tinted in the region's colour (`maskOpacity`), under everything else.
    private func paintMasks(_ regions: [RegionOfInterest], on frame: Frame) {
        let f = frame.format
        let bpp = f.pixelFormat.count == 3 ? 3 : 4
        let bgr = f.pixelFormat.hasPrefix("B")
        let a = Int((min(1, maskOpacity) * 256).rounded())
        guard regions.contains(where: { $0.mask != nil }) else { return }
        var outline = OutlineRaster(width: f.width, height: f.height)  // one for every region of the frame
        for region in regions {
            guard let mask = region.mask else { continue }
            outline.clear()
            outline.add(box: region.box, mask: mask)
            guard !outline.isEmpty else { continue }
            let c = color(of: region)
            let rgb = [c.0, c.1, c.2].map { Int(($0 * 255).rounded()) }
            let tint = bgr ? [rgb[2], rgb[1], rgb[0]] : rgb
            frame.pixels.withMutableBytes { bytes in
                guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
                outline.weights.withUnsafeBufferPointer { w in
                    for y in outline.y0..<outline.y1 {
                        let row = base + y * f.strides[0]
                        for x in outline.x0..<outline.x1 where w[y * f.width + x] != 0 {
                            for k in 0..<3 {
                                let p = row + x * bpp + k
                                p.pointee = UInt8((Int(p.pointee) * (256 - a) + tint[k] * a) >> 8)
                            }
                        }
                    }
                }
            }
        }
    }

    /// Draws on the frame (a writable map); nothing when there is nothing to draw. `zones`
    /// (lenszone's, from the frame) go under the boxes: each line or polygon outline, and its
    /// name and counts by its first point.
    func paint(_ regions: [RegionOfInterest], zones: [ZoneReading] = [], on frame: Frame, corner: String? = nil) {
        guard !regions.isEmpty || !zones.isEmpty || corner != nil else { return }
        if maskOpacity > 0 { paintMasks(regions, on: frame) }
        frame.pixels.withMutableBytes { bytes in
            guard let canvas = FrameCanvas(pixels: bytes, width: frame.format.width, height: frame.format.height,
                                           stride: frame.format.strides[0], pixelFormat: frame.format.pixelFormat) else { return }
            let size = max(12, Double(frame.format.height) / 40)
            for zone in zones {
                let color = zone.kind == "line" ? Self.lineColor : Self.areaColor
                let points = zone.points.compactMap { $0.count == 2 ? (x: $0[0], y: $0[1]) : nil }
                canvas.polyline(points, closed: zone.kind != "line", color: color, thickness: max(2, thickness * 2 / 3))
                if let first = points.first {
                    canvas.label(zone.countsText, x: first.x + 4, y: first.y + 4, size: size * 0.9, color: (0, 0, 0), background: color)
                }
            }
            if let corner { canvas.label(corner, x: 4, y: 4, size: size, color: (1, 1, 1), background: (0, 0, 0)) }
            for region in regions {
                let color = color(of: region)
                canvas.rectangle(x: region.x, y: region.y, width: region.width, height: region.height, color: color, thickness: thickness)
                if labels {
                    canvas.label(Self.caption(region), x: region.x, y: region.y - size * 1.3, size: size, color: (0, 0, 0), background: color)
                }
                if keypoints {
                    for p in region.keypoints { canvas.dot(x: p.x, y: p.y, radius: max(2, thickness), color: color) }
                    // A landmark model's points: many and small (468 on a face).
                    let radius = max(1, min(thickness, region.width / 100))
                    for p in region.landmarks?.points ?? [] where p.count >= 2 { canvas.dot(x: p[0], y: p[1], radius: radius, color: color) }
                }
                if attributes {
                    var y = region.y + region.height + 2
                    // Classifications first ("emotion: happy 0.93"), then the free-form attributes.
                    let classes = region.classifications.map { ($0.name, String(format: "%@ %.2f", $0.label, $0.confidence)) }
                    for (name, value) in classes + region.attributes.sorted(by: { $0.key < $1.key }) {
                        canvas.label("\(name): \(value)", x: region.x, y: y, size: size * 0.8, color: (0, 0, 0), background: color)
                        y += size * 1.05
                    }
                }
            }
        }
    }
}
