import Foundation
import StreamLensCore

/// lensclassify's text readers (decoder `ctc`) after a tracker: each object's readings voted
/// (`TextVotes`), its reading now on every one of its regions, one `text` event when it
/// settles, and no more crops of it once settled — unless its box grows half as large again
/// (a closer view), when it is read again.
struct TrackedTexts {
    /// The region attribute the reading goes in ("text"); its score in this + "_score".
    let attribute: String
    var votes: TextVotes
    /// Settled objects, by id: the area of their box when last read.
    private var settledAreas: [Int: Double] = [:]
    private var pending: [FrameEvent] = []
    private var settledCount = 0

    init(attribute: String, votes: TextVotes) {
        self.attribute = attribute
        self.votes = votes
    }

    /// Whether `region`'s object is settled and need not be read on `frame`.
    mutating func isSettled(_ region: RegionOfInterest, frame: Int) -> Bool {
        guard region.objectId >= 0, votes.isSettled(region.objectId) else { return false }
        votes.seen(region.objectId, frame: frame)
        let area = region.width * region.height
        if let last = settledAreas[region.objectId], area >= 1.5 * last {
            settledAreas[region.objectId] = area
            return false
        }
        return true
    }

    /// A reading of `region`'s crop (a tracked object's) on `frame`.
    mutating func vote(_ reading: String, score: Double, on region: RegionOfInterest, frame: Int) {
        guard let settled = votes.add(reading, score: score, area: region.width * region.height, objectId: region.objectId, frame: frame) else { return }
        settledCount += 1
        settledAreas[region.objectId] = region.width * region.height
        if settledAreas.count > 4096 { settledAreas = settledAreas.filter { votes.reading(of: $0.key) != nil } }
        pending.append(FrameEvent(type: "text", zone: "", objectId: region.objectId, label: region.label,
                                  text: settled.text, score: (settled.score * 1000).rounded() / 1000, votes: settled.votes))
    }

    /// Each region of a tracked object with a reading gets it (and its score); the indices of
    /// the regions changed.
    func label(_ regions: inout [RegionOfInterest]) -> Set<Int> {
        var changed = Set<Int>()
        for i in regions.indices where regions[i].objectId >= 0 {
            guard let reading = votes.reading(of: regions[i].objectId) else { continue }
            regions[i].attributes[attribute] = reading.text
            regions[i].attributes[attribute + "_score"] = Self.format(reading.score)
            changed.insert(i)
        }
        return changed
    }

    /// The `text` events of objects settled since the last call, at `time` (seconds).
    mutating func takeEvents(time: Double?) -> [FrameEvent] {
        defer { pending = [] }
        return pending.map { var e = $0; e.time = time; return e }
    }

    static func format(_ score: Double) -> String { String(format: "%.3f", score) }

    /// Nil before any object settles (and always without a tracker).
    var summary: String? { settledCount > 0 ? "\(settledCount) objects' text settled" : nil }
}
