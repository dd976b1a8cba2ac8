/// A stage that takes the stream's audio too: its descriptor's `audioCaps` gives it a second sink
/// pad, `audio` (`… ! aacparse ! rec.audio`), whose buffers end here (nothing is passed on).
///
/// Both calls come on the stage's own thread, like every other call: the units that arrived on
/// the audio's streaming thread are kept by the bridge (`StageInbox`) and handed over before the
/// next frame, and at the end of the stream.
public protocol AudioInput: AnyObject {
    /// An encoded audio frame (a reference, not a copy), with its caps and segment.
    func audioArrived(_ audio: EncodedFrame)
    /// End-of-stream reached the audio input: no more audio.
    func audioEnded()
}
