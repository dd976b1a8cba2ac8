import Foundation
import StreamLensConfig
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import StreamLensInference
import Synchronization

/// A config read and checked as far as can be without starting anything: the file's shape
/// (ServeConfig), the state kept beside it, and for every source its URI, its pipeline (the
/// template with its variables, parsed by GStreamer) and its stages' property values — each
/// refusal with the file and line it comes from.
struct ServePlan {
    let config: ServeConfig
    let state: ServeState
    /// The sources to start: the config's, with the kept changes.
    let sources: [ServeConfig.Source]
    let spec: PipelineSpec
    var http: HTTPOptions?

    init(path: String, access: ControlAccess) throws(ConfigError) {
        config = try ServeConfig.load(path: path)
        state = try ServeState.load(path: config.statePath)
        sources = state.sources(over: config)
        let config = config
        func refusal(_ line: Int, _ message: String) -> ConfigError {
            line == 0 ? ConfigError(file: config.statePath, line: 1, message) : ConfigError(file: config.file, line: line, message)
        }
        do { spec = try PipelineSpec.load(config.pipeline.value, searchDirectories: pipelineDirectories) } catch {
            throw refusal(config.pipeline.line, "pipeline: \(error)")
        }
        guard spec.variableNames.contains("URI") else {
            throw refusal(config.pipeline.line, "pipeline: does not use ${URI}: every source would be the same pipeline (write uri=${URI} or location=${URI})")
        }
        if let h = config.http {
            var http = HTTPOptions(option: "http: listen")
            do { http.address = try HTTPAddress(parsing: h.listen.value, option: "http: listen") } catch { throw refusal(h.listen.line, "\(error)") }
            if let file = h.tokenFile {
                guard FileManager.default.isReadableFile(atPath: file.value) else { throw refusal(file.line, "http: token-file \(file.value) cannot be read") }
                http.tokenFile = file.value
                http.tokenFileOption = "http: token-file"
            }
            if let origin = h.allowOrigin {
                guard let o = allowedOrigin(origin.value) else { throw refusal(origin.line, "http: allow-origin \(origin.value): an origin is scheme://host[:port]") }
                http.allowOrigin = o
            }
            self.http = http
        }
        let environment = ProcessInfo.processInfo.environment
        for source in sources {
            if let problem = SourceSet.uriProblem(source.uri) { throw refusal(source.uriLine, "source \(source.name): uri: \(problem)") }
            let pipeline: Pipeline
            do {
                pipeline = try Pipeline(description: try spec.expanded(variables: Self.variables(config, source), environment: environment))
            } catch {
                throw refusal(config.pipeline.line, "pipeline (for source \(source.name)): \((error as? HostError)?.message ?? "\(error)")")
            }
            let commands = PipelineCommands(pipeline: pipeline, access: access)
            for value in source.stages {
                do { try commands.configure(element: value.element, [(value.property, value.value)]) } catch {
                    throw refusal(value.line, "source \(source.name): stages: \(value.element): \(value.property): \(error.message)")
                }
            }
        }
    }

    /// A source's template variables: the file's, the source's own, then its name and URI.
    static func variables(_ config: ServeConfig, _ source: ServeConfig.Source) -> [String: String] {
        variables(config, name: source.name, uri: source.uri, own: source.variables)
    }

    /// In a cluster, ${INSTANCE} and ${CLAIM} too (the claim's revision once claimed; 0 here).
    static func variables(_ config: ServeConfig, name: String, uri: String, own: [String: String]) -> [String: String] {
        let cluster = config.cluster.map { ["INSTANCE": $0.instance, "CLAIM": "0"] } ?? [:]
        return config.variables.merging(own) { $1 }.merging(["NAME": name, "URI": uri]) { $1 }.merging(cluster) { $1 }
    }

    /// The pipeline text of a source by name (a source added later gets the file's variables).
    var expand: @Sendable (String, String) throws -> String { expand(more: { _ in [:] }) }

    /// `expand`, with variables of serve's own for each source (a cluster's ${INSTANCE}, ${CLAIM}).
    func expand(more: @escaping @Sendable (_ name: String) -> [String: String]) -> @Sendable (String, String) throws -> String {
        let (config, spec, environment) = (config, spec, ProcessInfo.processInfo.environment)
        let own = Dictionary(uniqueKeysWithValues: config.sources.map { ($0.name, $0.variables) })
        return { name, uri in
            let variables = Self.variables(config, name: name, uri: uri, own: own[name] ?? [:]).merging(more(name)) { $1 }
            return try spec.expanded(variables: variables, environment: environment)
        }
    }
}

/// serve's changes into the state file.
struct KeptChanges: SourceKeeper {
    let keeper: ServeStateKeeper
    func keep(_ change: SourceChange) {
        switch change {
        case .added(let name, let uri): keeper.sourceAdded(name: name, uri: uri)
        case .removed(let name): keeper.sourceRemoved(name: name)
        case .set(let source, let stage, let settings): keeper.propertiesSet(source: source, stage: stage, settings.map { ($0.name, $0.value) })
        }
    }
    var problem: String? { keeper.problem }
}

/// `streamlens serve --config FILE [run's options]`.
func serveConfigured(_ path: String, _ args: [String]) -> Int32 {
    var (options, http, rest) = parseRunOptions(args)
    guard rest.isEmpty else {
        fail("serve --config \(path): the template and the sources come from the file (\(rest.joined(separator: " ")) is not needed)", code: 2)
    }
    initialize()
    let plan: ServePlan
    do { plan = try ServePlan(path: path, access: options.controlAccess) } catch { fail("\(error)", code: 2) }
    if http.address == nil, let configured = plan.http { http = configured }
    if options.control == nil, let control = plan.config.control { options.control = .socket(path: control.value) }
    ThreadBudget.process.throughput.store(true, ordering: .relaxed)
    let log: @Sendable (String) -> Void = { writeStandardError("streamlens: \($0)\n") }
    if let cluster = plan.config.cluster { return serveClustered(plan, cluster, options: options, http: http, log: log) }
    let keeper = ServeStateKeeper(path: plan.config.statePath, state: plan.state, config: plan.config, log: log)
    let set = SourceSet(options: options, keeper: KeptChanges(keeper: keeper), expand: plan.expand)
    let api = http.address.map { _ in startAPI(http, catalog: set, quiet: options.quiet) }
    defer { api?.stop() }
    if !options.quiet {
        writeStandardError("config: \(path): \(plan.sources.count) source(s); what the API changes is kept in \(plan.config.statePath)\n")
    }
    let stageValues = Dictionary(uniqueKeysWithValues: plan.sources.map { s in (s.name, s.stages.map { ($0.element, $0.property, $0.value) }) })
    return set.serve(initial: plan.sources.map { ($0.name, $0.uri) }, stageValues: stageValues, control: options.control,
                     access: options.controlAccess, echo: !options.quiet, keepRunning: options.control != nil || api != nil)
}

/// `streamlens config check FILE`.
func configCommand(_ args: [String]) -> Int32 {
    guard args.count == 2, args[0] == "check" else { fail("usage: streamlens config check FILE", code: 2) }
    initialize()
    do {
        let plan = try ServePlan(path: args[1], access: ControlAccess())
        let kept = FileManager.default.fileExists(atPath: plan.config.statePath) ? " (with the changes kept in \(plan.config.statePath))" : ""
        printOut("\(args[1]): valid: \(plan.sources.count) source(s)\(plan.sources.isEmpty ? "" : ": " + plan.sources.map(\.name).joined(separator: ", "))\(kept)")
        return 0
    } catch {
        fail("\(error)", code: 2)
    }
}
