import Foundation

/// A key a stage answers in a preview window: pressed in a video sink's window (ximagesink,
/// glimagesink…), it becomes a property change on the stage — the same `set` the control channel
/// carries out, so a key can do nothing a `--control` command could not (one mechanism).
///
/// Keys are named as GStreamer's navigation events name them: X keysym names of the unshifted
/// key ("1", "d", "equal" for + on a US keyboard, "minus", "KP_Add", "space").
public struct KeyBinding: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Adds `by` to a number property, kept within its range.
        case step(property: String, by: Double)
        /// The next value of a list (after the current one; the first if the current is not in it).
        case cycle(property: String, values: [String])
        /// Flips a boolean property.
        case toggle(property: String)
        /// Sets `property` to the index-th item (from 1) of the comma-separated list in `listProperty`.
        case pick(property: String, listProperty: String, index: Int)
    }

    /// The navigation key names that trigger it.
    public var keys: [String]
    /// What `streamlens stages` and README show for the key ("+", "1-9", "space").
    public var label: String
    public var action: Action
    public var help: String

    public init(_ keys: [String], label: String? = nil, _ action: Action, help: String) {
        self.keys = keys
        self.label = label ?? keys[0]
        self.action = action
        self.help = help
    }

    /// Keys 1…9, each picking that item of a list property.
    public static func numberKeys(property: String, listProperty: String, help: String) -> [KeyBinding] {
        (1...9).map { i in
            KeyBinding(["\(i)", "KP_\(i)"], label: "1-9", .pick(property: property, listProperty: listProperty, index: i), help: help)
        }
    }

    /// The property and value this key sets, given the element's current values (`current`
    /// returns a property's value as text) and the property table; nil when it changes nothing
    /// (a number key past the end of the list, a step at the end of the range).
    public func assignment(properties: [PropertySpec], current: (String) -> String?) -> (property: String, value: String)? {
        switch action {
        case .step(let property, let by):
            guard let spec = properties.first(where: { $0.name == property }),
                  let now = current(property).flatMap(Double.init) else { return nil }
            var next = now + by
            if case .double(let range) = spec.kind { next = min(max(next, range.lowerBound), range.upperBound) }
            if case .int(let range) = spec.kind { next = min(max(next.rounded(), Double(range.lowerBound)), Double(range.upperBound)) }
            // Steps of 0.1 added in binary drift (0.30000000000000004): keep two decimals.
            next = (next * 100).rounded() / 100
            guard next != now else { return nil }
            if case .int = spec.kind { return (property, String(Int(next))) }
            return (property, String(format: "%g", next))
        case .cycle(let property, let values):
            guard !values.isEmpty else { return nil }
            let now = current(property) ?? ""
            // Numbers compare as numbers: GObject prints a double 0.5 as "0.5" or "0.50000".
            let index = values.firstIndex { $0 == now || (Double($0) != nil && Double($0) == Double(now)) }
            let next = index.map { values[($0 + 1) % values.count] } ?? values[0]
            return next == now ? nil : (property, next)
        case .toggle(let property):
            let now = current(property) ?? "false"
            return (property, now == "true" ? "false" : "true")
        case .pick(let property, let listProperty, let index):
            let list = commaList(current(listProperty) ?? "")
            guard index >= 1, index <= list.count, list[index - 1] != current(property) else { return nil }
            return (property, list[index - 1])
        }
    }

    /// The `set` command line for the control channel.
    public static func command(element: String, property: String, value: String) -> String {
        let quoted = value.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" })
            ? "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
            : value
        return "set \(element) \(property)=\(quoted)"
    }
}

/// Keys the host itself answers, whatever the stages: listed with the stages' own.
extension KeyBinding {
    /// A key as a browser names it (KeyboardEvent.key: "+", "-", " ", "a") as the navigation
    /// events of a preview window name it (X keysyms: "plus", "minus", "space", "a"), which is
    /// what bindings list. Names already keysyms pass unchanged.
    public static func keysym(_ key: String) -> String {
        let names: [String: String] = ["+": "plus", "-": "minus", "=": "equal", " ": "space", "Spacebar": "space", ",": "comma",
                                       ".": "period", "/": "slash", "*": "asterisk", "[": "bracketleft", "]": "bracketright",
                                       "ArrowLeft": "Left", "ArrowRight": "Right", "ArrowUp": "Up", "ArrowDown": "Down"]
        return names[key] ?? key
    }
}

public enum HostKeys {
    public static let pause = (keys: ["space"], label: "space", help: "pauses and resumes the pipeline")
}

extension Array where Element == KeyBinding {
    /// The list property the number keys pick a value from (lensstylize's `styles`, for
    /// `model`): where a console finds a stage's choices without knowing the stage.
    public var pickList: (property: String, listProperty: String)? {
        for binding in self { if case .pick(let property, let list, _) = binding.action { return (property, list) } }
        return nil
    }
}

