/// A colour as a `color=` property gives it: `#rrggbb` (the `#` may be left out).
public struct RGBColour: Sendable, Equatable {
    public var red, green, blue: UInt8
}

extension RGBColour {
    /// nil unless six hex digits follow the optional `#`.
    public init?(hex text: String) {
        let hex = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard hex.count == 6, let v = Int(hex, radix: 16) else { return nil }
        self.init(red: UInt8((v >> 16) & 0xFF), green: UInt8((v >> 8) & 0xFF), blue: UInt8(v & 0xFF))
    }

    /// Each channel 0…1, as cairo takes it.
    public var unit: (Double, Double, Double) { (Double(red) / 255, Double(green) / 255, Double(blue) / 255) }
}
