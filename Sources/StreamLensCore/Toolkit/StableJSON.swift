import Foundation

extension JSONEncoder {
    /// The encoder for the JSON StreamLens writes (frame records, metadata lines, snapshot
    /// sidecars, `serve`'s answers): keys sorted, so one value is always the same text (files
    /// compare and diff, tests match), and slashes as they are (paths and URIs stay readable).
    public static func stable() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
