import Foundation

/// One reading per tracked object: the readings of its crops, frame after frame, voted.
/// Only views of about the largest size seen vote: a reading of a box 1.3 times larger than
/// earlier ones supersedes them (a line coming into view, or closer), and one of a box that
/// much smaller counts for nothing (a line leaving the view, or farther). A reading with
/// `needed` votes that leads the others, cast while the box held its size (within 1.1 times),
/// settles the object's text, once (the `text` event); later readings still vote, so a closer
/// view can correct it, but settle nothing again. Readings that differ only in spaces are one
/// (recognizers disagree on them from frame to frame: "KX 4729", "KX4729"), spelt as most of
/// its votes spell it. With a pattern (`plate-pattern=`, a regular expression a whole reading must
/// match), readings are first made of capital letters and digits only, and characters a
/// recognizer confuses (O/0, I/1, B/8, S/5, Z/2) are swapped, fewest first, until the pattern
/// matches; a reading no swap makes match is no vote.
public struct TextVotes {
    /// An object's reading now: the most voted (the best mean score between equals).
    public struct Reading: Sendable, Equatable {
        public var text: String
        /// The mean score of its votes.
        public var score: Double
        public var votes: Int
    }

    private struct Vote { var text: String; var score: Double; var area: Double }
    private struct Track {
        var cast: [Vote] = []
        var settled = false
        var lastFrame = 0
        var current: Reading?
    }

    public let needed: Int
    /// A view this many times larger supersedes the votes of smaller ones.
    static let larger = 1.3
    /// The votes that settle a reading come from boxes within this ratio of each other.
    static let steady = 1.1
    private let pattern: Regex<AnyRegexOutput>?
    private var tracks: [Int: Track] = [:]

    /// `pattern`: "" for none; a StageError names a pattern that is not a regular expression.
    public init(needed: Int, pattern: String) throws {
        self.needed = max(1, needed)
        if pattern.isEmpty {
            self.pattern = nil
        } else {
            do { self.pattern = try Regex(pattern) } catch {
                throw StageError("plate-pattern=\(pattern) is not a regular expression: \(error)")
            }
        }
    }

    /// The reading as it is voted: spaces at its ends dropped and runs of them made one; with a
    /// pattern, fitted to it (nil: it cannot be).
    public func normalized(_ reading: String) -> String? {
        guard let pattern else {
            let words = reading.split(whereSeparator: \.isWhitespace)
            return words.isEmpty ? nil : words.joined(separator: " ")
        }
        let plain = Array(reading.uppercased().unicodeScalars.filter { ("A"..."Z").contains($0) || ("0"..."9").contains($0) })
        guard !plain.isEmpty else { return nil }
        let swaps: [Unicode.Scalar: Unicode.Scalar] = ["O": "0", "0": "O", "I": "1", "1": "I", "B": "8", "8": "B", "S": "5", "5": "S", "Z": "2", "2": "Z"]
        let swappable = plain.indices.filter { swaps[plain[$0]] != nil }.prefix(12)
        // Subsets of the swappable positions by size: the reading itself, then one swap, two…
        let subsets = (0..<(1 << swappable.count)).sorted { $0.nonzeroBitCount < $1.nonzeroBitCount }
        for subset in subsets {
            var candidate = plain
            for (bit, i) in swappable.enumerated() where subset & (1 << bit) != 0 { candidate[i] = swaps[candidate[i]]! }
            let text = String(String.UnicodeScalarView(candidate))
            if (try? pattern.wholeMatch(in: text)) != nil { return text }
        }
        return nil
    }

    /// A reading of `objectId`'s crop on `frame`; the reading that settles it, the first time
    /// one does.
    /// A reading of `objectId`'s crop on `frame`, its box `area` (any unit, the same each time);
    /// the reading that settles it, the first time one does.
    public mutating func add(_ reading: String, score: Double, area: Double, objectId: Int, frame: Int) -> Reading? {
        guard let text = normalized(reading), area > 0, area.isFinite else { return nil }
        var track = tracks[objectId] ?? Track()
        track.lastFrame = frame
        defer { tracks[objectId] = track }
        let largest = track.cast.map(\.area).max() ?? 0
        guard area * Self.larger >= largest else { return nil }
        track.cast.removeAll { $0.area * Self.larger < area }
        track.cast.append(Vote(text: text, score: score, area: area))
        if track.cast.count > 1000 { track.cast.removeFirst() }
        func key(_ text: String) -> String { text.filter { !$0.isWhitespace } }
        var tally: [String: (votes: Int, scoreSum: Double)] = [:]
        for v in track.cast { tally[key(v.text), default: (0, 0)].votes += 1; tally[key(v.text)]!.scoreSum += v.score }
        let best = tally.max { a, b in (a.value.votes, a.value.scoreSum) < (b.value.votes, b.value.scoreSum) }!
        let spellings = track.cast.filter { key($0.text) == best.key }
        let spelt = Dictionary(grouping: spellings, by: \.text).max { a, b in (a.value.count, b.key) < (b.value.count, a.key) }!.key
        track.current = Reading(text: spelt, score: best.value.scoreSum / Double(best.value.votes), votes: best.value.votes)
        let runnerUp = tally.filter { $0.key != best.key }.map(\.value.votes).max() ?? 0
        let recent = spellings.suffix(needed).map(\.area)
        var settles: Reading?
        if !track.settled, best.value.votes >= needed, best.value.votes > runnerUp, recent.max()! <= Self.steady * recent.min()! {
            track.settled = true
            settles = track.current
        }
        if tracks.count > 4096 { tracks = tracks.filter { frame - $0.value.lastFrame < 1000 } }
        return settles
    }

    /// `objectId`'s reading now, nil before any.
    public func reading(of objectId: Int) -> Reading? { tracks[objectId]?.current }

    /// Whether `objectId`'s text is settled.
    public func isSettled(_ objectId: Int) -> Bool { tracks[objectId]?.settled ?? false }

    /// Marks `objectId` seen on `frame` (its memory is kept while it is).
    public mutating func seen(_ objectId: Int, frame: Int) { tracks[objectId]?.lastFrame = frame }
}
