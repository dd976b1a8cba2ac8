import Foundation

/// How 8-bit pixels become the network's values: `value_range` maps 0…255 onto [lo, hi], then
/// `mean` and `std`, per channel, are taken off and divided by (PaddleOCR's and torchvision's
/// ImageNet normalisation). Folded into OpenVINO's form, `(x - mean) / scale` on 0…255, one
/// value for all channels or one per channel.
extension ModelManifest.Input {
    /// Per channel (or one for all): `(x - means[c]) / scales[c]` on 8-bit x. Without mean and
    /// std: scale = 255 / (hi - lo), mean = -lo * scale ([-1, 1]: 127.5 and 127.5; [0, 1]: 0
    /// and 255; [0, 255]: 0 and 1). With them: mean = (m - lo) * 255 / (hi - lo) and
    /// scale = s * 255 / (hi - lo). Valid once the manifest is validated.
    public var means: [Double] { perChannel.map { ($0.mean - valueRange[0]) * span } }
    public var scales: [Double] { perChannel.map { $0.std * span } }

    /// The 8-bit pixel the network sees as 0 on every channel, as a crop packs it (R, G, B, or
    /// one grey): what a recognizer's input is padded with (PaddleOCR pads its normalised
    /// input with zeros).
    public var zeroPixel: [UInt8] {
        let channels = colorOrder == .gray ? 1 : 3
        var values = (0..<channels).map { c in UInt8(min(max(means[means.count == 1 ? 0 : c].rounded(), 0), 255)) }
        if colorOrder == .bgr { values.reverse() }
        return values
    }

    private var span: Double { 255 / (valueRange[1] - valueRange[0]) }

    /// Mean and std paired, one pair for all channels or one per channel.
    private var perChannel: [(mean: Double, std: Double)] {
        let mean = channelMean ?? [0], std = channelStd ?? [1]
        let count = max(mean.count, std.count)
        return (0..<count).map { c in (mean.count == 1 ? mean[0] : mean[c], std.count == 1 ? std[0] : std[c]) }
    }

    func validateChannelNormalization(what: String) throws {
        let channels = colorOrder == .gray ? 1 : 3
        for (key, values) in [("mean", channelMean), ("std", channelStd)] {
            guard let values else { continue }
            guard values.count == 1 || values.count == channels else {
                throw StageError("\(what) \(key) has \(values.count) values: give 1, or one per channel (\(channels) for \(colorOrder.rawValue))")
            }
            guard values.allSatisfy(\.isFinite) else { throw StageError("\(what) \(key) \(values) is not finite numbers") }
        }
        if let std = channelStd, !std.allSatisfy({ $0 > 0 }) { throw StageError("\(what) std \(std) must be above 0") }
        // The pre-processing divides by the scale: 1 / scale must be a number too.
        guard means.allSatisfy(\.isFinite), scales.allSatisfy({ $0.isFinite && $0 > 0 && (1 / $0).isFinite }) else {
            throw StageError("\(what) mean and std over value_range \(valueRange) give no usable normalisation")
        }
    }
}
