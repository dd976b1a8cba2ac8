import Testing
@testable import StreamLensCore

/// Keys in a preview window become property changes: what each kind of binding asks for.
struct KeyBindingTests {
    let properties = [
        PropertySpec("strength", .double(0...1), default: .double(1), live: true, help: ""),
        PropertySpec("interval", .int(1...1000), default: .int(1), live: true, help: ""),
        PropertySpec("overlay", .bool, default: .bool(false), live: true, help: ""),
        PropertySpec("model", .string, default: .string("a.json"), live: true, help: ""),
        PropertySpec("styles", .string, default: .string("a.json, b.json,c.json"), live: true, help: ""),
    ]

    func ask(_ binding: KeyBinding, _ values: [String: String]) -> String? {
        binding.assignment(properties: properties) { values[$0] }.map { "\($0.property)=\($0.value)" }
    }

    @Test func stepsStayInRangeWithoutBinaryDrift() {
        let down = KeyBinding(["minus"], .step(property: "strength", by: -0.1), help: "")
        let up = KeyBinding(["equal"], .step(property: "strength", by: 0.1), help: "")
        #expect(ask(down, ["strength": "0.3"]) == "strength=0.2")
        #expect(ask(down, ["strength": "0.1"]) == "strength=0")
        #expect(ask(down, ["strength": "0"]) == nil) // already at the bottom: nothing to set
        #expect(ask(up, ["strength": "0.95"]) == "strength=1")
        #expect(ask(up, ["strength": "0.7000000000000001"]) == "strength=0.8")
        #expect(ask(up, ["strength": "not a number"]) == nil)
    }

    @Test func cyclesWrapAndCompareNumbersAsNumbers() {
        let interval = KeyBinding(["i"], .cycle(property: "interval", values: ["1", "2", "4", "8"]), help: "")
        #expect(ask(interval, ["interval": "2"]) == "interval=4")
        #expect(ask(interval, ["interval": "8"]) == "interval=1")
        #expect(ask(interval, ["interval": "3"]) == "interval=1") // not in the list: the first
        let smoothing = KeyBinding(["s"], .cycle(property: "smoothing", values: ["0", "0.5", "0.8"]), help: "")
        #expect(ask(smoothing, ["smoothing": "0.50000"]) == "smoothing=0.8")
    }

    @Test func togglesAndPicks() {
        let overlay = KeyBinding(["f"], .toggle(property: "overlay"), help: "")
        #expect(ask(overlay, ["overlay": "false"]) == "overlay=true")
        #expect(ask(overlay, ["overlay": "true"]) == "overlay=false")
        let keys = KeyBinding.numberKeys(property: "model", listProperty: "styles", help: "")
        #expect(keys.count == 9 && keys[1].keys == ["2", "KP_2"])
        let values = ["model": "a.json", "styles": "a.json, b.json,c.json"]
        #expect(ask(keys[1], values) == "model=b.json")
        #expect(ask(keys[0], values) == nil) // already that model
        #expect(ask(keys[3], values) == nil) // no fourth style
    }

    @Test func commandsQuoteValuesWithSpaces() throws {
        #expect(KeyBinding.command(element: "lensstylize0", property: "model", value: "Models/a b.json") == #"set lensstylize0 model="Models/a b.json""#)
        #expect(KeyBinding.command(element: "lensdetect0", property: "overlay", value: "true") == "set lensdetect0 overlay=true")
        // What the control channel parses back.
        #expect(try ControlCommand.parse(KeyBinding.command(element: "s", property: "model", value: #"x "y".json"#))
                == .set(element: "s", assignments: [("model", #"x "y".json"#)]))
    }
}
