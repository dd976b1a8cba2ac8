import Foundation
import StreamLensCore

/// `streamlens serve`'s control channel (one command line, one answer line): the same calls
/// as the HTTP API's, on whichever catalog serves (a `SourceSet`, or a cluster's view of etcd).
extension SourceCatalog {
    /// One control line (`ServeCommand`), answered with one line: "ok", "error: …", or what was
    /// asked for.
    public func execute(_ line: String) -> String {
        ServeCommand.answer(line) { command in
            switch command {
            case .help: return ServeCommand.usage // answered by `answer` already
            case .sources:
                return String(decoding: try JSONEncoder.stable().encode(statuses()), as: UTF8.self)
            case .add(let name, let uri):
                // One reply line: the first line of a pipeline's error (the log has it all).
                return add(name: name, uri: uri).map { "error: \($0.message.split(separator: "\n").first ?? "")" } ?? "ok"
            case .remove(let name):
                return remove(name: name).map { "error: \($0.message)" } ?? "ok"
            case .source(let name, let inner):
                if let holder = holder(of: name) { return "error: source \(name) runs on another instance of the cluster (\(holder)): its HTTP API, or any instance's, changes it" }
                guard let commands = commands(of: name) else { return "error: \(SourceRefusal.unknown(name, among: statuses().map(\.name)).message)" }
                return commands.execute(inner)
            }
        }
    }
}

extension SourceSet {
    /// `streamlens serve`'s life: the control channel (if any) and the sources given at start,
    /// then until an interrupt (or, without a control channel, until every source has ended);
    /// then every source ends (outputs finalized). 0: every source running at the interrupt
    /// ended cleanly (or, without one, every source did); 1: one failed, or the control channel
    /// could not be opened (as for `streamlens run`).
    /// `keepRunning`: sources can come later (a control channel or the HTTP API), so serve runs
    /// until an interrupt even with none, or with every source ended.
    /// `stageValues`: properties set on a source's stages before it starts (by source name).
    /// `catalog`: what the control channel's commands act on (this set by default).
    public func serve(initial: [(name: String, uri: String)], stageValues: [String: [(element: String, property: String, value: String)]] = [:],
                      control: ControlSource?, access: ControlAccess, echo: Bool, keepRunning: Bool? = nil, catalog: (any SourceCatalog)? = nil) -> Int32 {
        let keepRunning = keepRunning ?? (control != nil)
        Pipeline.installInterruptHandlers()
        var channel: ControlChannel?
        if let control {
            let catalog: any SourceCatalog = catalog ?? self
            let c = ControlChannel(echo: echo, access: access, handler: { catalog.execute($0) })
            do { try c.start(control) } catch {
                log("error: \(error)")
                return 1
            }
            channel = c
        }
        defer { channel?.stop() }
        var failedAtStart = false
        for (name, uri) in initial {
            if let problem = add(name: name, uri: uri, stages: stageValues[name] ?? []) {
                log("error: \(problem.message)")
                failedAtStart = true
            }
        }
        if !keepRunning && count == 0 { return 1 }
        while Pipeline.interruptsSeen == 0 {
            if !keepRunning && allEnded { break }
            usleep(100_000)
        }
        let interrupted = Pipeline.interruptsSeen > 0
        channel?.stop()
        channel = nil
        let before = statuses().filter { $0.state == State.failed.rawValue }.map(\.name)
        let clean = endAll()
        if interrupted {
            // Failures before the interrupt were said when they happened (and `sources` listed them).
            let failedNow = statuses().filter { $0.state == State.failed.rawValue && !before.contains($0.name) }
            return failedNow.isEmpty ? 0 : 1
        }
        return clean && !failedAtStart ? 0 : 1
    }
}
