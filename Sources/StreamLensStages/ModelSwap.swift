import Foundation
import StreamLensCore
import StreamLensInference
import Synchronization

/// A model stage's live change of what it runs (another model, style, device or precision):
/// the replacement is built on a thread of its own while frames go on through the current one,
/// and taken between two frames (`takeFinished`, at the top of `process`). One build at a time,
/// in the order the changes came: a change that comes while one builds waits, a later one
/// replaces the waiting one, and each lands on what the one before left (`set device=AUTO` then
/// a bad `set model` keeps AUTO). lensstylize, lensdetect and lensclassify share it.
///
/// Used from the stage's thread; the builds post to a Mutex.
final class ModelSwap<Configuration: Equatable & Sendable, Loaded> {
    typealias Build = @Sendable (Configuration) throws -> Loaded
    /// What the last change asked for (the configuration running, or on its way).
    private(set) var wanted: Configuration
    private var building: Configuration?
    private var queued: (configuration: Configuration, build: Build)?
    private let finished = Outbox()
    private final class Outbox: Sendable { let list = Mutex<[Finished]>([]) }

    /// A build's outcome, from its thread to the stage's.
    struct Finished: @unchecked Sendable {
        // @unchecked: a handover. The building thread keeps no reference to what it built once
        // it posts it; from then on only the stage's thread touches it.
        var configuration: Configuration
        var result: Result<Loaded, StageError>
        var milliseconds: Double
    }

    init(running: Configuration) { wanted = running }

    /// A change to `next`, made by `build` (on a thread of its own; throw to refuse it, with
    /// the reason). False when there is nothing to do: it is what runs or is on its way.
    @discardableResult
    func request(_ next: Configuration, running: Configuration, build: @escaping Build) -> Bool {
        guard next != wanted else { return false }
        wanted = next
        if building != nil {
            queued = (next, build)
            return true
        }
        guard next != running else { return false }
        start(next, build)
        return true
    }

    private func start(_ configuration: Configuration, _ build: @escaping Build) {
        building = configuration
        let finished = self.finished
        Thread.detachNewThread {
            let started = DispatchTime.now().uptimeNanoseconds
            let result: Result<Loaded, StageError>
            do { result = .success(try build(configuration)) } catch { result = .failure(error as? StageError ?? StageError("\(error)")) }
            let done = Finished(configuration: configuration, result: result, milliseconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
            finished.list.withLock { $0.append(done) }
        }
    }

    /// The builds that finished since the last call, in order. The caller swaps each success in
    /// (or refuses it), then calls `settled` with what runs.
    func takeFinished() -> [Finished] {
        let done = finished.list.withLock { list -> [Finished] in defer { list = [] }; return list }
        if !done.isEmpty { building = nil }
        return done
    }

    /// After the finished builds were applied: `running` is what the stage runs now. A refused
    /// change leaves `wanted` at what runs (or the change waiting); a waiting change starts.
    func settled(running: Configuration, refused: Bool) {
        if refused { wanted = queued?.configuration ?? running }
        guard building == nil, let next = queued else { return }
        queued = nil
        wanted = next.configuration
        if next.configuration != running { start(next.configuration, next.build) }
    }
}

/// The live change lensdetect and lensclassify make: the device their model is compiled for.
extension ModelSwap where Configuration == InferenceOptions {
    /// Asks for the model compiled for `device` (`build` compiles it, on its own thread), saying
    /// so once the compile starts.
    func requestDevice(_ device: String, running: InferenceOptions, notices: inout [StageNotice], build: @escaping Build) {
        var next = running
        next.device = device
        if request(next, running: running, build: build) { notices.append(StageNotice(.info, "compiling for \(device)…")) }
    }

    /// Between frames: each compiled model handed to `install` (which throws to refuse it) and
    /// `running` moved to its device, or refused with the device kept; one notice each, `doing`
    /// naming the work ("detecting").
    func applyDeviceChanges(running: inout InferenceOptions, notices: inout [StageNotice], doing: String, install: (Loaded) throws -> Void) {
        var refusedAny = false
        for done in takeFinished() {
            do {
                try install(try done.result.get())
                running = done.configuration
                notices.append(StageNotice(.info, String(format: "now %@ on %@ (compiled in %.0f ms)", doing, running.device, done.milliseconds)))
            } catch {
                refusedAny = true
                notices.append(StageNotice(.warning, "\(error); keeping \(running.device)", restore: ["device": .string(running.device)]))
            }
        }
        settled(running: running, refused: refusedAny)
    }
}
