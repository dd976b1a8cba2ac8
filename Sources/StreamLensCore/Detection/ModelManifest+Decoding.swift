// How a manifest's parts are read, with their defaults (the fields' meaning: ModelManifest).

extension ModelManifest.Input {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        width = try c.decode(Int.self, forKey: .width)
        height = try c.decode(Int.self, forKey: .height)
        colorOrder = try c.decode(ColorOrder.self, forKey: .colorOrder)
        valueRange = try c.decode([Double].self, forKey: .valueRange)
        layout = try c.decode(Layout.self, forKey: .layout)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        resizable = try c.decodeIfPresent(Bool.self, forKey: .resizable) ?? false
        channelMean = try c.decodeIfPresent([Double].self, forKey: .channelMean)
        channelStd = try c.decodeIfPresent([Double].self, forKey: .channelStd)
        sizeFromFrame = try c.decodeIfPresent(SizeFromFrame.self, forKey: .sizeFromFrame)
    }
}

extension ModelManifest.ImageOutput {
    public init(from decoder: any Swift.Decoder) throws {
        let d = Self(), c = try decoder.container(keyedBy: CodingKeys.self)
        layout = try c.decodeIfPresent(ModelManifest.Input.Layout.self, forKey: .layout) ?? d.layout
        colorOrder = try c.decodeIfPresent(ModelManifest.Input.ColorOrder.self, forKey: .colorOrder) ?? d.colorOrder
        valueRange = try c.decodeIfPresent([Double].self, forKey: .valueRange) ?? d.valueRange
        output = try c.decodeIfPresent(String.self, forKey: .output)
    }
}

extension KeyedDecodingContainer {
    /// `value` replaced by the key's when the key is there: parameters whose every key has a
    /// default (`decoder.parameters` of the db and ctc families).
    func update<T: Decodable>(_ value: inout T, _ key: Key) throws {
        if let given = try decodeIfPresent(T.self, forKey: key) { value = given }
    }
}
