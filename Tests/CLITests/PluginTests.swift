import Foundation
import Testing

/// libgststreamlens.so, the stages as a GStreamer plugin: found by gst-inspect-1.0 and
/// gst-launch-1.0 through GST_PLUGIN_PATH, same results as `streamlens run`, usable from Python.
@Suite(.serialized) struct PluginTests {
    static let folder = CLI.binary.deletingLastPathComponent()
    static var environment: [String: String] {
        var e = ProcessInfo.processInfo.environment
        e["GST_PLUGIN_PATH"] = folder.path
        return e
    }

    /// For programs that are not ours (gst-inspect-1.0, gst-launch-1.0, python3) loading the
    /// plugin. Under `make test-asan`/`test-tsan` (tools/sanitize.sh) the plugin is instrumented
    /// and needs the sanitizer's runtime loaded first; those programs' own leaks at exit are not
    /// ours to report (our code's leaks are checked in the `streamlens` runs).
    static var hostEnvironment: [String: String] {
        var e = environment
        if let runtime = e["STREAMLENS_SANITIZER_RUNTIME"] {
            e["LD_PRELOAD"] = runtime
            e["ASAN_OPTIONS"] = (e["ASAN_OPTIONS"].map { $0 + ":" } ?? "") + "detect_leaks=0" // the last setting wins
        }
        return e
    }

    static func gst(_ tool: String, _ args: [String]) throws -> CLI.Result {
        try CLI.spawn(URL(fileURLWithPath: "/usr/bin/\(tool)"), args, environment: hostEnvironment, timeout: 120)
    }

    @Test func gstInspectShowsEveryStageAndProperty() throws {
        let plugin = try Self.gst("gst-inspect-1.0", ["streamlens"])
        #expect(plugin.status == 0, "\(plugin.stderr)")
        let stages = try CLI.run(["stages"])
        let names = stages.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") && $0.contains(": ") }.map { String($0.prefix { $0 != ":" }) }
        #expect(names.count >= 5, "\(stages.stdout)")
        for name in names {
            #expect(plugin.stdout.contains(name), "\(name) not in the plugin: \(plugin.stdout)")
            let inspect = try Self.gst("gst-inspect-1.0", [name])
            #expect(inspect.status == 0, "\(name): \(inspect.stderr)")
            // Every property of the stage's table, with its help text.
            let section = stages.stdout.components(separatedBy: "\(name): ")[1].components(separatedBy: "\n\n")[0]
            // Property lines ("    name=default  [...]  help"), not the keys listed after them.
            for line in section.split(separator: "\n") where line.hasPrefix("    ") && line.dropFirst(4).prefix(while: { $0 != " " }).contains("=") {
                let property = String(line.dropFirst(4).prefix { $0 != "=" })
                #expect(inspect.stdout.contains("  \(property) "), "\(name).\(property) missing from gst-inspect-1.0")
            }
        }
    }

    /// Runs `spec` (with %@ for its output file) through plain gst-launch-1.0 with the plugin and
    /// through `streamlens run`; returns both outputs.
    static func outputs(of spec: String) throws -> (launch: Data, run: Data) {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let a = dir.appendingPathComponent("launch.out").path, b = dir.appendingPathComponent("run.out").path
        let launch = try gst("gst-launch-1.0", ["-q"] + String(format: spec, a).split(separator: " ").map(String.init))
        #expect(launch.status == 0, "\(launch.stderr)")
        let run = try CLI.run(["run", "-q", String(format: spec, b)])
        #expect(run.status == 0, "\(run.stderr)")
        return (try Data(contentsOf: URL(fileURLWithPath: a)), try Data(contentsOf: URL(fileURLWithPath: b)))
    }

    @Test func gstLaunchGivesTheSameDetectionsAsStreamlensRun() throws {
        let model = CLI.packageRoot.appendingPathComponent("Models/face-short-range.json").path
        let photo = CLI.packageRoot.appendingPathComponent(".deps/media/astronaut.png").path
        let (launch, run) = try Self.outputs(of: "filesrc location=\(photo) ! pngdec ! imagefreeze num-buffers=8 ! videoconvert ! video/x-raw,format=RGB,framerate=10/1 ! lensdetect model=\(model) precision=f32 metadata=%@ ! fakesink")
        let x = String(decoding: launch, as: UTF8.self), y = String(decoding: run, as: UTF8.self)
        #expect(x.split(separator: "\n").count == 8)
        #expect(x.contains("\"score\""))
        #expect(x == y, "gst-launch-1.0:\n\(x)\nstreamlens run:\n\(y)")
    }

    @Test func gstLaunchStylizesLikeStreamlensRun() throws {
        let model = CLI.packageRoot.appendingPathComponent("Models/mosaic.json").path
        let photo = CLI.packageRoot.appendingPathComponent(".deps/media/chelsea.png").path
        let (x, y) = try Self.outputs(of: "filesrc location=\(photo) ! pngdec ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=160,height=120 ! imagefreeze num-buffers=3 ! lensstylize model=\(model) precision=f32 inference-size=128 strength=0.7 ! filesink location=%@")
        #expect(x.count == 3 * 160 * 120 * 3)
        #expect(x == y, "gst-launch-1.0 and streamlens run give different pixels")
    }

    @Test func pythonExampleReadsTheFacesFromTheMeta() throws {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["examples/python/read_faces.py", ".deps/media/astronaut.png", "4"],
                              environment: Self.hostEnvironment, timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("frame ") && $0.contains(": face 0.") }.count == 4, "\(r.stdout)")
        #expect(lines.last == "4 frames", "\(r.stdout)")
        // The face of the astronaut, where DetectTests' reference box is (x 179.3, y 81.7, 92.1
        // wide), within a pixel or two: the device's default precision (bf16 where the CPU has
        // it, f32 elsewhere) moves the box by a fraction of a pixel, and the meta rounds it.
        func numbers(after marker: String, in line: Substring) -> [Double]? {
            guard let at = line.range(of: marker) else { return nil }
            let rest = line[at.upperBound...].prefix { $0 != "[" && $0 != "]" }
            let numbers = rest.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "x" }).compactMap { Double($0) }
            return numbers.count == 4 ? numbers : nil
        }
        let boxes = lines.compactMap { numbers(after: " at ", in: $0) }
        // DL Streamer's layout: the normalised corners give the box to a tenth of a pixel.
        let exact = lines.compactMap { numbers(after: "label_id 0, box ", in: $0) }
        #expect(exact.count == 4, "\(r.stdout)")
        for (b, e) in zip(boxes, exact) {
            #expect(abs(b[0] - e[0]) < 1 && abs(b[1] - e[1]) < 1 && abs(b[2] - e[2]) <= 1.5 && abs(b[3] - e[3]) <= 1.5, "\(b) vs \(e)")
        }
        #expect(boxes.count == 4, "\(r.stdout)")
        let f = DetectTests.faceInPhoto
        for b in boxes {
            #expect(abs(b[0] - f.x) <= 2 && abs(b[1] - f.y) <= 2 && abs(b[2] - f.size) <= 3 && abs(b[3] - f.size) <= 3, "\(b) vs \(f)")
        }
    }

    @Test func badSettingsAreElementErrorsNotCrashes() throws {
        let launch = try Self.gst("gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=3", "!", "videoconvert", "!", "lensdetect", "model=/nonexistent/face.json", "!", "fakesink"])
        // gst-launch-1.0's own exit code for a pipeline error (255), not a signal.
        #expect(launch.status == 255, "\(launch.status): \(launch.stderr)")
        #expect(launch.stderr.contains("model manifest /nonexistent/face.json not found"), "\(launch.stderr)")
        // The plugin loaded twice (the file given again): the second load is the same plugin.
        let twice = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import gi, sys
            gi.require_version("Gst", "1.0")
            from gi.repository import Gst
            Gst.init(None)
            path = sys.argv[1]
            a = Gst.Plugin.load_file(path); b = Gst.Plugin.load_file(path)
            print(a.get_name(), b.get_name(), Gst.ElementFactory.make("lenspass", None) is not None)
            """, Self.folder.appendingPathComponent("libgststreamlens.so").path], environment: Self.hostEnvironment, timeout: 60)
        #expect(twice.status == 0, "\(twice.stderr)")
        #expect(twice.stdout.contains("streamlens streamlens True"), "\(twice.stdout)\(twice.stderr)")
        // streamlens itself with the plugin on the path: its own registration wins, no clash.
        let cli = try CLI.spawn(CLI.binary, ["run", "-q", "videotestsrc num-buffers=5 ! videoconvert ! lensdetect ! fakesink"], environment: Self.environment)
        #expect(cli.status == 0, "\(cli.stderr)")
    }

    /// A stage answers the latency query as its upstream does: live only behind a live source.
    /// Before upstream is linked (decodebin's pads come later) it cannot answer — a compositor
    /// told "live" then drops and repeats frames of a file against the clock (found with the
    /// demo's 2x2 grid: 187-191 frames out of 180, or "Buffer has no PTS").
    @Test func latencyQueryFollowsUpstream() throws {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import gi
            gi.require_version("Gst", "1.0")
            from gi.repository import Gst
            Gst.init(None)
            def ask(pad):
                q = Gst.Query.new_latency()
                return pad.query(q) and q.parse_latency()[0]
            # Started, the element upstream not linked yet (as behind decodebin before its pads).
            alone = Gst.parse_launch("videoconvert ! lenspass name=s ! fakesink")
            alone.set_state(Gst.State.PLAYING)
            alone.get_state(Gst.SECOND)
            answers = ["unlinked=%s" % ask(alone.get_by_name("s").get_static_pad("src"))]
            alone.set_state(Gst.State.NULL)
            for live in (False, True):
                p = Gst.parse_launch("videotestsrc is-live=%s ! lenspass name=s ! fakesink" % live)
                p.set_state(Gst.State.PLAYING)
                p.get_state(5 * Gst.SECOND)
                answers.append("live=%s:%s" % (live, ask(p.get_by_name("s").get_static_pad("src"))))
                p.set_state(Gst.State.NULL)
            print(" ".join(answers))
            """], environment: Self.hostEnvironment, timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "unlinked=False live=False:False live=True:True", "\(r.stdout)\(r.stderr)")
    }

    /// An application changes a property with g_object_set while PLAYING; the stage applies it
    /// between frames (here lensstylize's strength, set to 0 halfway: later frames are the input;
    /// the default model, the shipped mosaic style).
    @Test func propertiesChangedWhilePlayingTakeEffect() throws {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", """
            import gi, sys
            gi.require_version("Gst", "1.0")
            from gi.repository import Gst
            Gst.init(None)
            p = Gst.parse_launch("filesrc location=.deps/media/astronaut.png ! pngdec ! videoconvert ! videoscale "
                "! video/x-raw,format=RGB,width=64,height=64 ! imagefreeze num-buffers=30 ! video/x-raw,framerate=10/1 "
                "! identity sync=true ! tee name=t t. ! queue ! lensstylize name=s inference-size=64 mode=lossless ! appsink name=out sync=false "
                "t. ! queue ! appsink name=ref sync=false")
            out, ref, stylize = p.get_by_name("out"), p.get_by_name("ref"), p.get_by_name("s")
            p.set_state(Gst.State.PLAYING)
            frames = []
            while True:
                # The first frame waits for the model to load (slow under a sanitizer build).
                sample = out.emit("try-pull-sample", (5 if frames else 120) * Gst.SECOND)
                if sample is None: break
                frames.append(sample.get_buffer().extract_dup(0, 64 * 64 * 3))
                if len(frames) == 12: stylize.set_property("strength", 0.0)
            original = ref.emit("try-pull-sample", Gst.SECOND).get_buffer().extract_dup(0, 64 * 64 * 3)
            p.set_state(Gst.State.NULL)
            same = [f == original for f in frames]
            print(len(frames), "".join("=" if x else "x" for x in same))
            """], environment: Self.hostEnvironment, timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let words = r.stdout.split(separator: " ")
        #expect(words.first == "30", "\(r.stdout)\(r.stderr)")
        let marks = words.last.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        // Stylized at first, the input itself at the end, one switch.
        #expect(marks.hasPrefix("xxxxx") && marks.hasSuffix("====="), "\(marks)")
        #expect(zip(marks, marks.dropFirst()).filter { $0 != $1 }.count == 1, "\(marks)")
    }
}
