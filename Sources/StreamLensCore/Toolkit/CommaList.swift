import Foundation

/// A comma-separated list as properties and options give them ("person, car,,bus"): each item
/// trimmed of spaces, empty ones left out, so a stray comma or space never names an empty item.
public func commaList(_ text: String) -> [String] {
    text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}
