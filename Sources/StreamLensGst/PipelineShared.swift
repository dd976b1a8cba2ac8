import CGStreamer
import CGstShim
import Synchronization

/// What the stages of one pipeline share, kept on the pipeline itself (its top-level bin), so
/// that the pipelines of `streamlens serve` never wait for one another: stages setting up on a
/// format now (a model compiling), when the last one finished, and stages of this pipeline still
/// working through the frames that came while they set up.
final class PipelineShared: Sendable {
    /// Stages setting up on a format now (a model compiling, precision=auto timing its
    /// candidates), and when the last one finished (uptime, ns): the start timeout does not
    /// count that time (a model compiling on a busy machine is slow, not stuck).
    let formatSetups = Atomic<Int>(0)
    let lastFormatSetupEnd = Atomic<UInt64>(0)
    /// Live stages with a set-up backlog left: each keeps its frames until none has one.
    let setupBacklogs = Atomic<Int>(0)

    /// The shared state of the pipeline `element` is in (made the first time it is asked for).
    static func of(_ element: UnsafeMutablePointer<GstElement>) -> PipelineShared {
        let pointer = sl_element_pipeline_shared(element, {
            Unmanaged.passRetained(PipelineShared()).toOpaque()
        }, { pointer in
            guard let pointer else { return }
            Unmanaged<PipelineShared>.fromOpaque(pointer).release()
        })!
        return Unmanaged<PipelineShared>.fromOpaque(pointer).takeUnretainedValue()
    }
}
