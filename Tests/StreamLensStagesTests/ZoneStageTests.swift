import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lenszone on in-memory frames whose regions carry ids set here (what a tracker upstream does).
@Suite(.serialized) struct ZoneStageTests {
    static let (w, h) = (320, 240)
    static let frame = [UInt8](repeating: 0, count: w * h * 4)

    /// A 20×20 face centred at (x, y), tracked as `id`.
    static func face(_ x: Double, _ y: Double, id: Int = 5, estimate: RegionOfInterest.Estimate? = nil) -> RegionOfInterest {
        RegionOfInterest(label: "face", labelId: 0, x: x - 10, y: y - 10, width: 20, height: 20, confidence: 0.9, objectId: id, estimate: estimate)
    }

    static func counts(_ driver: StageDriver<ZoneStage>) throws -> [String: [String: Int]] {
        let json = try #require(driver.stage.readings["counts"])
        return try #require(try JSONDecoder().decode([String: [String: Int]].self, from: Data(json.utf8)))
    }

    /// A line drawn upwards through the middle: a face moving right crosses it once, "in"; moving
    /// back, "out". Every frame carries the zone and its counts.
    @Test func aFaceCrossingTheLineIsOneEventEachWay() throws {
        let driver = try StageDriver(ZoneStage.self, settings: ["lines": .string("mid:160,240,160,0")])
        try driver.start(.packed("BGRx", width: Self.w, height: Self.h))
        var events: [FrameEvent] = []
        var last: MemoryPixels?
        for i in 0..<30 {
            let out = driver.push(Self.frame, regions: [Self.face(100 + Double(i) * 4, 120)])
            events += out.flatMap { $0.pixels.events() }
            last = out.last?.pixels
        }
        try #require(events.count == 1, "\(events)")
        #expect(events[0].type == "crossed" && events[0].zone == "mid" && events[0].direction == "in" && events[0].objectId == 5 && events[0].label == "face")
        // 100 + 4i passes 160 between frames 15 and 16 (x 160 is on the line: neither side).
        #expect(events[0].time.map { abs($0 - 16.0 / 30) < 1e-6 } == true, "\(events[0])")
        #expect(try Self.counts(driver) == ["mid": ["in": 1, "out": 0]])
        let zones = try #require(last?.zones())
        #expect(zones == [ZoneReading(name: "mid", kind: "line", points: [[160, 240], [160, 0]], counts: ["in": 1, "out": 0])], "\(zones)")

        events = []
        for i in 0..<30 { events += driver.push(Self.frame, regions: [Self.face(216 - Double(i) * 4, 120)]).flatMap { $0.pixels.events() } }
        #expect(events.map(\.direction) == ["out"], "\(events)")
        #expect(try Self.counts(driver) == ["mid": ["in": 1, "out": 1]])
        #expect(driver.stage.summary == "mid in 1 out 1")
    }

    /// Two seconds in an area at 30 frames a second: entered once, inside, dwell ≈ 2 s; a
    /// tracker's predicted box counts too.
    @Test func aFaceStayingInAnAreaDwells() throws {
        let driver = try StageDriver(ZoneStage.self, settings: ["areas": .string("left:0,0,0.5,0,0.5,1,0,1"), "coordinates": .string("normalized")])
        try driver.start(.packed("BGRx", width: Self.w, height: Self.h, framerate: (30, 1)))
        var events: [FrameEvent] = []
        var last: MemoryPixels?
        for i in 0..<60 {
            let out = driver.push(Self.frame, regions: [Self.face(80, 120, estimate: i % 2 == 0 ? nil : .predicted)])
            events += out.flatMap { $0.pixels.events() }
            last = out.last?.pixels
        }
        #expect(events.map(\.type) == ["entered"] && events.first?.time == 0, "\(events)")
        #expect(try Self.counts(driver) == ["left": ["entered": 1, "inside": 1, "left": 0]])
        let zone = try #require(last?.zones().first)
        #expect(zone.kind == "polygon" && zone.points == [[0, 0], [160, 0], [160, 240], [0, 240]], "normalized, scaled to the frame: \(zone)")
        let dwell = try #require(zone.dwell?["5"])
        #expect(abs(dwell - 2) < 0.05, "\(dwell)")
        // It walks out: left, with its dwell.
        let out = driver.push(Self.frame, regions: [Self.face(250, 120)]).flatMap { $0.pixels.events() }
        #expect(out.map(\.type) == ["left"] && abs((out.first?.dwell ?? 0) - 2) < 0.05, "\(out)")
        #expect(try Self.counts(driver) == ["left": ["entered": 1, "inside": 0, "left": 1]])
    }

    /// No tracker: regions with id -1 cross and sit in zones without a count.
    @Test func untrackedRegionsAreNotCounted() throws {
        let driver = try StageDriver(ZoneStage.self, settings: ["lines": .string("mid:160,240,160,0"), "areas": .string("all:0,0,320,0,320,240,0,240")])
        try driver.start(.packed("BGRx", width: Self.w, height: Self.h))
        var events: [FrameEvent] = []
        for i in 0..<30 { events += driver.push(Self.frame, regions: [Self.face(100 + Double(i) * 4, 120, id: -1)]).flatMap { $0.pixels.events() } }
        #expect(events.isEmpty, "\(events)")
        #expect(driver.stage.readings["counts"] == #"{"all":{"entered":0,"inside":0,"left":0},"mid":{"in":0,"out":0}}"#)
    }

    @Test func labelsAndAnchorChooseWhatCounts() throws {
        // bottom-center: a face centred at y 110 has its bottom edge at 120, below a line at 115.
        let driver = try StageDriver(ZoneStage.self, settings: ["lines": .string("floor:0,115,320,115"), "labels": .string("person, face"),
                                                                "anchor": .string("bottom-center")])
        try driver.start(.packed("BGRx", width: Self.w, height: Self.h))
        let car = RegionOfInterest(label: "car", x: 0, y: 0, width: 20, height: 20, objectId: 9)
        var events: [FrameEvent] = []
        for y in [90.0, 110] {
            let carHere = RegionOfInterest(label: car.label, x: 100, y: y - 10, width: 20, height: 20, objectId: 9)
            events += driver.push(Self.frame, regions: [Self.face(50, y), carHere]).flatMap { $0.pixels.events() }
        }
        #expect(events.map { "\($0.label) \($0.direction ?? "")" } == ["face in"], "moving down across a rightwards line is in: \(events)")
    }

    @Test func badSettingsStopAtStartWithOneMessage() {
        let cases: [([String: PropertyValue], String)] = [
            ([:], "nothing to count: set lines"),
            (["lines": .string("door:1,2,3")], "property lines: 'door:1,2,3' needs name:x1,y1,x2,y2"),
            (["areas": .string("shop:1,2,3,4")], "property areas: 'shop:1,2,3,4' needs name:x1,y1,x2,y2,x3,y3,…"),
            (["lines": .string("a:0,0,1,1"), "areas": .string("a:0,0,1,0,1,1")], "zone name 'a' is used twice"),
            (["lines": .string("a:0,0,100,1"), "coordinates": .string("normalized")], "property lines: zone 'a' has the point 100.0,1.0 outside 0…1"),
        ]
        for (settings, message) in cases {
            do {
                _ = try StageDriver(ZoneStage.self, settings: settings)
                Issue.record("\(settings) started")
            } catch {
                #expect("\(error)".hasPrefix(message), "\(settings): \(error)")
            }
        }
    }

    /// lensoverlay draws the zones a frame carries, until zones=false (live, key z).
    @Test func overlayDrawsZones() throws {
        let zone = ZoneReading(name: "mid", kind: "line", points: [[160, 240], [160, 0]], counts: ["in": 1, "out": 0])
        let carrier = MemoryPixels(bytes: [])
        carrier.addZones([zone])
        let driver = try StageDriver(OverlayStage.self)
        try driver.start(.packed("BGRx", width: Self.w, height: Self.h))
        func drawn() throws -> MemoryPixels { try #require(driver.push(Self.frame, records: carrier.records).first?.pixels) }
        func pixel(_ p: MemoryPixels, _ x: Int, _ y: Int) -> [UInt8] { Array(p.bytes[(y * Self.w + x) * 4..<(y * Self.w + x) * 4 + 3]) }
        let on = try drawn()
        try driver.change(["zones": .bool(false)])
        let off = try drawn()
        #expect(pixel(on, 160, 120) != [0, 0, 0] && pixel(on, 100, 120) == [0, 0, 0] && pixel(on, 220, 120) == [0, 0, 0], "the line")
        // The label by its first point (the bottom end), kept inside the frame.
        func lit(_ p: MemoryPixels, _ xs: Range<Int>, _ ys: Range<Int>) -> Int {
            ys.reduce(0) { n, y in n + xs.filter { pixel(p, $0, y) != [0, 0, 0] }.count }
        }
        #expect(lit(on, 165..<215, 228..<240) > 200 && lit(on, 165..<215, 190..<220) == 0, "the label")
        #expect(off.bytes == Self.frame)
    }
}
