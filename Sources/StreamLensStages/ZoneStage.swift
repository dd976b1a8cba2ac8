import Foundation
import StreamLensCore

/// `lenszone`: counts tracked objects crossing lines and entering, staying in and leaving areas
/// (DeepStream nvdsanalytics' line crossing and ROI counting), after a tracker that gives the
/// regions their ids (`lenstrack`): a region without one (object id -1) is not counted. Boxes a
/// tracker predicted or a detector held (`estimate`) count like measured ones.
///
///     streamlens run --control - 'filesrc location=clip.mp4 ! decodebin ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-full-range.json draw=false ! lenstrack ! lenszone lines=door:640,720,640,0 areas=shop:0,0,400,0,400,300,0,300 ! lensoverlay ! lensmetadata location=zones.jsonl ! videoconvert ! autovideosink'
///
/// then `get lenszone0 counts` on the control channel. Each frame leaves with its events
/// (`crossed`, `entered`, `left`: on the frame for lensmetadata, and on the bus as
/// `streamlens-event` messages) and every zone with its counts (lensoverlay draws them).
/// Direction: "in" is crossing from the line's left to its right as seen standing on its first
/// point looking at its second, on the screen (y down) — `ZoneGeometry.Direction`.
public final class ZoneStage: Stage {
    public static let descriptor = StageDescriptor(
        name: "lenszone",
        summary: "Count tracked objects crossing lines (in/out) and entering, staying in and leaving areas; events and counts on every frame",
        example: "videotestsrc num-buffers=30 ! videoconvert ! video/x-raw,format=BGRx ! lenszone lines=mid:0.5,1,0.5,0 areas=left:0,0,0.5,0,0.5,1,0,1 coordinates=normalized ! lensoverlay ! fakesink",
        placement: .inLine,
        properties: Settings.table)

    public struct Settings: StageSettings {
        public var lines = ""
        public var areas = ""
        public var coordinates = Coordinates.pixels
        public var labels = ""
        public var anchor = Anchor.center
        public var forget = 30
        public enum Coordinates: String, Sendable, CaseIterable { case pixels, normalized }
        public enum Anchor: String, Sendable, CaseIterable { case center, bottomCenter = "bottom-center" }
        public init() {}

        public static let properties: [Property<Settings>] = [
            .string("lines", \.lines,
                    help: "directional lines: name:x1,y1,x2,y2;name2:… (in: crossing from the line's left to its right, seen from its first point towards its second, y down)"),
            .string("areas", \.areas, help: "polygons: name:x1,y1,x2,y2,x3,y3,…;name2:… (three points or more)"),
            .choice("coordinates", \.coordinates,
                    help: "what the numbers of lines and areas are: frame pixels, or normalized (0…1 of the frame's width and height)"),
            LabelFilter.property(\.labels, "count only regions with these labels", live: false),
            .choice("anchor", \.anchor,
                    help: "the point of a box that counts: its centre (faces), or the middle of its bottom edge (people's feet on the floor)"),
            .int("forget", \.forget, 1...100_000,
                 help: "frames an object may go unseen before it is forgotten (and, if it was in an area, has left it)"),
            .reading("counts", help: "the counts so far as one line of JSON: {\"door\":{\"in\":1,\"out\":0},\"shop\":{\"entered\":2,\"inside\":1,\"left\":1}}"),
        ]
    }

    /// The settings decoded and checked once, at start.
    struct Counting {
        /// Lines first, then areas, as written (pixels or 0…1).
        var zones: [Zone]
        var normalized: Bool
        /// Empty: every label.
        var labels: LabelFilter
        var bottomAnchor: Bool
        var forget: Int

        init(_ settings: Settings) throws {
            let lines = try ZoneSyntax.lines(settings.lines)
            let areas = try ZoneSyntax.areas(settings.areas)
            zones = lines + areas
            guard !zones.isEmpty else {
                throw StageError("nothing to count: set lines (name:x1,y1,x2,y2) or areas (name:x1,y1,x2,y2,x3,y3,…), or both")
            }
            try ZoneSyntax.checkNames(zones)
            normalized = settings.coordinates == .normalized
            if normalized { try ZoneSyntax.checkNormalized(zones) { $0.isLine ? "lines" : "areas" } }
            labels = LabelFilter(text: settings.labels)
            bottomAnchor = settings.anchor == .bottomCenter
            forget = settings.forget
        }
    }

    private let settings: Counting
    /// Built at start; with normalized coordinates its zones are scaled to the frame at every
    /// format (until the first, they are the 0…1 ones: the counts exist, all zero).
    private var counter: ZoneCounter
    private var framerate: Double = 0

    public init(settings: Settings) throws {
        self.settings = try Counting(settings)
        counter = ZoneCounter(zones: self.settings.zones, forget: self.settings.forget)
    }

    public func formatChanged(_ format: VideoFormat) throws {
        framerate = format.framerate.denominator > 0 ? Double(format.framerate.numerator) / Double(format.framerate.denominator) : 0
        if settings.normalized {
            counter.zones = settings.zones.map { $0.scaled(x: Double(format.width), y: Double(format.height)) }
        }
    }

    public func process(_ frame: Frame) -> FrameOutcome {
        let observations = frame.pixels.regionsOfInterest().compactMap { r -> ZoneObservation? in
            guard r.objectId >= 0, settings.labels.admits(r.label) else { return nil }
            let point = Point(x: r.x + r.width / 2, y: settings.bottomAnchor ? r.y + r.height : r.y + r.height / 2)
            return ZoneObservation(objectId: r.objectId, label: r.label, point: point)
        }
        let events = counter.update(observations, frame: frame.index, time: time(of: frame))
        frame.pixels.addEvents(events)
        frame.pixels.addZones(counter.readings)
        // Counts change only with an event: the reading is encoded then, not on every frame.
        if !events.isEmpty { countsReading = counter.countsJSON }
        return .forward
    }

    /// Seconds: the presentation time, else the frame's index at the negotiated rate (30 frames a
    /// second when the caps say none: dwell times are then only as good as that guess).
    private func time(of frame: Frame) -> Double {
        if let pts = frame.pts { return Double(pts) / 1e9 }
        return Double(frame.index) / (framerate > 0 ? framerate : 30)
    }

    private lazy var countsReading = counter.countsJSON
    public var readings: [String: String] { ["counts": countsReading] }

    public var summary: String? { counter.countsText }
}
