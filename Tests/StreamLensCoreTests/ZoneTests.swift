import Testing
@testable import StreamLensCore

/// lenszone's geometry (image coordinates, y down), its property syntax, and its counter.
struct ZoneTests {
    func p(_ x: Double, _ y: Double) -> Point { Point(x: x, y: y) }

    @Test func sideAndDirectionFollowTheScreen() {
        // A line drawn rightwards along y = 100: its left (seen from its first point) is up on
        // the screen (smaller y), its right is down.
        let a = p(0, 100), b = p(640, 100)
        #expect(ZoneGeometry.side(of: p(50, 20), a: a, b: b) < 0)
        #expect(ZoneGeometry.side(of: p(50, 180), a: a, b: b) > 0)
        #expect(ZoneGeometry.side(of: p(50, 100), a: a, b: b) == 0)
        #expect(ZoneGeometry.crossing(from: p(50, 20), to: p(60, 180), a: a, b: b) == .in, "moving down across a rightwards line")
        #expect(ZoneGeometry.crossing(from: p(60, 180), to: p(50, 20), a: a, b: b) == .out)
        // A line drawn upwards at x = 320: moving right is in, left is out.
        let up = (a: p(320, 360), b: p(320, 0))
        #expect(ZoneGeometry.crossing(from: p(300, 50), to: p(340, 60), a: up.a, b: up.b) == .in)
        #expect(ZoneGeometry.crossing(from: p(340, 60), to: p(300, 50), a: up.a, b: up.b) == .out)
        // The same line drawn downwards swaps them.
        #expect(ZoneGeometry.crossing(from: p(300, 50), to: p(340, 60), a: up.b, b: up.a) == .out)
    }

    @Test func crossingMustMeetTheSegment() {
        let a = p(100, 100), b = p(200, 100)
        #expect(ZoneGeometry.crossing(from: p(150, 50), to: p(150, 150), a: a, b: b) == .in)
        #expect(ZoneGeometry.crossing(from: p(250, 50), to: p(250, 150), a: a, b: b) == nil, "passes beyond the end")
        #expect(ZoneGeometry.crossing(from: p(50, 50), to: p(60, 150), a: a, b: b) == nil, "passes before the start")
        #expect(ZoneGeometry.crossing(from: p(150, 50), to: p(160, 90), a: a, b: b) == nil, "stays on one side")
        #expect(ZoneGeometry.crossing(from: p(150, 50), to: p(150, 100), a: a, b: b) == nil, "ends on the line")
        // Diagonal moves meeting the line just inside its ends count.
        #expect(ZoneGeometry.crossing(from: p(90, 50), to: p(110, 150), a: a, b: b) == .in)
        #expect(ZoneGeometry.crossing(from: p(190, 150), to: p(210, 50), a: a, b: b) == .out)
    }

    @Test func pointInPolygon() {
        let square = [p(0, 0), p(100, 0), p(100, 100), p(0, 100)]
        #expect(ZoneGeometry.contains(square, p(50, 50)))
        #expect(!ZoneGeometry.contains(square, p(150, 50)) && !ZoneGeometry.contains(square, p(50, -1)))
        // A concave "U": the notch between its arms is outside.
        let u = [p(0, 0), p(30, 0), p(30, 70), p(70, 70), p(70, 0), p(100, 0), p(100, 100), p(0, 100)]
        #expect(ZoneGeometry.contains(u, p(15, 20)) && ZoneGeometry.contains(u, p(85, 20)) && ZoneGeometry.contains(u, p(50, 90)))
        #expect(!ZoneGeometry.contains(u, p(50, 20)))
        #expect(!ZoneGeometry.contains([p(0, 0), p(1, 1)], p(0.5, 0.5)), "two points are no polygon")
    }

    @Test func parsesLinesAndAreas() throws {
        let lines = try ZoneSyntax.lines(" door : 1,2,3,4 ; gate:0.5,1,0.5,0;")
        #expect(lines == [Zone(name: "door", shape: .line(p(1, 2), p(3, 4))), Zone(name: "gate", shape: .line(p(0.5, 1), p(0.5, 0)))])
        let areas = try ZoneSyntax.areas("shop:0,0,10,0,10,10;yard:1,1, 2,1, 2,2, 1,2")
        #expect(areas.map(\.name) == ["shop", "yard"])
        #expect(areas[0].shape == .polygon([p(0, 0), p(10, 0), p(10, 10)]) && areas[1].points.count == 4)
        #expect(try ZoneSyntax.lines("").isEmpty && ZoneSyntax.areas(" ; ").isEmpty)
        #expect(areas[1].scaled(x: 10, y: 100).points == [p(10, 100), p(20, 100), p(20, 200), p(10, 200)])
    }

    @Test func badSyntaxIsNamed() {
        func message(_ body: () throws -> Void) -> String {
            do { try body(); return "no error" } catch { return "\(error)" }
        }
        #expect(message { _ = try ZoneSyntax.lines("door:1,2,3") } == "property lines: 'door:1,2,3' needs name:x1,y1,x2,y2")
        #expect(message { _ = try ZoneSyntax.lines("door:1,2,3,4,5") } == "property lines: 'door:1,2,3,4,5' needs name:x1,y1,x2,y2")
        #expect(message { _ = try ZoneSyntax.lines("1,2,3,4") } == "property lines: '1,2,3,4' has no name: write name:x1,y1,…")
        #expect(message { _ = try ZoneSyntax.lines(":1,2,3,4") } == "property lines: ':1,2,3,4' has an empty name")
        #expect(message { _ = try ZoneSyntax.lines("door:1,x,3,4") } == "property lines: 'door:1,x,3,4': 'x' is not a number")
        #expect(message { _ = try ZoneSyntax.lines("door:1,,3,4") } == "property lines: 'door:1,,3,4': '' is not a number")
        #expect(message { _ = try ZoneSyntax.lines("door:1,2,1,2") } == "property lines: 'door:1,2,1,2' has its two points equal; a line needs two different ones")
        #expect(message { _ = try ZoneSyntax.areas("shop:0,0,1,1") }
                == "property areas: 'shop:0,0,1,1' needs name:x1,y1,x2,y2,x3,y3,… (three points or more, an x and a y each)")
        #expect(message { _ = try ZoneSyntax.areas("shop:0,0,1,1,2") }.hasPrefix("property areas: 'shop:0,0,1,1,2' needs"))
        #expect(message { _ = try ZoneSyntax.areas("shop:0,0,1,0,nan,1") } == "property areas: 'shop:0,0,1,0,nan,1': 'nan' is not a number")
        let zones = [Zone(name: "a", shape: .line(p(0, 0), p(1, 1))), Zone(name: "a", shape: .polygon([p(0, 0), p(1, 0), p(1, 1)]))]
        #expect(message { try ZoneSyntax.checkNames(zones) }.hasPrefix("zone name 'a' is used twice"))
        #expect(message { try ZoneSyntax.checkNormalized([Zone(name: "d", shape: .line(p(0, 0), p(2, 1)))]) { _ in "lines" } }
                == "property lines: zone 'd' has the point 2.0,1.0 outside 0…1 (coordinates=normalized: fractions of the frame)")
    }

    @Test func counterCountsCrossingsOnceAndIgnoresHoveringOnTheLine() {
        var counter = ZoneCounter(zones: [Zone(name: "mid", shape: .line(p(50, 100), p(50, 0)))], forget: 5)
        func at(_ x: Double, _ frame: Int) -> [FrameEvent] {
            counter.update([ZoneObservation(objectId: 3, label: "face", point: p(x, 50))], frame: frame, time: Double(frame) / 10)
        }
        var events: [FrameEvent] = []
        for (frame, x) in [40.0, 45, 50, 50, 50, 55, 60].enumerated() { events += at(x, frame) }
        #expect(events == [FrameEvent(type: "crossed", zone: "mid", objectId: 3, label: "face", direction: "in", time: 0.5)])
        // Back to the line and away on the same side: nothing. Then back across: out.
        #expect(at(50, 7).isEmpty && at(58, 8).isEmpty)
        #expect(at(30, 9).map(\.direction) == ["out"])
        #expect(counter.countsByZone == ["mid": ["in": 1, "out": 1]])
        #expect(counter.countsJSON == #"{"mid":{"in":1,"out":1}}"#)
    }

    @Test func counterAreasEnterLeaveDwellAndForget() {
        let shop = Zone(name: "shop", shape: .polygon([p(0, 0), p(100, 0), p(100, 100), p(0, 100)]))
        var counter = ZoneCounter(zones: [shop], forget: 3)
        func seen(_ id: Int, _ x: Double) -> ZoneObservation { ZoneObservation(objectId: id, label: "person", point: p(x, 50)) }
        // Object 1 is first seen inside (counts as entered), object 2 walks in at frame 2.
        #expect(counter.update([seen(1, 50), seen(2, 150)], frame: 0, time: 0).map(\.type) == ["entered"])
        #expect(counter.update([seen(1, 50), seen(2, 120)], frame: 1, time: 1).isEmpty)
        let entered = counter.update([seen(1, 50), seen(2, 80)], frame: 2, time: 2)
        #expect(entered == [FrameEvent(type: "entered", zone: "shop", objectId: 2, label: "person", time: 2)])
        #expect(counter.readings[0].counts == ["entered": 2, "left": 0, "inside": 2] && counter.readings[0].dwell == ["1": 2, "2": 0])
        // Object 2 walks out at frame 4: its dwell runs to frame 3, the last frame it was inside.
        _ = counter.update([seen(1, 50), seen(2, 80)], frame: 3, time: 3)
        let left = counter.update([seen(1, 50), seen(2, 150)], frame: 4, time: 4)
        #expect(left == [FrameEvent(type: "left", zone: "shop", objectId: 2, label: "person", time: 4, dwell: 1)])
        // Object 1 vanishes after frame 4: kept through 3 unseen frames, then it has left.
        for frame in 5...7 { #expect(counter.update([seen(2, 150)], frame: frame, time: Double(frame)).isEmpty) }
        #expect(counter.readings[0].counts["inside"] == 1)
        let gone = counter.update([seen(2, 150)], frame: 8, time: 8)
        #expect(gone == [FrameEvent(type: "left", zone: "shop", objectId: 1, label: "person", time: 8, dwell: 4)])
        #expect(counter.countsByZone == ["shop": ["entered": 2, "left": 2, "inside": 0]] && counter.readings[0].dwell == [:])
        #expect(counter.countsText == "shop entered 2 left 2 inside 0")
    }

    @Test func untrackedObjectsAreNotCounted() {
        var counter = ZoneCounter(zones: [Zone(name: "mid", shape: .line(p(50, 100), p(50, 0))),
                                          Zone(name: "all", shape: .polygon([p(0, 0), p(100, 0), p(100, 100)]))], forget: 30)
        for (frame, x) in [40.0, 60, 40].enumerated() {
            #expect(counter.update([ZoneObservation(objectId: -1, label: "face", point: p(x, 10))], frame: frame, time: 0).isEmpty)
        }
        #expect(counter.countsJSON == #"{"all":{"entered":0,"inside":0,"left":0},"mid":{"in":0,"out":0}}"#)
    }
}
