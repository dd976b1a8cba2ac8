import Foundation

// A resizable detector's input sized for each stream (`input.size_from_frame`).
extension ModelManifest.Input {
    /// The frame scaled down so that its longer side is at most `max_side` (never up), each
    /// side then rounded to a multiple of `multiple` (at least one): 640×360 → 640×352,
    /// 1280×720 → 960×544 for PaddleOCR's 960 and 32 (its `DetResizeForTest`).
    public struct SizeFromFrame: Sendable, Codable, Equatable {
        public var maxSide: Int
        public var multiple: Int
        public init(maxSide: Int, multiple: Int) { self.maxSide = maxSide; self.multiple = multiple }
        enum CodingKeys: String, CodingKey {
            case maxSide = "max_side", multiple
        }
    }

    /// The input for frames of `frameWidth` × `frameHeight`: `size_from_frame`'s size, else
    /// this one.
    public func sized(forFrameWidth frameWidth: Int, height frameHeight: Int) -> Self {
        guard let rule = sizeFromFrame, frameWidth > 0, frameHeight > 0 else { return self }
        let ratio = min(1, Double(rule.maxSide) / Double(max(frameWidth, frameHeight)))
        func side(_ v: Int) -> Int { max(rule.multiple, Int((Double(v) * ratio / Double(rule.multiple)).rounded()) * rule.multiple) }
        var input = self
        (input.width, input.height) = (side(frameWidth), side(frameHeight))
        return input
    }

    /// What JSON cannot rule out: a rule needs a resizable model, and sizes it can reach.
    func validateSizeFromFrame(what: String) throws {
        guard let rule = sizeFromFrame else { return }
        guard resizable else { throw StageError("\(what) size_from_frame needs \"resizable\": true (the model must take any size)") }
        guard (1...1024).contains(rule.multiple), (rule.multiple...8192).contains(rule.maxSide) else {
            throw StageError("\(what) size_from_frame: multiple \(rule.multiple) must be 1…1024 and max_side \(rule.maxSide) from it to 8192")
        }
    }
}
