import Foundation
import StreamLensTesting
import Testing

/// lensrecord through the built binary: real faces crossing a line (lensdetect, lenstrack,
/// lenszone), encoded by x264enc, clips read back by ffprobe and decoded by ffmpeg.
@Suite(.serialized) struct EventClipTests {
    /// The JSON records lensrecord wrote in `dir`, by clip name.
    static func records(_ dir: URL) throws -> [String: [String: Any]] {
        var out: [String: [String: Any]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".json") {
            let data = try Data(contentsOf: dir.appendingPathComponent(name))
            guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any], json["stage"] as? String == "lensrecord" else { continue }
            out[try #require(json["clip"] as? String)] = json
        }
        return out
    }

    /// Frames ffprobe counts in the clip's video stream, and its duration (nil: not a video it reads).
    static func probe(_ path: String) -> (frames: Int, duration: Double)? {
        guard let r = ffprobe(["-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames:format=duration", "-of", "default=nw=1", path]),
              r.status == 0 else { return nil }
        var frames: Int?, duration: Double?
        for line in r.output.split(separator: "\n") {
            if line.hasPrefix("nb_read_frames=") { frames = Int(line.dropFirst(15)) }
            if line.hasPrefix("duration=") { duration = Double(line.dropFirst(9)) }
        }
        guard let frames, let duration else { return nil }
        return (frames, duration)
    }

    /// ffmpeg decodes the whole clip without an error.
    static func decodes(_ path: String) throws -> Bool {
        let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-i", path, "-f", "null", "-"], timeout: 60)
        return r.status == 0 && r.stderr.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    /// A face crossing a line at ~1.56 s: one clip from the keyframe at or before 1 s earlier
    /// (keyframes every 0.5 s) to 1 s after, that plays, with the crossing in its JSON and a
    /// `clip` event on the bus; no frame dropped on the way.
    @Test func aCrossingMakesOneClipFromBeforeItToAfterIt() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = try ZoneStagesTests.crossingFaceClip(in: dir), clips = dir.appendingPathComponent("clips")
        let spec = "filesrc location=\(input) ! decodebin ! videoconvert ! video/x-raw,format=RGB ! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false "
            + "! lenstrack ! lenszone lines=mid:320,360,320,0 ! videoconvert ! video/x-raw,format=I420 ! x264enc key-int-max=15 speed-preset=veryfast "
            + "! h264parse ! lensrecord pre=1 post=1 location=\(clips.path)/clip-%05d.mp4 ! fakesink"
        let r = try CLI.run(["run", "-v", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Self.records(clips)
        try #require(records.count == 1, "\(records.keys.sorted())")
        let (name, json) = records.first!
        #expect(name == "clip-00001.mp4")
        let events = json["events"] as? [[String: Any]] ?? []
        let crossed = try #require(events.first { $0["type"] as? String == "crossed" }, "\(json)")
        let t = try #require(crossed["time"] as? Double)
        #expect(t > 1.3 && t < 1.8, "the crossing at \(t) s")
        let start = try #require(json["start"] as? Double), end = try #require(json["end"] as? Double)
        // From the keyframe at or before t − pre: at most one GOP (0.5 s) before it.
        #expect(start <= t - 1 + 0.001 && start >= t - 1 - 0.5 - 0.001, "starts at \(start) for a crossing at \(t)")
        // To post after the last trigger (the triggering frame's time, within two frames).
        #expect(abs(end - (t + 1)) <= 0.07, "ends at \(end) for a crossing at \(t)")
        let path = clips.appendingPathComponent(name).path
        let p = try #require(Self.probe(path), "\(name) does not read")
        #expect(p.frames == json["frames"] as? Int && abs(Double(p.frames) - (end - start) * 30) <= 1, "\(p) \(json)")
        #expect(abs(p.duration - (end - start)) <= 0.05, "\(p.duration) s against \(end - start)")
        #expect(try Self.decodes(path), "\(name) does not decode")
        // The clip event on the bus (the CLI says it with -v), naming the file.
        #expect(r.stderr.split(separator: "\n").contains { $0.hasPrefix("lensrecord0: clip") }, "\(r.stderr.suffix(1500))")
        #expect(r.stderr.contains("lensrecord0: 90 frames in, 90 out, 0 dropped"), "\(r.stderr.suffix(1500))")
        // Nothing else left in the folder (no temporary file).
        #expect(try FileManager.default.contentsOfDirectory(atPath: clips.path).sorted() == ["clip-00001.json", "clip-00001.mp4"])
    }

    /// The crossing face with a sound: a 1 kHz beep from 1.5 s to 1.6 s of the file (peak 0.1 of full scale: 3277), AAC at
    /// 48 kHz beside the H.264 in one MP4. The clip of the crossing has both tracks, as long as
    /// each other, and the beep where it was against the video (decoded by ffmpeg).
    @Test func theClipHasTheStreamsAudioInStep() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let video = try ZoneStagesTests.crossingFaceClip(in: dir), input = dir.appendingPathComponent("av.mp4").path
        let mux = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"),
                                ["-v", "error", "-y", "-i", video, "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000:duration=3",
                                 "-filter_complex", "[1:a]volume='if(between(t,1.5,1.6),0.8,0)':eval=frame[a]", "-map", "0:v", "-map", "[a]",
                                 "-c:v", "copy", "-c:a", "aac", "-b:a", "96k", input], timeout: 60)
        try #require(mux.status == 0, "\(mux.stderr)")
        let clips = dir.appendingPathComponent("clips")
        let spec = "filesrc location=\(input) ! qtdemux name=d d.video_0 ! queue ! decodebin ! videoconvert ! video/x-raw,format=RGB "
            + "! lensdetect model=Models/face-full-range.json threshold=0.5 draw=false ! lenstrack ! lenszone lines=mid:320,360,320,0 "
            + "! videoconvert ! video/x-raw,format=I420 ! x264enc key-int-max=15 speed-preset=veryfast ! h264parse "
            + "! lensrecord name=rec pre=1 post=1 location=\(clips.path)/clip-%05d.mp4 ! fakesink "
            + "d.audio_0 ! queue max-size-time=0 max-size-buffers=0 max-size-bytes=0 ! aacparse ! rec.audio"
        let r = try CLI.run(["run", spec], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("rec: 90 frames in, 90 out, 0 dropped"), "\(r.stderr.suffix(1500))")
        let records = try Self.records(clips)
        try #require(records.count == 1, "\(records.keys.sorted()) \(r.stderr.suffix(1500))")
        let (name, json) = records.first!
        let path = clips.appendingPathComponent(name).path
        let start = try #require(json["start"] as? Double), end = try #require(json["end"] as? Double)
        #expect(json["audio"] as? String == "audio/mpeg", "\(json)")
        // Both tracks, ending together (within an AAC frame of 1024 samples, 21 ms, and a video
        // frame). The video's first frame is shown at its start_time (x264enc's B-frames: its
        // decoding time is the clip's 0), the audio runs from 0.
        let streams = try #require(ffprobe(["-show_entries", "stream=codec_type,codec_name,start_time,duration", "-of", "csv=p=0", path]))
        let lines = streams.output.split(separator: "\n").map { $0.split(separator: ",").map(String.init) }
        let audioTrack = try #require(lines.first { $0.count == 4 && $0[1] == "audio" }, "\(streams.output)")
        let videoTrack = try #require(lines.first { $0.count == 4 && $0[1] == "video" }, "\(streams.output)")
        #expect(audioTrack[0] == "aac")
        let audioStart = try #require(Double(audioTrack[2])), audioSeconds = try #require(Double(audioTrack[3]))
        let videoStart = try #require(Double(videoTrack[2])), videoSeconds = try #require(Double(videoTrack[3]))
        #expect(audioStart < 0.01 && videoStart < 0.2, "\(streams.output)")
        #expect(abs((audioStart + audioSeconds) - (videoStart + videoSeconds)) <= 0.06, "\(streams.output)")
        let frames = try #require(json["audio_frames"] as? Int)
        #expect(abs(Double(frames) - audioSeconds * 48000 / 1024) <= 1, "\(frames) AAC frames for \(audioSeconds) s")
        #expect(try Self.decodes(path), "\(name) does not decode")
        // The beep: at 1.5 s of the file, so 1.5 − start after the first frame is shown.
        let pcm = dir.appendingPathComponent("a.raw").path
        let dec = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/ffmpeg"), ["-v", "error", "-y", "-i", path, "-map", "0:a", "-ac", "1", "-ar", "48000", "-f", "s16le", pcm], timeout: 60)
        try #require(dec.status == 0, "\(dec.stderr)")
        let samples = try Data(contentsOf: URL(fileURLWithPath: pcm)).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let first = try #require(samples.firstIndex { abs(Int($0)) > 1500 }, "no beep in the clip's audio")
        let beep = Double(first) / 48000
        #expect(abs(beep - (videoStart + 1.5 - start)) <= 0.03, "the beep at \(beep) s of the clip, expected \(videoStart + 1.5 - start) (clip from \(start) s)")
    }

    /// Three runs into one folder with max-clips=2: the counter goes on past the clips already
    /// there (never over a file), the oldest clip goes, and a file lensrecord did not write stays.
    @Test func retentionRemovesTheOldestAndNothingElse() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let other = dir.appendingPathComponent("c-000.mp4")
        try Data("not ours".utf8).write(to: other)
        for _ in 0..<3 {
            let r = try CLI.run(["run", "videotestsrc num-buffers=45 ! video/x-raw,width=160,height=120,framerate=30/1 ! x264enc key-int-max=15 "
                                 + "! h264parse ! lensrecord pre=1 post=1 record=start max-clips=2 location=\(dir.path)/c-%03d.mp4 ! fakesink"], timeout: 60)
            #expect(r.status == 0, "\(r.stderr)")
            usleep(50_000) // modification times a little apart
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(names == ["c-000.mp4", "c-002.json", "c-002.mp4", "c-003.json", "c-003.mp4"], "\(names)")
        #expect(try String(contentsOf: other, encoding: .utf8) == "not ours")
        let records = try Self.records(dir)
        #expect(records["c-003.mp4"]?["trigger"] as? [String] == ["start"], "\(records)")
        // record=start at the first frame: the whole 1.5 s stream (post ends it at 1 s + the frame).
        let p = try #require(Self.probe(dir.appendingPathComponent("c-003.mp4").path))
        #expect(p.frames == 30 || p.frames == 31, "\(p)")
    }

    /// A clip being recorded at Ctrl-C is finalized: it plays, its JSON is there, exit 0.
    @Test func aClipBeingRecordedAtInterruptIsFinalized() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let run = try Background.streamlens(["run", "-v", "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1 ! x264enc tune=zerolatency key-int-max=30 "
                                             + "! h264parse ! lensrecord record=manual post=600 location=\(dir.path)/live-{n}.mp4 ! fakesink"])
        try #require(run.waitFor("lensrecord0: video/x-h264", timeout: 60), "\(run.stderr)")
        sleep(2)
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        let records = try Self.records(dir)
        let json = try #require(records["live-1.mp4"], "\(records.keys) \(r.stderr.suffix(800))")
        let p = try #require(Self.probe(dir.appendingPathComponent("live-1.mp4").path))
        #expect(p.frames >= 30 && p.frames == json["frames"] as? Int, "\(p) \(json)")
        #expect(try Self.decodes(dir.appendingPathComponent("live-1.mp4").path))
        #expect(r.stderr.contains("0 dropped") && !r.stderr.contains("lensrecord0: 0 frames"), "\(r.stderr.suffix(800))")
    }

    /// The API's POST /api/sources/main/record makes a clip; a stage that is not there is a 404.
    @Test func theAPIRecordsAClip() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freeLoopbackPort(), u = "http://127.0.0.1:\(port)"
        let run = try Background.streamlens(["run", "--http", "\(port)", "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1 "
                                             + "! x264enc tune=zerolatency key-int-max=15 ! h264parse ! lensrecord name=rec on=none pre=1 post=1 location=\(dir.path)/api-{event}-{n}.mp4 ! fakesink"])
        try #require(HTTPAPITests.waitFor("\(u)/readyz", timeout: 120, process: run), "not ready: \(run.stderr)")
        sleep(2) // a pre-roll to keep
        let a = try HTTPAPITests.request("POST", "\(u)/api/sources/main/record?reason=doorbell")
        #expect(a.status == 202 && a.body.contains("\"rec\""), "\(a.status) \(a.body)")
        #expect(try HTTPAPITests.request("POST", "\(u)/api/sources/main/record?stage=nope").status == 404)
        #expect(try HTTPAPITests.request("POST", "\(u)/api/sources/other/record").status == 404)
        #expect(try HTTPAPITests.request("POST", "\(u)/api/sources/main/record?reason=a%20b").status == 422)
        let json = dir.appendingPathComponent("api-doorbell-1.json").path
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: json), Date() < deadline { usleep(100_000) }
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Self.records(dir)
        let record = try #require(records["api-doorbell-1.mp4"], "\(records.keys)")
        #expect(record["trigger"] as? [String] == ["doorbell"])
        // pre 1 s kept before the request and post 1 s after it: about 2 s.
        let p = try #require(Self.probe(dir.appendingPathComponent("api-doorbell-1.mp4").path))
        #expect(p.duration >= 1.4 && p.duration <= 2.8, "\(p)")
    }

    @Test func badInputsStopAtStartWithOneMessage() throws {
        let raw = try CLI.run(["run", "videotestsrc num-buffers=10 ! lensrecord ! fakesink"], timeout: 60)
        #expect(raw.status != 0 && raw.stderr.contains("lensrecord"), "\(raw.stderr)")
        let name = try CLI.run(["run", "videotestsrc num-buffers=10 ! x264enc ! h264parse ! lensrecord location=/tmp/clip.avi ! fakesink"], timeout: 60)
        #expect(name.status == 1 && name.stderr.contains("must name a .mp4 file"), "\(name.stderr)")
        let on = try CLI.run(["run", "videotestsrc num-buffers=10 ! x264enc ! h264parse ! lensrecord on=motion ! fakesink"], timeout: 60)
        #expect(on.status == 1 && on.stderr.contains("'motion' is not a trigger"), "\(on.stderr)")
    }

    /// A disk that fills while a clip is written (here the file size limit, RLIMIT_FSIZE, with
    /// SIGXFSZ ignored: every write past 1 MB fails as on a full disk, no root needed): the clip
    /// is cut back to its last whole fragment, decodes without an error, says `"complete": false`
    /// and how many frames it holds, and counts as failed (a clip cut mid-fragment used to sit
    /// under its name with decoding errors at its tail).
    @Test func aClipCutByAFullDiskIsCutBackToWhatDecodes() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let limited = #"import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "#
            + #"resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)); os.execv(sys.argv[1], sys.argv[1:])"#
        let run = try Background(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", limited, CLI.binary.path, "run",
            "videotestsrc is-live=true pattern=snow num-buffers=120 ! video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert "
            + "! x264enc tune=zerolatency speed-preset=ultrafast bitrate=4000 key-int-max=15 ! h264parse "
            + "! lensrecord name=rec pre=1 post=2 on=none record=full location=\(dir.path)/clip-%05d.mp4 ! fakesink"])
        #expect(run.waitForExit(timeout: 60 * CLI.slowdown), "\(run.stderr)")
        #expect(run.process.terminationStatus == 0, "\(run.stderr)")
        let clip = dir.appendingPathComponent("clip-00001.mp4").path
        let json = try #require(try Self.records(dir)["clip-00001.mp4"], "\(run.stderr)")
        #expect(json["complete"] as? Bool == false && (json["incomplete"] as? String)?.isEmpty == false && json["end"] == nil, "\(json)")
        let probed = try #require(Self.probe(clip), "ffprobe cannot read the clip")
        #expect(probed.frames > 0 && probed.frames == json["frames"] as? Int, "\(probed) \(json)")
        #expect(try Self.decodes(clip), "the clip does not decode cleanly")
        #expect(run.stderr.contains("rec: clip \(clip) cut short:") && run.stderr.contains("0 clips written") && run.stderr.contains("1 failed"),
                "\(run.stderr.suffix(800))")
    }

    /// The clip folder turns unwritable mid-run (a permission change; run as nobody, as root
    /// ignores file modes): each trigger costs one warning and no GStreamer-CRITICAL (the
    /// writer's objects were unreffed twice), and once the folder is writable again the next
    /// trigger writes a clip.
    @Test(.enabled(if: getuid() == 0, "switching to another user (nobody) needs root"))
    func aClipFolderThatTurnsUnwritableCostsWarningsAndRecovers() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let clips = dir.appendingPathComponent("clips"), binary = dir.appendingPathComponent("streamlens")
        try FileManager.default.createDirectory(at: clips, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: CLI.binary, to: binary) // reachable by nobody wherever the checkout is
        chmod(dir.path, 0o755)
        chmod(clips.path, 0o777)
        let run = try Background(URL(fileURLWithPath: "/usr/bin/setpriv"), ["--reuid=65534", "--regid=65534", "--clear-groups", binary.path, "run", "-v",
            "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert "
            + "! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=15 ! h264parse "
            + "! lensrecord name=rec pre=1 post=0.2 on=none location=\(clips.path)/c-%05d.mp4 ! fakesink"])
        try #require(run.waitFor("rec: video/x-h264", timeout: 60), "\(run.stderr)")
        chmod(clips.path, 0o555)
        // A trigger within a failed clip's `post` extends it (no second warning): several, paced.
        let warning = "warning: rec: no clip: cannot write"
        for _ in 1...8 {
            let seen = run.occurrences(of: warning)
            kill(run.pid, SIGUSR1)
            _ = run.waitFor(warning, count: seen + 1, timeout: 3)
        }
        #expect(run.occurrences(of: warning) >= 2, "\(run.stderr.suffix(600))")
        chmod(clips.path, 0o777)
        kill(run.pid, SIGUSR1)
        #expect(run.waitFor("rec: clip ", timeout: 30), "the clip event (-v prints it): \(run.stderr.suffix(600))")
        let r = run.stop(signal: SIGINT, timeout: 30)
        #expect(!r.timedOut && r.status == 0, "\(r.stderr.suffix(600))")
        #expect(!r.stderr.contains("CRITICAL"), "\(r.stderr.prefix(2000))")
        let written = try FileManager.default.contentsOfDirectory(atPath: clips.path).filter { $0.hasSuffix(".mp4") }
        #expect(written.count == 1, "\(written) \(r.stderr.suffix(600))")
    }
}
