import StreamLensCore

/// Every stage this build provides, in the order `streamlens stages` lists them. A new stage is
/// its own file plus its line here (Swift has no static initialisers to register it by itself).
public var builtinStages: [any Stage.Type] {
    [PassStage.self, DetectStage.self, ClassifyStage.self, TrackStage.self, ZoneStage.self, BlurStage.self, OverlayStage.self, MetadataStage.self, SnapshotStage.self, RecordStage.self, StylizeStage.self,
     WatchdogStage.self, RTSPStage.self]
}
