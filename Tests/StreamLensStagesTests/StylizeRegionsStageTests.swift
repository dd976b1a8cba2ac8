import Foundation
import StreamLensCore
import StreamLensBackends
import StreamLensStages
import StreamLensTesting
import Testing

/// lensstylize limited to regions (regions, labels, feather: live), frames in memory with the
/// regions a detector would have left on them, the real mosaic model.
@Suite(.serialized) struct StylizeRegionsStageTests {
    init() {
        _ = FileManager.default.changeCurrentDirectoryPath(packageRoot.path)
        StandardBackends.register() // the stages' models run on OpenVINO here
    }

    /// Mean absolute difference inside `boxes` (pixel centres inside), and the number of bytes
    /// changed outside all of them.
    static func compare(_ a: [UInt8], _ b: [UInt8], width: Int, height: Int, boxes: [RegionOfInterest]) -> (inside: Double, changedOutside: Int) {
        var total = 0, count = 0, changed = 0
        for y in 0..<height { for x in 0..<width {
            let cx = Double(x) + 0.5, cy = Double(y) + 0.5
            let inside = boxes.contains { cx > $0.x && cx < $0.x + $0.width && cy > $0.y && cy < $0.y + $0.height }
            for c in 0..<3 {
                let i = (y * width + x) * 3 + c, d = abs(Int(a[i]) - Int(b[i]))
                if inside { total += d; count += 1 } else if d > 0 { changed += 1 }
            }
        } }
        return (Double(total) / Double(max(1, count)), changed)
    }

    /// Each frame is blended through the regions it came with and the settings of when it
    /// came, though it waits for its output while later frames and changes arrive (two
    /// requests in flight); `labels` picks the regions, and a frame left with none goes on
    /// untouched.
    @Test func eachFrameKeepsItsRegionsWhileItWaits() throws {
        let (w, h) = (160, 120)
        let bytes = try rgbPixels(of: packageRoot.appendingPathComponent(".deps/media/chelsea.png").path, width: w, height: h)
        let driver = try StageDriver(StylizeStage.self, settings: [
            "model": .string("Models/mosaic.json"), "precision": .string("f32"), "inference-size": .string("128"), "nireq": .int(2),
            "regions": .string("inside"), "feather": .int(0),
        ])
        try driver.start(.packed("RGB", width: w, height: h))
        let cat = RegionOfInterest(label: "cat", x: 10.2, y: 20, width: 40, height: 50.5)
        let dog = RegionOfInterest(label: "dog", x: 100, y: 30.7, width: 50, height: 60)
        var out = driver.push(bytes, regions: [cat])
        out += driver.push(bytes, regions: [dog])
        try driver.change(["regions": .string("outside")]) // frames 0 and 1 keep `inside`
        out += driver.push(bytes, regions: [cat])
        try driver.change(["regions": .string("inside"), "labels": .string("dog")])
        out += driver.push(bytes, regions: [cat, dog])
        try driver.change(["labels": .string("cat")])
        out += driver.push(bytes, regions: [dog])
        out += driver.finish()
        try #require(out.map(\.index) == [0, 1, 2, 3, 4] && out.allSatisfy { $0.outcome == .forward }, "\(out.map { ($0.index, $0.outcome) })")

        for (i, boxes) in [(0, [cat]), (1, [dog]), (3, [dog])] {
            let c = Self.compare(bytes, out[i].pixels.bytes, width: w, height: h, boxes: boxes)
            #expect(c.changedOutside == 0 && c.inside > 10, "frame \(i) (inside \(boxes.map(\.label))): \(c)")
        }
        // Outside the cat: the cat's pixels untouched, the rest painted.
        let outside = out[2].pixels.bytes
        #expect(Self.compare(bytes, outside, width: w, height: h, boxes: [cat]).inside == 0)
        #expect(Self.compare(bytes, outside, width: w, height: h, boxes: [RegionOfInterest(label: "", x: 0, y: 0, width: Double(w), height: Double(h))]).inside > 10)
        #expect(out[4].pixels.bytes == bytes, "no cat on frame 4: untouched")
        #expect(driver.stage.summary?.contains("1 frame without a region to stylize passed untouched") == true, "\(driver.stage.summary ?? "")")
    }
}
