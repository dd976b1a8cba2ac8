import StreamLensCore
import Synchronization

/// What other threads hand a stage's frame path, and what they read of it: a property set on
/// the element (any thread), the audio input's units (the audio's streaming thread), a
/// failure upstream of a watchdog (the bus thread), a stop (the thread stopping the pipeline);
/// and for the host, what the stage dropped for errors. All of it a Mutex or an Atomic: the
/// frame path takes what came between two frames, on its own thread.
final class StageInbox: Sendable {
    let stopping = Atomic<Bool>(false)
    /// The element's properties after a change, not yet given to the stage.
    let settings = Mutex<PropertyValues?>(nil)
    /// An error the source part of a watchdog stage posted, not yet handled.
    let sourceFailure = Mutex<String?>(nil)

    /// Audio units (`AudioInput`) not yet given to the stage, and whether the audio ended.
    struct Audio: Sendable {
        var units: [EncodedFrame] = []
        var ended = false
        var endTold = false
    }
    let audio = Mutex(Audio())
    /// Units kept between two frames at most (the oldest go first: video that stalls while
    /// audio flows costs the stage some audio, never unbounded memory).
    static let maxAudioUnits = 2048

    /// Frames dropped for errors, the first reason, and whether the stage ran live (read by
    /// the host at end of stream: a lossless run that lost frames fails).
    let droppedForErrors = Atomic<Int>(0)
    let firstDropReason = Mutex<String?>(nil)
    let live = Atomic<Bool>(false)

    func audioArrived(_ unit: EncodedFrame) {
        audio.withLock { audio in
            if audio.units.count >= Self.maxAudioUnits { audio.units.removeFirst() }
            audio.units.append(unit)
        }
    }

    func audioEnded() { audio.withLock { $0.ended = true } }

    /// The audio units that came, and whether the stage is yet to be told the audio ended.
    func takeAudio() -> (units: [EncodedFrame], ended: Bool) {
        audio.withLock { audio in
            defer { audio.units = [] }
            let tell = audio.ended && !audio.endTold
            if tell { audio.endTold = true }
            return (audio.units, tell)
        }
    }
}
