import StreamLensCore

/// lensstylize's properties (`Settings`) and what it reads of them on every frame.
extension StylizeStage {
    public enum TemporalMode: String, Sendable, CaseIterable { case blend, off }
    /// `regions`: the whole frame, or inside or outside the regions of interest.
    public enum Regions: String, Sendable, CaseIterable { case all, inside, outside }

    public struct Settings: StageSettings {
        public var model = "Models/mosaic.json"
        public var styleImage = ""
        public var strength = 1.0
        public var temporal = TemporalMode.blend
        public var smoothing = 0.6
        public var regions = Regions.all
        public var labels = ""
        public var feather = 8
        public var inferenceSize = ""
        public var styles = "Models/mosaic.json,Models/waves.json,Models/embers.json,Models/magenta-style.json"
        public var inference = InferenceSettings()
        public var batch = BatchSettings()
        public var remote = RemoteSettings()
        public init() {}

        public static let properties: [Property<Settings>] = own + InferenceSettings.rows(\.inference, live: ["device", "precision"])
            + Property.group(\.batch) + Property.group(\.remote)

        private static let own: [Property<Settings>] = [
            .string("model", \.model, live: true,
                    help: "style model manifest (JSON): a feed-forward stylizer (Models/mosaic, waves, embers: trained by `streamlens train-style`) or an arbitrary-style network (Models/magenta-style.json)"),
            .string("style-image", \.styleImage, live: true, help: "picture whose style to copy (arbitrary-style models; empty: the manifest's default)"),
            .double("strength", \.strength, 0...1, live: true, help: "blend of stylized and original frame: 0 the original untouched, 1 the model's output"),
            .choice("temporal", \.temporal, live: true,
                    help: "against flicker on video: blend (each output blended with the previous one moved along the input's motion, optical flow at half the inference size, wherever that motion explains the input) or off (every frame painted on its own)"),
            .double("smoothing", \.smoothing, 0...0.95, live: true,
                    help: "with temporal=blend: weight of the previous output where the motion holds (0: off; higher is steadier, slower to follow a change of look)"),
            .choice("regions", \.regions, live: true,
                    help: "where to stylize: all (the whole frame), inside the regions of interest reaching the stage (e.g. lensdetect draw=false before it; a frame without one goes on untouched, the model not run), or outside them"),
            LabelFilter.property(\.labels, "with regions=inside|outside: only regions of these labels", live: true),
            .int("feather", \.feather, 0...1000, live: true,
                 help: "with regions=inside|outside: soft edge in pixels, the blend ramping linearly inside each box's edge, or centred on the outline of a region with a mask (0: hard edge)"),
            .string("inference-size", \.inferenceSize,
                    help: "resolution the model runs at: N (short side, frame's aspect), WxH, or empty for the manifest's size"),
            .string("styles", \.styles, live: true, help: "style models the number keys 1-9 pick in a preview window (comma-separated manifests)"),
        ]
    }

    /// The properties read on every frame, decoded once (at start and on each live change).
    struct LiveSettings {
        var strength: Double
        var temporal: TemporalMode
        var smoothing: Double
        /// nil: the whole frame (regions=all).
        var regions: RegionMask.Side?
        /// Empty: every region.
        var labels: LabelFilter
        var feather: Int
        init(_ settings: Settings) {
            strength = settings.strength
            temporal = settings.temporal
            smoothing = settings.smoothing
            regions = RegionMask.Side(rawValue: settings.regions.rawValue)
            labels = LabelFilter(text: settings.labels)
            feather = settings.feather
        }

        enum Coverage { case whole, nothing, masked(RegionMask) }

        /// What of the frame to stylize, its regions read now: the mask travels with the frame
        /// while it waits for its output.
        func coverage(of frame: Frame) -> Coverage {
            guard let regions else { return .whole }
            let kept = frame.pixels.regionsOfInterest().filter { labels.admits($0.label) }.map { (box: $0.box, mask: $0.mask) }
            let mask = RegionMask(regions: kept, side: regions, feather: feather, width: frame.format.width, height: frame.format.height)
            if !mask.boxes.isEmpty { return .masked(mask) }
            return regions == .inside ? .nothing : .whole // outside of nothing: the whole frame
        }
    }
}
