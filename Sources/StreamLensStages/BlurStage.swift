import Foundation
import StreamLensCore

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
        properties: [
            PropertySpec("method", .choice(RegionMasking.Method.allCases.map(\.rawValue)), default: .string("pixelate"), live: true,
                         help: "pixelate (blocks), gaussian (blur) or fill (a solid colour: the only one nothing can be recovered from)"),
            PropertySpec("block", .int(0...512), default: .int(0), live: true,
                         help: "pixelate block / blur radius in pixels (0: a sixth of the region's shorter side)"),
            PropertySpec("color", .string, default: .string("#000000"), live: true, help: "fill colour, #rrggbb"),
            PropertySpec("margin", .double(0...2), default: .double(0.15), live: true,
                         help: "grow each region by this fraction of its larger side, on every side"),
            LabelFilter.property("hide only regions with these labels", live: true),
            PropertySpec("hold", .int(0...10000), default: .int(15), live: true,
                         help: "frames an object is still hidden after it stops arriving (a tracked one at its last velocity)"),
        ])

    struct Settings {
        var method: RegionMasking.Method
        var block: Int
        var color: [UInt8]
        var margin: Double
        var labels: LabelFilter
        var hold: Int

        init(_ settings: StageSettings) throws {
            method = RegionMasking.Method(rawValue: settings.string("method")) ?? .pixelate
            block = settings.int("block")
            let text = settings.string("color")
            guard let c = RGBColour(hex: text) else { throw StageError("property color=\(text) is not a #rrggbb colour") }
            color = [c.red, c.green, c.blue]
            margin = settings.double("margin")
            labels = LabelFilter(settings)
            hold = settings.int("hold")
        }
    }

    /// What was hidden lately: tracked objects by id (box, velocity per frame, frame last seen),
    /// untracked regions by place.
    private struct Seen { var box: Box; var velocity: Point; var frame: Int }
    private var tracked: [Int: Seen] = [:]
    private var untracked: [Seen] = []
    private var settings: Settings
    private var notices: [StageNotice] = []
    private var hidden = 0, heldHidden = 0

    public init(settings: StageSettings) throws {
        self.settings = try Settings(settings)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let n = frame.index
        let regions = frame.pixels.regionsOfInterest().filter { settings.labels.admits($0.label) }
        var boxes = regions.map(\.box)
        // Held: objects seen lately that did not arrive on this frame.
        let present = Set(regions.map(\.objectId).filter { $0 >= 0 })
        for (id, seen) in tracked where !present.contains(id) && n - seen.frame <= settings.hold {
            let k = Double(n - seen.frame)
            var b = seen.box
            b.xMin += seen.velocity.x * k; b.xMax += seen.velocity.x * k
            b.yMin += seen.velocity.y * k; b.yMax += seen.velocity.y * k
            boxes.append(b)
        }
        let untrackedNow = regions.filter { $0.objectId < 0 }.map(\.box)
        for seen in untracked where n - seen.frame <= settings.hold && seen.frame < n
            && !untrackedNow.contains(where: { $0.iou(seen.box) > 0.3 }) && !regions.contains(where: { $0.box.iou(seen.box) > 0.3 }) {
            boxes.append(seen.box)
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
            tracked[region.objectId] = Seen(box: region.box, velocity: velocity, frame: n)
        }
        tracked = tracked.filter { n - $0.value.frame <= settings.hold }
        untracked = untracked.filter { seen in n - seen.frame <= settings.hold && !untrackedNow.contains { $0.iou(seen.box) > 0.3 } }
            + untrackedNow.map { Seen(box: $0, velocity: Point(x: 0, y: 0), frame: n) }
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

    public func settingsChanged(_ settings: StageSettings) {
        do { self.settings = try Settings(settings) } catch { notices.append(StageNotice(.warning, "\(error); keeping the previous settings")) }
    }

    public func takeNotices() -> [StageNotice] { notices.take() }

    public var summary: String? { "\(hidden) regions hidden, \(heldHidden) of them held (no longer arriving)" }
}
