import Foundation
import StreamLensCore
import StreamLensGst

/// `lensblur`: hides every region of interest that reaches it — pixelated, blurred or filled —
/// grown by a margin; with `labels`, only those labels. Privacy that holds where detections do
/// not: every region is hidden, tracked or not, confirmed or not; and an object that stops
/// arriving (the detector missed it and no tracker predicts it, or the tracker gave it up) stays
/// hidden for `hold` more frames — a tracked one moving on at its last velocity, an untracked
/// one where it was. What it cannot hide: an object never detected at all, and one missed for
/// longer than `hold` (README, "Privacy").
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false interval=3 ! lenstrack ! lensblur ! videoconvert ! x264enc ! mp4mux ! filesink location=blurred.mp4'
public final class BlurStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensblur",
        summary: "Hide the regions of interest (pixelate, blur or fill), and keep hiding an object the detector misses for a few frames",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false ! lenstrack ! lensblur ! fakesink",
        sinkCaps: RegionPainter.sinkCaps,
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var method = RegionMasking.Method.pixelate
        public var block = 0
        public var color = "#000000"
        public var margin = 0.15
        public var labels = ""
        public var hold = 15
        public var shape = Shape.box
        public var regions = RegionMask.Side.inside
        public var replace = ""
        public enum Shape: String, Sendable, CaseIterable { case box, mask }
        public init() {}

        public static let properties: [Property<Settings>] = [
            .choice("method", \.method, live: true,
                    help: "pixelate (blocks), gaussian (blur) or fill (a solid colour: the only one nothing can be recovered from)"),
            .int("block", \.block, 0...512, live: true, help: "pixelate block / blur radius in pixels (0: a sixth of the region's shorter side)"),
            .string("color", \.color, live: true, help: "fill colour, #rrggbb"),
            .double("margin", \.margin, 0...2, live: true,
                    help: "grow each region's box by this fraction of its larger side, on every side (not a mask: shape=mask follows the outline itself)"),
            LabelFilter.property(\.labels, "hide only regions with these labels", live: true),
            .int("hold", \.hold, 0...10000, live: true, help: "frames an object is still hidden after it stops arriving (a tracked one at its last velocity)"),
            .choice("shape", \.shape, live: true,
                    help: "box: hide each region's rectangle; mask: its outline, where the region has a mask (a segmentation model's: lensdetect model=Models/person-segmentation.json), its rectangle otherwise"),
            .choice("regions", \.regions, live: true,
                    help: "inside: hide the regions; outside: everything but them (a person kept, the background hidden: a background blur)"),
            .string("replace", \.replace, live: true,
                    help: "instead of the method: a picture file (cut to the frame's aspect ratio, centred, and scaled to it) or a #rrggbb colour in place of what is hidden (with shape=mask regions=outside: a virtual background)"),
        ]
    }

    /// The settings as the frames use them: colours parsed, the replacement picture checked.
    struct Hiding {
        var method: RegionMasking.Method
        var block: Int
        var color: [UInt8]
        var margin: Double
        var labels: LabelFilter
        var hold: Int
        var byMask: Bool
        var side: RegionMask.Side
        /// `replace`: nothing, a colour (frame order later) or a picture file.
        var replace: Replacement?
        enum Replacement: Equatable { case colour([UInt8]), picture(String) }

        /// `previous`: what these replace (a live change), whose picture was checked.
        init(_ settings: Settings, previous: Hiding? = nil) throws {
            byMask = settings.shape == .mask
            side = settings.regions
            let r = settings.replace
            if r.isEmpty {
                replace = nil
            } else if r.hasPrefix("#") {
                guard let c = RGBColour(hex: r) else { throw StageError("property replace=\(r) is not a #rrggbb colour") }
                replace = .colour([c.red, c.green, c.blue])
            } else {
                guard FileManager.default.fileExists(atPath: r) else { throw StageError("property replace=\(r): no such picture file") }
                try InputFile.check(r, what: "picture")
                // Decoded now, small, so a file that is no picture is refused at start (or, live,
                // the change is refused), not found out at the first frame; once per file named.
                if previous?.replace != .picture(r) { _ = try StillImage.loadRGB(path: r, width: 8, height: 8) }
                replace = .picture(r)
            }
            method = settings.method
            block = settings.block
            guard let c = RGBColour(hex: settings.color) else { throw StageError("property color=\(settings.color) is not a #rrggbb colour") }
            color = [c.red, c.green, c.blue]
            margin = settings.margin
            labels = LabelFilter(text: settings.labels)
            hold = settings.hold
        }
    }

    /// What was hidden lately: tracked objects by id (box, velocity per frame, frame last seen),
    /// untracked regions by place.
    private struct Seen { var box: Box; var velocity: Point; var frame: Int; var mask: ObjectMask? = nil }
    private var tracked: [Int: Seen] = [:]
    private var untracked: [Seen] = []
    private var settings: Hiding
    private var notices: [StageNotice] = []
    private var hidden = 0, heldHidden = 0

    public init(settings: Settings) throws {
        self.settings = try Hiding(settings)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let n = frame.index
        let regions = frame.pixels.regionsOfInterest().filter { settings.labels.admits($0.label) }
        var boxes = regions.map(\.box)
        var masks = regions.map(\.mask)
        // Held: objects seen lately that did not arrive on this frame.
        let present = Set(regions.map(\.objectId).filter { $0 >= 0 })
        for (id, seen) in tracked where !present.contains(id) && n - seen.frame <= settings.hold {
            let k = Double(n - seen.frame)
            var b = seen.box
            b.xMin += seen.velocity.x * k; b.xMax += seen.velocity.x * k
            b.yMin += seen.velocity.y * k; b.yMax += seen.velocity.y * k
            boxes.append(b)
            masks.append(seen.mask)
        }
        let untrackedNow = regions.filter { $0.objectId < 0 }.map(\.box)
        for seen in untracked where n - seen.frame <= settings.hold && seen.frame < n
            && !untrackedNow.contains(where: { $0.iou(seen.box) > 0.3 }) && !regions.contains(where: { $0.box.iou(seen.box) > 0.3 }) {
            boxes.append(seen.box)
            masks.append(seen.mask)
        }
        heldHidden += boxes.count - regions.count
        hidden += boxes.count
        // Remember.
        for region in regions where region.objectId >= 0 {
            var velocity = Point(x: 0, y: 0)
            if let last = tracked[region.objectId], n > last.frame {
                let k = Double(n - last.frame)
                velocity = Point(x: (region.box.center.x - last.box.center.x) / k, y: (region.box.center.y - last.box.center.y) / k)
            }
            tracked[region.objectId] = Seen(box: region.box, velocity: velocity, frame: n, mask: region.mask)
        }
        tracked = tracked.filter { n - $0.value.frame <= settings.hold }
        untracked = untracked.filter { seen in n - seen.frame <= settings.hold && !untrackedNow.contains { $0.iou(seen.box) > 0.3 } }
            + regions.filter { $0.objectId < 0 }.map { Seen(box: $0.box, velocity: Point(x: 0, y: 0), frame: n, mask: $0.mask) }
        if settings.byMask || settings.side == .outside || settings.replace != nil {
            hideByOutline(frame, boxes: boxes, masks: settings.byMask ? masks : masks.map { _ in nil })
            return .forward
        }
        guard !boxes.isEmpty else { return .forward }
        let f = frame.format
        let bpp = f.pixelFormat.count == 3 ? 3 : 4
        // The fill colour in the frame's channel order (BGR formats: blue first).
        let rgb = settings.color
        let color = f.pixelFormat.hasPrefix("B") ? [rgb[2], rgb[1], rgb[0]] : rgb
        frame.pixels.withMutableBytes { bytes in
            for box in boxes {
                guard let rect = RegionMasking.Rect(box, margin: settings.margin, width: f.width, height: f.height) else { continue }
                RegionMasking.apply(settings.method, to: rect, pixels: bytes, stride: f.strides[0], bytesPerPixel: bpp,
                                    strength: settings.block, color: color)
            }
        }
        return .forward
    }

    /// The replacement picture, in the frame's size and channel order, once per file and size.
    private var picture: (key: String, pixels: [UInt8])?

    /// Hides by an outline (`OutlineRaster`): each region's mask (or its box, grown by the
    /// margin), on the side asked; the effect worked on the outline's rectangle (the whole frame
    /// outside), then kept only where the outline's weight says.
    private func hideByOutline(_ frame: Frame, boxes: [Box], masks: [ObjectMask?]) {
        let f = frame.format
        let bpp = f.pixelFormat.count == 3 ? 3 : 4
        var raster = OutlineRaster(width: f.width, height: f.height)
        for (box, mask) in zip(boxes, masks) {
            // `margin` grows boxes; a mask is the outline itself (a fraction of a person's box
            // would leave a wide band of the background around them).
            let g = mask == nil ? max(box.width, box.height) * settings.margin : 0
            raster.add(box: Box(xMin: box.xMin - g, yMin: box.yMin - g, xMax: box.xMax + g, yMax: box.yMax + g), mask: mask)
        }
        let outside = settings.side == .outside
        if raster.isEmpty && !outside { return }
        let rect = outside ? RegionMasking.Rect(Box(xMin: 0, yMin: 0, xMax: Double(f.width), yMax: Double(f.height)), margin: 0, width: f.width, height: f.height)
                           : RegionMasking.Rect(Box(xMin: Double(raster.x0), yMin: Double(raster.y0), xMax: Double(raster.x1), yMax: Double(raster.y1)),
                                                margin: 0, width: f.width, height: f.height)
        guard let rect else { return }
        let order = { (rgb: [UInt8]) in f.pixelFormat.hasPrefix("B") ? [rgb[2], rgb[1], rgb[0]] : rgb }
        var replacement: [UInt8]?
        if case .picture(let path) = settings.replace {
            let key = "\(path) \(f.width)x\(f.height) \(f.pixelFormat)"
            if picture?.key != key {
                do {
                    let rgb = try StillImage.loadRGB(path: path, width: f.width, height: f.height, cover: true)
                    var px = [UInt8](repeating: 255, count: f.width * f.height * bpp)
                    for i in 0..<(f.width * f.height) {
                        let c = order([rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]])
                        px[i * bpp] = c[0]; px[i * bpp + 1] = c[1]; px[i * bpp + 2] = c[2]
                    }
                    picture = (key, px)
                } catch {
                    notices.append(StageNotice(.warning, "\(error); filling with the colour instead"))
                    picture = (key, [])
                }
            }
            replacement = picture?.pixels.isEmpty == false ? picture?.pixels : nil
        }
        var method = settings.method, color = order(settings.color)
        if case .colour(let c) = settings.replace { method = .fill; color = order(c) }
        let channels = min(bpp, 3)
        frame.pixels.withMutableBytes { bytes in
            guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
            let stride = f.strides[0], rowBytes = rect.width * bpp
            raster.weights.withUnsafeBufferPointer { w in
                // Puts `source`'s pixels into the rectangle at weight a (0…255): all of them at 255,
                // none at 0, a blend in between. a is the outline's weight (inverted outside), or
                // its complement with `complement` (putting back what was there). `source` row j
                // starts `sourceStride` × j bytes on, its pixels `step` bytes apart (0: one colour).
                func put(_ source: UnsafePointer<UInt8>, sourceStride: Int, step: Int, complement: Bool) {
                    let invert = outside != complement
                    for j in 0..<rect.height {
                        let row = base + (rect.y0 + j) * stride + rect.x0 * bpp
                        let weights = w.baseAddress! + (rect.y0 + j) * f.width + rect.x0
                        let from = source + j * sourceStride
                        for i in 0..<rect.width {
                            let a = invert ? 255 - Int(weights[i]) : Int(weights[i])
                            if a == 0 { continue }
                            let p = row + i * bpp, q = from + i * step
                            if a == 255 {
                                p[0] = q[0]; p[1] = q[1]; p[2] = q[2]
                            } else {
                                for c in 0..<channels { p[c] = UInt8((Int(p[c]) * (255 - a) + Int(q[c]) * a + 127) / 255) }
                            }
                        }
                    }
                }
                if let replacement {
                    // A picture: blended straight in, nothing copied.
                    replacement.withUnsafeBufferPointer { r in
                        put(r.baseAddress! + (rect.y0 * f.width + rect.x0) * bpp, sourceStride: f.width * bpp, step: bpp, complement: false)
                    }
                } else if method == .fill {
                    let pixel = color + [UInt8](repeating: 255, count: max(0, 4 - color.count))
                    pixel.withUnsafeBufferPointer { put($0.baseAddress!, sourceStride: 0, step: 0, complement: false) }
                } else {
                    // Pixelate and blur read their neighbours: worked in place on the rectangle, then
                    // what was there put back where the weight says.
                    var original = [UInt8](repeating: 0, count: rowBytes * rect.height)
                    for j in 0..<rect.height { memcpy(&original[j * rowBytes], base + (rect.y0 + j) * stride + rect.x0 * bpp, rowBytes) }
                    RegionMasking.apply(method, to: rect, pixels: bytes, stride: stride, bytesPerPixel: bpp, strength: settings.block, color: color)
                    original.withUnsafeBufferPointer { put($0.baseAddress!, sourceStride: rowBytes, step: bpp, complement: true) }
                }
            }
        }
    }

    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws { _ = try Hiding(settings) }

    public func settingsChanged(_ settings: Settings) {
        do { self.settings = try Hiding(settings, previous: self.settings) } catch { notices.append(StageNotice(.warning, "\(error); keeping the previous settings")) }
    }

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var summary: String? { "\(hidden) regions hidden, \(heldHidden) of them held (no longer arriving)" }
}
