import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensGst
import StreamLensStages
import Testing

/// Adds 100 regions to every frame (more than any cap), with sub-pixel boxes, keypoints and an
/// attribute: a producer of regions that is not lensdetect.
final class ManyRegionsStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestregions", summary: "adds 100 regions (test)", example: "", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        for i in 0..<100 {
            frame.pixels.addRegionOfInterest(RegionOfInterest(
                label: i % 2 == 0 ? "even" : "odd", labelId: i % 2, x: Double(i) * 3 + 0.25, y: 10.75, width: 2.5, height: 4,
                confidence: Double(i) / 100, keypoints: [Point(x: Double(i) * 3 + 1, y: 12.5)], attributes: ["source": "test"]))
        }
        return .forward
    }
}

/// A tracker's part: gives every region an id and an attribute, in place.
final class NumberRegionsStage: Stage {
    static let descriptor = StageDescriptor(name: "lenstestnumber", summary: "numbers regions in place (test)", example: "", properties: [])
    init(settings: NoSettings) throws {}
    func process(_ frame: Frame) -> FrameOutcome {
        for (i, var region) in frame.pixels.regionsOfInterest().enumerated() {
            region.objectId = 1000 + i
            region.attributes["zone"] = i < 50 ? "left" : "right"
            precondition(frame.pixels.updateRegionOfInterest(region, at: i))
        }
        precondition(!frame.pixels.updateRegionOfInterest(RegionOfInterest(label: "x", x: 0, y: 0, width: 1, height: 1), at: 100))
        return .forward
    }
}

@Suite(.serialized) struct RegionTests {
    @Test func regionsTravelWithEverythingLaterStagesAddAndNoCap() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-regions-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("m.jsonl").path
        StandardBackends.register() // lensdetect's models run on OpenVINO
        try GStreamer.initialize(stages: builtinStages + [ManyRegionsStage.self, NumberRegionsStage.self])
        let pipeline = try Pipeline(description: "videotestsrc num-buffers=2 ! video/x-raw,format=RGB,width=320,height=240 ! lenstestregions ! lenstestnumber ! lensoverlay color=id ! lensmetadata location=\(path) ! fakesink")
        pipeline.log = { _ in }
        #expect(pipeline.run().exitCode == 0)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let line = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let detections = try #require(line["detections"] as? [[String: Any]])
        #expect(detections.count == 100)
        for (i, d) in detections.enumerated() {
            #expect(d["label"] as? String == (i % 2 == 0 ? "even" : "odd") && d["label_id"] as? Int == i % 2, "\(d)")
            #expect(d["object_id"] as? Int == 1000 + i, "\(d)")
            #expect(d["attributes"] as? [String: String] == ["source": "test", "zone": i < 50 ? "left" : "right"], "\(d)")
            // Sub-pixel boxes survive the meta (its normalised corners), to the writer's tenth.
            #expect(abs((d["x"] as? Double ?? -1) - (Double(i) * 3 + 0.25)) <= 0.051 && abs((d["y"] as? Double ?? -1) - 10.75) <= 0.051, "\(d)")
            #expect(abs((d["width"] as? Double ?? -1) - 2.5) <= 0.051 && d["score"] as? Double == Double(i) / 100, "\(d)")
            let keypoints = d["keypoints"] as? [[Double]] ?? []
            #expect(keypoints.count == 1 && abs(keypoints[0][0] - (Double(i) * 3 + 1)) <= 0.051 && abs(keypoints[0][1] - 12.5) <= 0.051, "\(d)")
        }
    }
}
