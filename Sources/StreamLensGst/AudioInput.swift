/// A stage that takes the stream's audio too: its descriptor's `audioCaps` gives it a second sink
/// pad, `audio` (`… ! aacparse ! rec.audio`), whose buffers end here (nothing is passed on).
///
/// Both calls come on the audio's streaming thread, at the same time as the stage's own calls
/// on its worker: take the unit and return (never wait, never touch the stage's other state);
/// do the work on the stage's own thread, in `process`.
public protocol AudioInput: AnyObject {
    /// An encoded audio frame (a reference, not a copy), with its caps and segment.
    func audioArrived(_ audio: EncodedFrame)
    /// End-of-stream reached the audio input: no more audio.
    func audioEnded()
}
