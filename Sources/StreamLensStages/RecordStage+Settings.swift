import Foundation
import StreamLensCore
import StreamLensGst

/// lensrecord's properties (`Settings`) and what they become when checked (`Recording`).
extension RecordStage {
    enum Trigger: String, CaseIterable { case zone, track, label }

    public struct Settings: StageSettings {
        public var pre = 5.0
        public var post = 5.0
        public var max = 300.0
        public var maxRingBytes = "64M"
        public var location = "clips/%Y%m%d-%H%M%S-{event}.mp4"
        public var on = "zone"
        public var zoneEvents = ""
        public var labels = ""
        public var record = ""
        public var maxClips = 0
        public var maxBytes = "0"
        public var maxAge = 0.0
        public var events = ""
        /// The record sinks' own properties, by name, for `events` (`RecordSinkRegistry.rows`).
        public var sinks: [String: PropertyValue] = [:]
        public init() {}

        public static let properties: [Property<Settings>] = [
            .double("pre", \.pre, 0...600, help: "seconds of video kept before the event (the clip starts at the keyframe at or before them)"),
            .double("post", \.post, 0...3600, live: true, help: "seconds of video after the last trigger (a trigger during a clip extends it)"),
            .double("max", \.max, 1...86_400, live: true, help: "seconds a clip may last at most, from its first frame"),
            .string("max-ring-bytes", \.maxRingBytes,
                    help: "bytes (or 500K, 64M: powers of 1000) the pre-roll may hold: beyond it the oldest groups of pictures go (the clip then starts later than pre)"),
            .string("location", \.location,
                    help: "file pattern: strftime fields (local wall-clock time of the trigger), {event} (what triggered it), {id}, {label} (the first event's object), {n} or %05d (a width: the clip counter, from 1); folders are made; an existing file is never overwritten (the next number, or -2, -3… added)"),
            .string("on", \.on,
                    help: "what triggers a clip, comma-separated: zone (lenszone's events on the frames), track (an object id not seen before), label (a label the previous frame did not have); none: only record= and SIGUSR1"),
            .string("zone-events", \.zoneEvents, help: "on=zone: only these event types, comma-separated: crossed, entered, left (empty: all)"),
            LabelFilter.property(\.labels, "on=track, label: only regions with these labels trigger", live: false),
            .string("record", \.record, live: true,
                    help: "set to a reason (a word: letters, digits, - _ ., e.g. manual) to trigger a clip now; reads back empty").request(),
            .int("max-clips", \.maxClips, 0...1_000_000,
                 help: "clips (with this location pattern) kept in the folders written into: the oldest are deleted (0: no limit)"),
            .string("max-bytes", \.maxBytes, help: "bytes (or 500M, 2G) those clips may take: the oldest are deleted (0: no limit)"),
            .double("max-age", \.maxAge, 0...31_536_000, help: "seconds a clip is kept: older ones are deleted when a clip is written (0: no limit)"),
            .string("events", \.events,
                    help: "where each clip's record also goes, as lensmetadata's location: mqtt://HOST:PORT/TOPIC, http://…, a file (empty: the bus and the API only)"),
            .reading("clips", help: "clips written so far"),
            .reading("recording", help: "true while a clip is being recorded"),
        ] + RecordSinkRegistry.rows(\.sinks)
    }

    /// The settings checked and decoded, at start.
    struct Recording {
        var recorder: ClipRecorder<EncodedFrame>.Settings
        var pattern: FilePattern
        var triggers: Set<Trigger>
        var zoneEvents: Set<String>?
        var labels: LabelFilter
        var retention: ClipRetention.Limits

        init(_ settings: Settings) throws {
            let ring = try SnapshotStage.Snapping.bytes(settings.maxRingBytes, property: "max-ring-bytes")
            guard ring > 0 else { throw StageError("property max-ring-bytes=0: the pre-roll needs room (e.g. 64M)") }
            recorder = .init(pre: settings.pre, post: settings.post, max: settings.max, maxRingBytes: ring)
            pattern = try FilePattern(settings.location, property: "location", extensions: ["mp4"], fields: ["event", "id", "label", "n"],
                                      counter: true, example: "clips/%Y%m%d-%H%M%S-{event}.mp4")
            triggers = []
            for name in commaList(settings.on) where name != "none" {
                guard let t = Trigger(rawValue: name) else {
                    throw StageError("property on=\(settings.on): '\(name)' is not a trigger; they are \(Trigger.allCases.map(\.rawValue).joined(separator: ", ")), or none")
                }
                triggers.insert(t)
            }
            let events = commaList(settings.zoneEvents)
            for e in events where !SnapshotStage.zoneEventTypes.contains(e) {
                throw StageError("property zone-events=\(settings.zoneEvents): '\(e)' is not an event type; they are \(SnapshotStage.zoneEventTypes.joined(separator: ", "))")
            }
            zoneEvents = events.isEmpty ? nil : Set(events)
            labels = LabelFilter(text: settings.labels)
            retention = .init(count: settings.maxClips, bytes: try SnapshotStage.Snapping.bytes(settings.maxBytes, property: "max-bytes"),
                              age: settings.maxAge)
        }
    }
}
