import StreamLensGst
import StreamLensBackends
import StreamLensStages

/// Called by the plugin's init function (Sources/CStreamLensPlugin/plugin.c) when GStreamer
/// loads libgststreamlens.so: registers every built-in stage as a feature of the plugin.
@_cdecl("streamlens_plugin_register")
public func streamlensPluginRegister(_ plugin: UnsafeMutableRawPointer?) -> Int32 {
    guard let plugin else { return 0 }
    StandardBackends.register() // the model stages' local devices
    return GStreamer.registerPlugin(plugin, stages: builtinStages) ? 1 : 0
}
