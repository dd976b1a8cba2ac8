import Foundation
import StreamLensCore

/// `lensoverlay`: draws whatever regions of interest reach it — boxes, labels with scores,
/// object ids, keypoints, attributes — and the zones frames carry (lenszone's lines and areas
/// with their counts, under the boxes), after any producer of regions (lensdetect draw=false, a
/// tracker, an application's own stage, a GStreamer element that adds the meta). The frame
/// goes on unchanged but for the drawing.
///
///     streamlens run 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false ! lensoverlay ! videoconvert ! autovideosink'
public final class OverlayStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lensoverlay",
        summary: "Draw the regions of interest on the frames: boxes, labels and scores, object ids, keypoints, attributes; and lenszone's zones",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect draw=false ! lensoverlay ! fakesink",
        sinkCaps: RegionPainter.sinkCaps,
        placement: .inLine,
        properties: Settings.table,
        keys: [
            KeyBinding(["f"], .toggle(property: "overlay"), help: "frame rate / latency overlay on or off"),
            KeyBinding(["l"], .toggle(property: "labels"), help: "labels on or off"),
            KeyBinding(["z"], .toggle(property: "zones"), help: "zones (lenszone's lines and areas) on or off"),
        ])

    public struct Settings: StageSettings {
        public var color = "class"
        public var thickness = 3
        public var labels = true
        public var keypoints = true
        public var attributes = true
        public var masks = 0.4
        public var zones = true
        public var overlay = false
        public init() {}

        public static let properties: [Property<Settings>] = [
            .string("color", \.color, live: true,
                    help: "box colour: #rrggbb, class (a colour per label; the first is green) or id (a colour per object id)"),
            .int("thickness", \.thickness, 1...50, live: true, help: "box line width in pixels"),
            .bool("labels", \.labels, live: true, help: "draw each region's label, object id and score"),
            .bool("keypoints", \.keypoints, live: true, help: "draw each region's keypoints"),
            .bool("attributes", \.attributes, live: true, help: "draw each region's attributes under its box"),
            .double("masks", \.masks, 0...1, live: true,
                    help: "how opaque each region's mask (a segmentation model's outline) is painted in the region's colour, by class or id as color says (0: not drawn)"),
            .bool("zones", \.zones, live: true, help: "draw the zones frames carry (lenszone's lines and areas, with their names and counts)"),
            .bool("overlay", \.overlay, live: true, help: "draw the frame rate and (live sources) the frame's latency in the top-left corner"),
        ]
    }

    /// The settings as the frames use them (the colour decoded), made at start and on each change.
    struct Drawing {
        var painter: RegionPainter
        var corner: Bool
        var zones: Bool

        init(_ settings: Settings) throws {
            let coloring = try RegionPainter.coloring(property: settings.color)
            painter = RegionPainter(coloring: coloring, thickness: Double(settings.thickness), labels: settings.labels,
                                    keypoints: settings.keypoints, attributes: settings.attributes, maskOpacity: settings.masks)
            corner = settings.overlay
            zones = settings.zones
        }
    }

    private var settings: Drawing
    private var frameRate = FrameRateMeter()
    private var notices: [StageNotice] = []

    public init(settings: Settings) throws {
        self.settings = try Drawing(settings)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        frameRate.frameArrived()
        let corner = settings.corner ? frameRate.cornerText(age: frame.ageOnArrival) : nil
        settings.painter.paint(frame.pixels.regionsOfInterest(), zones: settings.zones ? frame.pixels.zones() : [], on: frame, corner: corner)
        return .forward
    }

    public static func checkLiveChange(_ settings: Settings, changing: Set<String>) throws { _ = try Drawing(settings) }

    public func settingsChanged(_ settings: Settings) {
        do {
            self.settings = try Drawing(settings)
        } catch {
            notices.append(StageNotice(.warning, "\(error); keeping the previous drawing settings"))
        }
    }

    public func takeNotices() -> [StageNotice] { notices.take() }
}
