import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The soak run's parts: its schedule, what it measures in the process under test, and how it
// reads the stages' `-v` lines. The test and its pass criteria are in SoakTests.swift.

/// When things happen in a soak run of `duration` seconds. Times count from the moment the
/// server under test announced its URL (its first frame).
///
/// - 0–60 s, the baseline: one client joins and leaves politely (at 15 s), one vanishes (25–31 s);
///   from 45 s only the resident client watches. The sample at 60 s is the reference.
/// - Then 60-second cycles while a whole cycle fits before the last 20 s:
///   +5 a UDP client that vanishes at +11 (killed: no TEARDOWN); +15 and +16 two clients that
///   leave politely after their frames (TCP, then UDP: three watching at once with the resident
///   one); +25 a TCP client killed at +31; +35 the camera is killed and +39 started again (an
///   outage of 4 s, twice the watchdog's `timeout`, so the stall is noticed as such).
/// - The last 20 s or more are quiet (only the resident client, the camera up), so the final
///   sample is taken in the same state as the one at 60 s: like is compared with like.
/// An outage every minute rather than every few: more restarts in the same time make a leak per
/// restart show sooner, and the 3-minute run gets two of them.
struct SoakPlan {
    enum Event: Equatable {
        case politeClient(protocols: String)
        case rudeClientJoins(id: Int, protocols: String)
        case rudeClientVanishes(id: Int)
        case cameraDown
        case cameraUp
    }

    let duration: Double
    static let baseline: Double = 60
    static let sampleInterval: Double = 5
    static let cycle: Double = 60
    static let quietEnd: Double = 20
    private(set) var events: [(at: Double, event: Event)] = []

    init(minutes: Double) {
        duration = max(2, minutes) * 60
        var rude = 0
        func add(_ at: Double, _ e: Event) { events.append((at, e)) }
        add(15, .politeClient(protocols: "udp"))
        add(25, .rudeClientJoins(id: rude, protocols: "tcp")); add(31, .rudeClientVanishes(id: rude)); rude += 1
        var start = Self.baseline
        // The cycle's last event is at +39; the camera is back a second or two later.
        while start + 39 <= duration - Self.quietEnd {
            add(start + 5, .rudeClientJoins(id: rude, protocols: "udp")); add(start + 11, .rudeClientVanishes(id: rude)); rude += 1
            add(start + 15, .politeClient(protocols: "tcp"))
            add(start + 16, .politeClient(protocols: "udp"))
            add(start + 25, .rudeClientJoins(id: rude, protocols: "tcp")); add(start + 31, .rudeClientVanishes(id: rude)); rude += 1
            add(start + 35, .cameraDown)
            add(start + 39, .cameraUp)
            start += Self.cycle
        }
    }

    var outages: Int { events.filter { $0.event == .cameraDown }.count }
    var clientJoins: Int {
        events.filter {
            switch $0.event {
            case .politeClient, .rudeClientJoins: return true
            default: return false
            }
        }.count
    }

    /// SOAK_MINUTES from the environment (`make soak SOAK_MINUTES=30`), else 3 (`make test`).
    static func minutesFromEnvironment() -> Double {
        ProcessInfo.processInfo.environment["SOAK_MINUTES"].flatMap(Double.init) ?? 3
    }
}

/// Resident set size, threads and open file descriptors of a process (Linux /proc).
struct ProcessFootprint {
    var rssKilobytes = 0
    var threads = 0
    var fileDescriptors = 0

    init?(pid: Int32) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") {
            let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard f.count >= 2 else { continue }
            if f[0] == "VmRSS:" { rssKilobytes = Int(f[1]) ?? 0 }
            if f[0] == "Threads:" { threads = Int(f[1]) ?? 0 }
        }
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        fileDescriptors = fds.count
    }
}

/// The figures of a stage's line, as `streamlens run -v` prints them every 5 s ("interval") and
/// at the end of stream, e.g.
/// `serve: 612 frames in, 377 out, 235 dropped, 25.5 fps, frame age p50 62 ms p95 97 ms max 127 ms, at most 1 client at once (live)`.
/// Frame age quantiles are over the stage's most recent 1024 frames (FrameStatistics.window).
struct StageLine {
    var framesIn = 0, framesOut = 0, dropped = 0
    var ageP50: Double?, ageP95: Double?
    /// lensstylize: median time a frame, ms ("35.1 ms a frame"); lensdetect: median inference, ms.
    var stylizeFrameMilliseconds: Double?
    var detectInferenceMilliseconds: Double?
    var faceBoxes: Int?

    init?(_ line: Substring) {
        let words = line.replacingOccurrences(of: ",", with: "").split(separator: " ").map(String.init)
        func before(_ w: String) -> Double? { words.firstIndex(of: w).flatMap { $0 > 0 ? Double(words[$0 - 1]) : nil } }
        func after(_ w: String) -> Double? { words.firstIndex(of: w).flatMap { $0 + 1 < words.count ? Double(words[$0 + 1]) : nil } }
        guard let i = before("frames"), let o = before("out"), let d = before("dropped") else { return nil }
        framesIn = Int(i); framesOut = Int(o); dropped = Int(d)
        ageP50 = after("p50"); ageP95 = after("p95")
        if let r = line.range(of: " ms a frame") {
            stylizeFrameMilliseconds = Double(line[..<r.lowerBound].split(separator: " ").last ?? "")
        }
        if let r = line.range(of: "inference "), line.contains("ms median") {
            detectInferenceMilliseconds = Double(line[r.upperBound...].split(separator: " ").first ?? "")
        }
        if let r = line.range(of: " face boxes") {
            faceBoxes = Int(line[..<r.lowerBound].split(separator: " ").last ?? "")
        }
    }

    /// The last line of stage `name` in `log` (its newest interval line, or its summary).
    static func latest(_ name: String, in log: String) -> StageLine? {
        log.split(separator: "\n").last { $0.hasPrefix("\(name): ") && $0.contains(" frames in, ") }
            .flatMap { StageLine($0.dropFirst(name.count + 2)) }
    }
}

/// Players the server says are connected: its latest "serve: N clients" notice.
func connectedClients(_ name: String, in log: String) -> Int {
    guard let line = log.split(separator: "\n").last(where: {
        $0.hasPrefix("\(name): ") && ($0.hasSuffix(" client") || $0.hasSuffix(" clients"))
    }) else { return 0 }
    let word = line.dropFirst(name.count + 2).split(separator: " ").first.map(String.init) ?? ""
    return Int(word) ?? 0 // "no clients"
}

/// The index in the newest file name of a multifilesink folder (`f%08d`): how many frames
/// (H.264 access units) a player has received so far, minus one; -1 before the first.
func framesReceived(in folder: URL) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    return names.compactMap { Int($0.dropFirst().prefix(8)) }.max() ?? -1
}
