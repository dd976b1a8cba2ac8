// tracker-bench: what MultiObjectTracker (lenstrack's tracker) costs a frame with N objects.
// N synthetic objects (sizes 30–90 px) move at constant random velocities over a 1280x720
// frame, bouncing off its edges; their detections carry ±2 px of noise and 5 % of them are
// missed on each frame, so the tracker pairs, predicts and re-finds as it does on real video.
//     swift run -c release tracker-bench 1 10 100      (bench/track.sh runs it)
// Prints one line per N: "objects N: median U µs, p95 V µs a frame (F frames), ids given I".
import Foundation
import StreamLensCore

struct Generator: RandomNumberGenerator {   // deterministic: the same objects every run
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func measure(objects n: Int, frames: Int = 600) -> (median: Double, p95: Double, ids: Int) {
    var rng = Generator(state: UInt64(n))
    let (width, height) = (1280.0, 720.0)
    struct Object { var x, y, vx, vy, size: Double }
    var objects = (0..<n).map { _ in
        Object(x: .random(in: 100...1180, using: &rng), y: .random(in: 100...620, using: &rng),
               vx: .random(in: -6...6, using: &rng), vy: .random(in: -4...4, using: &rng), size: .random(in: 30...90, using: &rng))
    }
    let tracker = MultiObjectTracker()
    var times: [Double] = []
    for frame in 0..<frames {
        var detections: [MultiObjectTracker.Input] = []
        for i in objects.indices {
            objects[i].x += objects[i].vx; objects[i].y += objects[i].vy
            if objects[i].x < 0 || objects[i].x > width { objects[i].vx = -objects[i].vx }
            if objects[i].y < 0 || objects[i].y > height { objects[i].vy = -objects[i].vy }
            guard Double.random(in: 0..<1, using: &rng) >= 0.05 else { continue }
            let o = objects[i], s = o.size / 2
            let nx = Double.random(in: -2...2, using: &rng), ny = Double.random(in: -2...2, using: &rng)
            detections.append(.init(box: Box(xMin: o.x - s + nx, yMin: o.y - s + ny, xMax: o.x + s + nx, yMax: o.y + s + ny),
                                    score: .random(in: 0.3...0.99, using: &rng), labelId: 0, label: "object"))
        }
        detections.shuffle(using: &rng)
        let start = DispatchTime.now().uptimeNanoseconds
        _ = tracker.update(detections)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3
        if frame >= 30 { times.append(elapsed) }   // after the tracks are up
    }
    times.sort()
    return (times[times.count / 2], times[min(times.count - 1, Int(Double(times.count) * 0.95))], tracker.confirmedCount)
}

let counts = CommandLine.arguments.dropFirst().compactMap { Int($0) }
for n in counts.isEmpty ? [1, 10, 100] : counts {
    let r = measure(objects: n)
    print(String(format: "objects %d: median %.1f µs, p95 %.1f µs a frame (570 frames), ids given %d", n, r.median, r.p95, r.ids))
}
