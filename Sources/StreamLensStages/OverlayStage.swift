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
        properties: [
            PropertySpec("color", .string, default: .string("class"), live: true,
                         help: "box colour: #rrggbb, class (a colour per label; the first is green) or id (a colour per object id)"),
            PropertySpec("thickness", .int(1...50), default: .int(3), live: true, help: "box line width in pixels"),
            PropertySpec("labels", .bool, default: .bool(true), live: true, help: "draw each region's label, object id and score"),
            PropertySpec("keypoints", .bool, default: .bool(true), live: true, help: "draw each region's keypoints"),
            PropertySpec("attributes", .bool, default: .bool(true), live: true, help: "draw each region's attributes under its box"),
            PropertySpec("masks", .double(0...1), default: .double(0.4), live: true,
                         help: "how opaque each region's mask (a segmentation model's outline) is painted in the region's colour, by class or id as color says (0: not drawn)"),
            PropertySpec("zones", .bool, default: .bool(true), live: true,
                         help: "draw the zones frames carry (lenszone's lines and areas, with their names and counts)"),
            PropertySpec("overlay", .bool, default: .bool(false), live: true,
                         help: "draw the frame rate and (live sources) the frame's latency in the top-left corner"),
        ],
        keys: [
            KeyBinding(["f"], .toggle(property: "overlay"), help: "frame rate / latency overlay on or off"),
            KeyBinding(["l"], .toggle(property: "labels"), help: "labels on or off"),
            KeyBinding(["z"], .toggle(property: "zones"), help: "zones (lenszone's lines and areas) on or off"),
        ])

    /// The property table, decoded once (at start and on each live change).
    struct Settings {
        var painter: RegionPainter
        var corner: Bool
        var zones: Bool

        init(_ settings: StageSettings) throws {
            let coloring = try RegionPainter.coloring(property: settings.string("color"))
            painter = RegionPainter(coloring: coloring, thickness: Double(settings.int("thickness")), labels: settings.bool("labels"),
                                    keypoints: settings.bool("keypoints"), attributes: settings.bool("attributes"),
                                    maskOpacity: settings.double("masks"))
            corner = settings.bool("overlay")
            zones = settings.bool("zones")
        }
    }

    private var settings: Settings
    private var frameRate = FrameRateMeter()
    private var notices: [StageNotice] = []

    public init(settings: StageSettings) throws {
        self.settings = try Settings(settings)
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        frameRate.frameArrived()
        let corner = settings.corner ? frameRate.cornerText(age: frame.ageOnArrival) : nil
        settings.painter.paint(frame.pixels.regionsOfInterest(), zones: settings.zones ? frame.pixels.zones() : [], on: frame, corner: corner)
        return .forward
    }

    public static func checkLiveChange(_ settings: StageSettings, changing: Set<String>) throws { _ = try Settings(settings) }

    public func settingsChanged(_ settings: StageSettings) {
        do {
            self.settings = try Settings(settings)
        } catch {
            notices.append(StageNotice(.warning, "\(error); keeping the previous drawing settings"))
        }
    }

    public func takeNotices() -> [StageNotice] { notices.take() }
}
