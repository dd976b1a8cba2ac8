import Foundation
import StreamLensTesting
import Testing

/// Person segmentation end to end, through the built binary on the astronaut photo: the mask
/// lensdetect attaches (Models/person-segmentation.json, MediaPipe's selfie segmentation from
/// the catalogue) against MediaPipe's own Python solution from the same wheel
/// (Tests/Python/mediapipe_selfie_mask.py in .deps/mediapipe-venv), the mask in lensmetadata's
/// JSON (COCO RLE) and on the buffer (read by a PyGObject program through the meta), and the
/// effects that follow it: lensblur shape=mask (fill, blur outside, a picture instead of the
/// background), lensstylize regions=outside, lensoverlay's tint.
@Suite(.serialized) struct SegmentationTests {
    static let side = 512
    static let photo = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
    static let source = "filesrc location=\(photo) ! pngdec ! imagefreeze num-buffers=2 ! videoconvert ! video/x-raw,format=RGB"
    /// f32: the numbers compared with MediaPipe's must not depend on the machine's bf16.
    static let segment = "lensdetect draw=false precision=f32 model=Models/person-segmentation.json"

    /// MediaPipe's own mask of the photo (0/1 a pixel), made once.
    static let reference: Result<[UInt8], Error> = Result {
        let dir = try scratchDirectory()
        let out = dir.appendingPathComponent("mp.pgm").path
        let r = try CLI.spawn(CLI.packageRoot.appendingPathComponent(".deps/mediapipe-venv/bin/python"),
                              ["Tests/Python/mediapipe_selfie_mask.py", photo, out], timeout: 120)
        guard r.status == 0 else { throw TestFailure("MediaPipe's reference failed: \(r.stderr)") }
        return try pgm(out).map { $0 >= 128 ? 1 : 0 }
    }

    /// StreamLens's own mask of the photo as lensblur fills it (0/1 a pixel), made once: where
    /// the effects must and must not change pixels (how it compares with MediaPipe's is the first
    /// test's).
    static let ours: Result<[UInt8], Error> = Result {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let fill = try frame("\(source) ! \(segment) ! lensblur shape=mask method=fill color=#00ff00 margin=0 ! filesink location=%@", in: dir, name: "fill.rgb")
        return (0..<(side * side)).map { i in fill[3 * i] == 0 && fill[3 * i + 1] == 255 && fill[3 * i + 2] == 0 ? 1 : 0 }
    }

    struct TestFailure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    static func pgm(_ path: String) throws -> [UInt8] {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        return Array(data.suffix(side * side))
    }

    /// The first frame of `spec` (ending in raw RGB into `%@`) as bytes.
    static func frame(_ spec: String, in dir: URL, name: String) throws -> [UInt8] {
        let path = dir.appendingPathComponent(name).path
        let r = try CLI.run(["run", "-q", String(format: spec, path)], timeout: 90)
        try #require(r.status == 0, "\(spec): \(r.stderr)")
        return Array([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))).prefix(side * side * 3))
    }

    static func iou(_ a: [UInt8], _ b: [UInt8]) -> Double {
        var inter = 0, union = 0
        for (x, y) in zip(a, b) { if x != 0 && y != 0 { inter += 1 }; if x != 0 || y != 0 { union += 1 } }
        return Double(inter) / Double(max(union, 1))
    }

    /// Pixels whose whole (2k+1)² neighbourhood is set in `m`: away from the outline.
    static func eroded(_ m: [UInt8], _ k: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: m.count)
        for y in k..<(side - k) {
            for x in k..<(side - k) where m[y * side + x] != 0 {
                var all = true
                for dy in -k...k where all { for dx in -k...k where m[(y + dy) * side + x + dx] == 0 { all = false; break } }
                if all { out[y * side + x] = 1 }
            }
        }
        return out
    }

    /// Mean absolute difference (per channel, of 255) of two RGB frames over the pixels `where` is set.
    static func difference(_ a: [UInt8], _ b: [UInt8], where m: [UInt8]) -> Double {
        var total = 0, n = 0
        for i in 0..<(side * side) where m[i] != 0 {
            for c in 0..<3 { total += abs(Int(a[3 * i + c]) - Int(b[3 * i + c])) }
            n += 3
        }
        return Double(total) / Double(max(n, 1))
    }

    /// Decodes a region's `mask` (COCO uncompressed RLE over its box) onto the frame, nearest.
    static func placed(_ d: [String: Any]) throws -> [UInt8] {
        let m = try #require(d["mask"] as? [String: Any], "\(d.keys)")
        let size = try #require(m["size"] as? [Int]), counts = try #require(m["counts"] as? [Int])
        let (mh, mw) = (size[0], size[1])
        try #require(counts.reduce(0, +) == mw * mh)
        var mask = [UInt8](repeating: 0, count: mw * mh)
        var k = 0
        for (n, run) in counts.enumerated() {
            if n % 2 == 1 { for p in k..<(k + run) { mask[(p % mh) * mw + p / mh] = 1 } }  // column-major
            k += run
        }
        let x = try #require(d["x"] as? Double), y = try #require(d["y"] as? Double)
        let w = try #require(d["width"] as? Double), h = try #require(d["height"] as? Double)
        var frame = [UInt8](repeating: 0, count: side * side)
        for py in 0..<side {
            let v = (Double(py) + 0.5 - y) / h
            guard v >= 0, v < 1 else { continue }
            for px in 0..<side {
                let u = (Double(px) + 0.5 - x) / w
                if u >= 0, u < 1, mask[Int(v * Double(mh)) * mw + Int(u * Double(mw))] != 0 { frame[py * side + px] = 1 }
            }
        }
        return frame
    }

    @Test func theMaskMatchesMediaPipesOwnInTheMetadataAndOnTheBuffer() throws {
        let reference = try Self.reference.get()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let jsonl = dir.appendingPathComponent("m.jsonl").path
        let fill = try Self.frame("\(Self.source) ! \(Self.segment) ! lensmetadata location=\(jsonl) ! lensblur shape=mask method=fill color=#00ff00 margin=0 ! filesink location=%@",
                                  in: dir, name: "fill.rgb")
        // The fill: green exactly where the mask is.
        let green = (0..<(Self.side * Self.side)).map { i -> UInt8 in fill[3 * i] == 0 && fill[3 * i + 1] == 255 && fill[3 * i + 2] == 0 ? 1 : 0 }
        let fillIoU = Self.iou(green, reference)
        #expect(fillIoU >= 0.98, "lensblur's fill vs MediaPipe's mask: IoU \(fillIoU)")
        // The metadata: one person region, its RLE mask where the fill is.
        let lines = try String(contentsOfFile: jsonl, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let line = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(line["schema_version"] as? Int == 4)
        let detections = try #require(line["detections"] as? [[String: Any]])
        try #require(detections.count == 1, "\(detections)")
        #expect(detections[0]["label"] as? String == "person")
        let rle = try Self.placed(detections[0])
        let rleIoU = Self.iou(rle, reference)
        #expect(rleIoU >= 0.97, "the metadata's RLE mask vs MediaPipe's: IoU \(rleIoU)")
        #expect(Self.iou(rle, green) >= 0.98)
        // The buffer: a GStreamer application reads the same mask from the meta (PyGObject, Debian's python3-gi).
        let pgm = dir.appendingPathComponent("gi.pgm").path
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["examples/python/read_masks.py", Self.photo, pgm, "Models/person-segmentation.json"],
                              environment: PluginTests.hostEnvironment, timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("person 0.9") && r.stdout.contains(" mask "), "\(r.stdout)")
        let fromMeta = try Self.pgm(pgm).map { $0 >= 128 ? UInt8(1) : 0 }
        let metaIoU = Self.iou(fromMeta, reference)
        #expect(metaIoU >= 0.97, "the meta's mask vs MediaPipe's: IoU \(metaIoU)")
    }

    @Test func aBlurredOrReplacedBackgroundLeavesThePersonAsItWas() throws {
        let reference = try Self.ours.get()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = try Self.frame("\(Self.source) ! filesink location=%@", in: dir, name: "in.rgb")
        let person = Self.eroded(reference, 1), background = Self.eroded(reference.map { 1 - $0 }, 1)
        let blurred = try Self.frame("\(Self.source) ! \(Self.segment) ! lensblur shape=mask regions=outside method=gaussian block=12 margin=0 ! filesink location=%@",
                                     in: dir, name: "blur.rgb")
        #expect(Self.difference(blurred, input, where: person) == 0, "the person changed under a background blur")
        let blurChange = Self.difference(blurred, input, where: background)
        #expect(blurChange >= 5, "the background blurred by only \(blurChange)/255")
        // A picture instead of the background: cut to the frame's shape and scaled by GStreamer's own elements, exactly.
        let cat = CLI.packageRoot.appendingPathComponent(".deps/media/chelsea.png").path
        let picture = try Self.frame("filesrc location=\(cat) ! pngdec ! videoconvert ! aspectratiocrop aspect-ratio=1/1 ! videoscale ! video/x-raw,format=RGB,width=\(Self.side),height=\(Self.side),pixel-aspect-ratio=1/1 ! filesink location=%@",
                                     in: dir, name: "cat.rgb")
        let replaced = try Self.frame("\(Self.source) ! \(Self.segment) ! lensblur shape=mask regions=outside replace=\(cat) margin=0 ! filesink location=%@",
                                      in: dir, name: "replaced.rgb")
        #expect(Self.difference(replaced, picture, where: background) == 0, "the background is not the picture")
        #expect(Self.difference(replaced, input, where: person) == 0, "the person changed under a virtual background")
        // shape=box hides the whole box instead (the astronaut's box is nearly the frame).
        let boxed = try Self.frame("\(Self.source) ! \(Self.segment) ! lensblur shape=box method=fill color=#00ff00 margin=0 ! filesink location=%@",
                                   in: dir, name: "box.rgb")
        let greenInBackground = (0..<(Self.side * Self.side)).filter { background[$0] != 0 && boxed[3 * $0 + 1] == 255 && boxed[3 * $0] == 0 }.count
        #expect(Double(greenInBackground) > 0.8 * Double(background.filter { $0 != 0 }.count - 12 * Self.side), "shape=box left the background inside the box")
    }

    @Test func stylizedOutsideThePersonWithAFeatheredEdgeLeavesThePersonUntouched() throws {
        let reference = try Self.reference.get()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = try Self.frame("\(Self.source) ! filesink location=%@", in: dir, name: "in.rgb")
        for feather in [0, 8] {
            let styled = try Self.frame("\(Self.source) ! \(Self.segment) ! lensstylize model=Models/mosaic.json regions=outside feather=\(feather) ! filesink location=%@",
                                        in: dir, name: "sty\(feather).rgb")
            // Away from the outline (the ramp is centred on it: half the feather either side).
            let person = Self.eroded(reference, 3 + feather / 2), background = Self.eroded(reference.map { 1 - $0 }, 3 + feather / 2)
            let inside = Self.difference(styled, input, where: person), outside = Self.difference(styled, input, where: background)
            #expect(inside <= 2, "feather=\(feather): the person changed by \(inside)/255")
            #expect(outside >= 20, "feather=\(feather): the background changed by only \(outside)/255")
            if feather > 0 {
                // On the outline itself the blend is partial: between the two.
                let edge = zip(Self.eroded(reference, 1), reference).map { $0 == 0 && $1 != 0 ? UInt8(1) : 0 }
                let onEdge = Self.difference(styled, input, where: edge)
                #expect(onEdge > inside + 2 && onEdge < outside - 2, "feather=\(feather): the edge changed by \(onEdge)/255")
            }
        }
    }

    @Test func lensoverlayTintsEachMaskInItsColour() throws {
        let reference = try Self.ours.get()
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = try Self.frame("\(Self.source) ! filesink location=%@", in: dir, name: "in.rgb")
        let tinted = try Self.frame("\(Self.source) ! \(Self.segment) ! lensoverlay color=#ff0000 masks=0.5 labels=false thickness=1 ! filesink location=%@",
                                    in: dir, name: "tint.rgb")
        // Inside the mask (away from its outline and the box's edges): half-way to red.
        let person = Self.eroded(reference, 4)
        var off = 0, n = 0
        for i in 0..<(Self.side * Self.side) where person[i] != 0 && i % Self.side > 4 && i % Self.side < Self.side - 4 && i / Self.side > 20 && i / Self.side < Self.side - 4 {
            let expected = [(Int(input[3 * i]) + 255) / 2, Int(input[3 * i + 1]) / 2, Int(input[3 * i + 2]) / 2]
            for c in 0..<3 { off = max(off, abs(Int(tinted[3 * i + c]) - expected[c])) }
            n += 1
        }
        #expect(n > 10_000 && off <= 2, "\(n) pixels, off by up to \(off)")
        let background = Self.eroded(reference.map { 1 - $0 }, 4)
        // Outside the mask nothing is tinted (the box's one-pixel outline aside).
        let changed = (0..<(Self.side * Self.side)).filter { i in background[i] != 0 && (0..<3).contains { c in tinted[3 * i + c] != input[3 * i + c] } }.count
        #expect(changed < 4 * Self.side, "\(changed) background pixels changed")
    }

    /// A replacement that is no picture is refused at start; a mask on a meta that does not fit
    /// (another element's: a size its data does not have, another format) is no mask: the
    /// region is hidden by its box, nothing crashes.
    @Test func badMasksAndPicturesAreRefusedOrIgnored() throws {
        let r = try CLI.run(["run", "-q", "videotestsrc num-buffers=2 ! lensblur shape=mask replace=Package.swift ! fakesink"], timeout: 30)
        #expect(r.status == 1 && r.stderr.contains("image Package.swift cannot be decoded as a picture"), "\(r.status) \(r.stderr)")
        let script = """
        import sys, gi
        gi.require_version("Gst", "1.0"); gi.require_version("GstVideo", "1.0")
        from gi.repository import Gst, GstVideo
        Gst.init(None)
        p = Gst.parse_launch("appsrc name=src format=time caps=video/x-raw,format=RGB,width=64,height=48,framerate=10/1 "
                             "! lensblur shape=mask method=fill color=#000000 margin=0 ! appsink name=out sync=false")
        masks = ["mask, width=(int)1000, height=(int)1000, format=(string)GRAY8, data=(buffer)00ff00ff",
                 "mask, width=(int)2, height=(int)2, format=(string)RGBA, data=(buffer)ffffffff",
                 "mask, width=(int)-2, height=(int)-2, format=(string)GRAY8, data=(buffer)ffffffff"]
        p.set_state(Gst.State.PLAYING)
        src, sink = p.get_by_name("src"), p.get_by_name("out")
        for n in range(3):
            buf = Gst.Buffer.new_wrapped(bytes([255]) * (64 * 48 * 3))
            buf.pts = n * Gst.SECOND // 10
            buf.duration = Gst.SECOND // 10
            roi = GstVideo.buffer_add_video_region_of_interest_meta(buf, "thing", 8, 8, 16, 16)
            roi.add_param(Gst.Structure.new_from_string("detection, x_min=(double)0.125, y_min=(double)0.16666666666666666, x_max=(double)0.375, y_max=(double)0.5, label_id=(int)0"))
            roi.add_param(Gst.Structure.new_from_string(masks[n]))
            src.emit("push-buffer", buf)
            sample = sink.emit("pull-sample")
            ok, m = sample.get_buffer().map(Gst.MapFlags.READ)
            print(sum(1 for k in range(64 * 48) if m.data[k * 3] == 0))
        src.emit("end-of-stream")
        p.set_state(Gst.State.NULL)
        """
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bogus.py")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let py = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), [file.path], environment: PluginTests.hostEnvironment, timeout: 60)
        #expect(py.status == 0, "\(py.stderr)")
        // Each frame: the 16×16 box filled, as if it had no mask.
        #expect(py.stdout.split(separator: "\n") == ["256", "256", "256"], "\(py.stdout) \(py.stderr)")
    }

    /// The API's regions: the next frame's record at a point, the person's mask included, the
    /// same mask lensmetadata writes for that photo; a point that does not exist is 404.
    @Test func theAPIGivesTheRegionsWithTheirMasks() throws {
        let reference = try Self.reference.get()
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let live = "filesrc location=\(Self.photo) ! pngdec ! imagefreeze is-live=true ! video/x-raw,framerate=10/1 ! videoconvert ! video/x-raw,format=RGB"
        let run = try Background.streamlens(["run", "--http", "\(port)", "\(live) ! \(Self.segment) name=seg ! lensblur name=hide shape=mask margin=0 ! fakesink"])
        defer { _ = run.stop(signal: SIGINT, timeout: 30) }
        try #require(HTTPAPITests.waitFor("\(u)/api/sources/main/regions", process: run), "no regions: \(run.stderr)")
        for path in ["/api/sources/main/regions", "/api/sources/main/regions?at=seg"] {
            let r = try HTTPAPITests.curl(u + path)
            #expect(r.status == 200 && r.headers["content-type"] == "application/json", "\(path): \(r.status) \(r.body)")
            #expect(r.object["schema_version"] as? Int == 4 && r.object["frame"] as? Int == -1 && r.object["width"] as? Int == Self.side, "\(r.body.prefix(200))")
            let detections = try #require(r.object["detections"] as? [[String: Any]], "\(r.body.prefix(300))")
            try #require(detections.count == 1)
            #expect(detections[0]["label"] as? String == "person")
            let iou = Self.iou(try Self.placed(detections[0]), reference)
            #expect(iou >= 0.97, "\(path): the API's mask vs MediaPipe's: IoU \(iou)")
        }
        let missing = try HTTPAPITests.curl("\(u)/api/sources/main/regions?at=nothing")
        #expect(missing.status == 404, "\(missing.status) \(missing.body)")
        let noSource = try HTTPAPITests.curl("\(u)/api/sources/other/regions")
        #expect(noSource.status == 404)
    }
}
