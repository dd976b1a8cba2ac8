import Foundation

/// The resolution an image-to-image model runs at, whatever the frame size: the stage shrinks
/// each frame to it and scales the result back, so a 4K frame costs the model what a 320×180
/// one does (`inference-size` property).
public enum InferenceSize: Sendable, Equatable, CustomStringConvertible {
    /// The manifest's input size (a fixed-size model's own).
    case manifest
    /// The frame's aspect ratio with this short side (e.g. 256 → 456×256 for 16:9 frames).
    case shortSide(Int)
    /// Exactly this size.
    case fixed(width: Int, height: Int)

    /// Sides are rounded to this multiple: feed-forward stylizers halve the size two or three
    /// times and double it back, so other sizes come out a few pixels off.
    public static let multiple = 8
    public static let limits = 16...4096

    /// "" (manifest), "N" (short side) or "WxH".
    public static func parse(_ text: String) throws -> InferenceSize {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t.isEmpty { return .manifest }
        func side(_ s: Substring) throws -> Int {
            guard let v = Int(s), limits.contains(v) else {
                throw StageError("inference-size=\(text): sides must be whole numbers in \(limits.lowerBound)…\(limits.upperBound)")
            }
            return v
        }
        let parts = t.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return .shortSide(try side(parts[0]))
        case 2: return .fixed(width: try side(parts[0]), height: try side(parts[1]))
        default: throw StageError("inference-size=\(text): expected N (short side) or WxH, e.g. 256 or 320x180")
        }
    }

    /// The size for frames of `frameWidth`×`frameHeight`, given the manifest's input size.
    public func resolve(frameWidth: Int, frameHeight: Int, manifestWidth: Int, manifestHeight: Int) -> (width: Int, height: Int) {
        switch self {
        case .manifest:
            return (manifestWidth, manifestHeight)
        case .fixed(let w, let h):
            return (w, h)
        case .shortSide(let n):
            let m = Self.multiple
            func round(_ v: Double) -> Int { max(m, Int((v / Double(m)).rounded()) * m) }
            guard frameWidth > 0, frameHeight > 0 else { return (n, n) }
            if frameWidth >= frameHeight {
                return (round(Double(n) * Double(frameWidth) / Double(frameHeight)), round(Double(n)))
            }
            return (round(Double(n)), round(Double(n) * Double(frameHeight) / Double(frameWidth)))
        }
    }

    public var description: String {
        switch self {
        case .manifest: return "the manifest's size"
        case .shortSide(let n): return "short side \(n)"
        case .fixed(let w, let h): return "\(w)x\(h)"
        }
    }
}
