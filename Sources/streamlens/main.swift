import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensInference
import StreamLensMetrics
import StreamLensAPI
import StreamLensHTTP
import StreamLensBackends
import StreamLensStages

/// The `streamlens` command. Exit codes: 0 clean end of stream (also after Ctrl-C, once the
/// output is finalized), 1 the pipeline failed, 2 a usage or spec error, 130 aborted.
let usage = """
    usage: streamlens run [-q] [-v] [--mode auto|lossless|live] [--timeout S] [--eos-timeout S] [--control -|SOCKET]
                          [--control-elements] [--control-group GROUP] [--http [ADDRESS:]PORT]
                          [--http-token-file FILE] [--http-allow-origin ORIGIN] SPEC [NAME=value …]
           streamlens serve [run's options] TEMPLATE [NAME=URI …]      (one pipeline per source; --control or --http adds and removes them)
           streamlens serve [run's options] --config FILE              (the template, sources and listener from a YAML file)
           streamlens config check FILE                                (check a config without starting)
           streamlens inspect SPEC [NAME=value …]
           streamlens stages [--markdown] [STAGE…]
           streamlens import MODEL.mlmodel [-o OUT.onnx] [--name NAME]   (Core ML style model -> ONNX + manifest)
           streamlens train-style STYLE_IMAGE --out PATH [options]       (train a style network; --help lists options)
           streamlens models list | fetch NAME…|all [--from DIR|URL] | verify [NAME…] | path [NAME]
           streamlens --help | --version

    SPEC is a gst-launch-1.0 pipeline in which StreamLens stages (lens…) appear like elements,
    or a pipeline file: a path, or a name in Pipelines/ (with or without .pipeline). ${NAME} and
    ${NAME:-default} in the spec are filled from NAME=value arguments, then the environment's
    STREAMLENS_VAR_NAME (never a plain NAME: an ambient PORT must not move a server), then the default.

      run       run the pipeline to its end; Ctrl-C sends end-of-stream so files are finalized,
                a second Ctrl-C aborts
        -q, --quiet     no progress, no stage summaries
        -v, --verbose   print each stage's negotiated caps, its figures every 5 s, debug details
        --mode M        force every stage's bridge mode (lossless: every frame; live: newest wins)
        --timeout S     seconds the pipeline may take to start, a stage's model set-up not
                        counted (default 20, or $STREAMLENS_START_TIMEOUT: slow machines,
                        sanitizer builds)
        --eos-timeout S seconds end-of-stream may take after Ctrl-C before the run stops
                        without it (default 15); a second Ctrl-C stops at once
        --control C     take commands while running from stdin (-) or a Unix socket path:
                        set [ELEMENT] NAME=VALUE…, get [ELEMENT] NAME, list, help
                        (e.g. `set strength=0.4`, `set style-image=wave.jpg`, `set device=AUTO`);
                        the socket is yours alone (0600, the peer's uid checked)
        --control-elements  let control commands reach other elements' properties too
                        (those GStreamer marks changeable while playing or controllable), not only the
                        stages' live ones
        --control-group G   members of group G may use the control socket too (0660)
        --http A        serve the HTTP API while running (docs/http-api.md): sources, stage
                        properties (PATCH live ones), events (SSE), /healthz, /readyz, /metrics,
                        /api/openapi.json, and the console at http://A/ (docs/console.md: live
                        video by WebRTC, controls, events); A is PORT (loopback) or ADDRESS:PORT
        --http-token-file F  every request must carry the file's content as a bearer token
                        (required for an address beyond loopback)
        --http-allow-origin O  let pages of origin O call the API from a browser (CORS)
        --metrics A     the same as --http A (Prometheus metrics at http://A/metrics)
      serve     run one pipeline per source, each made from the pipeline file TEMPLATE with
                ${NAME} and ${URI}, side by side in one process (one model compiled for all;
                a failing source stops only itself) until Ctrl-C or SIGTERM. With --control
                SOCKET: add NAME URI, remove NAME (its outputs finalized), sources (JSON),
                set/get/list NAME …(as run's, in that source), help. With --http: the same over
                HTTP (POST and DELETE /api/sources), and it may start with no source.
                --config FILE: the listener, template, variables and sources from a YAML file
                (docs/deploy.md); what the API changes is kept beside it and back after a restart
      config check FILE   check a config as serve would (its sources' URIs, the template,
                stage properties), without starting anything
      inspect   print the expanded pipeline and its elements, without running it
      stages    list the stages with their properties, defaults and help; --markdown: each
                stage's reference page (docs/stages/, rewritten by tools/gen-stage-docs.sh)
      models    third-party model files (Models/model-catalogue.json): list them, fetch and verify
                them (sha256) into the model store, $STREAMLENS_MODELS or
                ~/.local/share/streamlens/models; --from or $STREAMLENS_MODEL_MIRROR: a mirror

    exit codes: 0 end of stream, 1 pipeline error, 2 bad usage or spec, 130 aborted
    """

struct UsageError: Error { var message: String }

func fail(_ message: String, code: Int32) -> Never {
    writeStandardError("streamlens: \(message)\n")
    exit(code)
}

func printOut(_ text: String) { print(text) }

let pipelineDirectories = [ProcessInfo.processInfo.environment["STREAMLENS_PIPELINES"], "Pipelines"].compactMap { $0 }

/// SPEC plus NAME=value arguments → the spec, the pipeline text GStreamer will parse, and where
/// each variable's value came from ("INPUT=clip.mp4 (command line)", for -v).
func expandedSpec(_ arguments: [String]) throws -> (spec: PipelineSpec, text: String, sources: [String]) {
    guard let first = arguments.first else { throw UsageError(message: "missing SPEC\n\n\(usage)") }
    let spec = try PipelineSpec.load(first, searchDirectories: pipelineDirectories)
    let variables = try PipelineSpec.parseAssignments(Array(arguments.dropFirst()))
    let environment = ProcessInfo.processInfo.environment
    let sources = spec.sources(variables: variables, environment: environment).map { "\($0.name)=\($0.value ?? "") (\($0.from))" }
    return (spec, try spec.expanded(variables: variables, environment: environment), sources)
}

func initialize() {
    // The backends this program links: OpenVINO for every local device (remote is built in).
    StandardBackends.register()
    do { try GStreamer.initialize(stages: builtinStages) } catch { fail("\(error)", code: 1) }
}

/// The options `run` and `serve` share, the metrics address, and the other arguments (SPEC
/// and NAME=value…, or TEMPLATE and NAME=URI…).
/// `--http` and its companions (`--metrics` is the same option under its old name).
struct HTTPOptions {
    var address: HTTPAddress?
    var option = "--http"
    var tokenFile: String?
    /// How the token file was given, for messages about it.
    var tokenFileOption = "--http-token-file"
    var allowOrigin: String?
}

/// An origin as --http-allow-origin takes it (scheme://host[:port]), without a final '/'; nil
/// when it is not one.
func allowedOrigin(_ text: String) -> String? {
    guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
          url.path.isEmpty || url.path == "/" else { return nil }
    return text.hasSuffix("/") ? String(text.dropLast()) : text
}

func parseRunOptions(_ args: [String]) -> (options: Pipeline.Options, http: HTTPOptions, rest: [String]) {
    var options = Pipeline.Options()
    if let text = ProcessInfo.processInfo.environment["STREAMLENS_START_TIMEOUT"] {
        guard let t = Double(text), t > 0 else { fail("STREAMLENS_START_TIMEOUT needs a number of seconds", code: 2) }
        options.startTimeout = t
    }
    var rest: [String] = []
    var http = HTTPOptions()
    var i = 0
    while i < args.count {
        let a = args[i]
        switch a {
        case "-q", "--quiet": options.quiet = true
        case "-v", "--verbose": options.verbose = true
        case "--control-elements": options.controlAccess.otherElements = true
        case "--mode", "--timeout", "--eos-timeout", "--control", "--control-group", "--metrics", "--http", "--http-token-file", "--http-allow-origin":
            guard i + 1 < args.count else { fail("\(a) needs a value", code: 2) }
            i += 1
            if a == "--metrics" || a == "--http" {
                if http.address != nil { fail("\(http.option) and \(a) are the same server: give one", code: 2) }
                http.option = a
                do { http.address = try HTTPAddress(parsing: args[i], option: a) } catch { fail("\(error)", code: 2) }
            } else if a == "--http-token-file" {
                http.tokenFile = args[i]
            } else if a == "--http-allow-origin" {
                guard let origin = allowedOrigin(args[i]) else {
                    fail("--http-allow-origin \(args[i]): an origin is scheme://host[:port] (e.g. https://dashboard.example.com)", code: 2)
                }
                http.allowOrigin = origin
            } else if a == "--control" {
                options.control = args[i] == "-" ? .standardInput : .socket(path: args[i])
            } else if a == "--control-group" {
                options.controlAccess.group = args[i]
            } else if a == "--mode" {
                guard let mode = BridgeSettings.Mode(rawValue: args[i]) else { fail("--mode must be auto, lossless or live", code: 2) }
                options.mode = mode
            } else {
                guard let t = Double(args[i]), t > 0 else { fail("\(a) needs a number of seconds", code: 2) }
                if a == "--timeout" { options.startTimeout = t } else { options.endOfStreamTimeout = t }
            }
        case "--":
            rest.append(contentsOf: args[(i + 1)...])
            i = args.count
            continue
        default:
            if a.hasPrefix("-") && rest.isEmpty { fail("unknown option \(a)\n\n\(usage)", code: 2) }
            rest.append(a)
        }
        i += 1
    }
    if http.address == nil, http.tokenFile != nil || http.allowOrigin != nil {
        fail("\(http.tokenFile != nil ? "--http-token-file" : "--http-allow-origin") needs --http [ADDRESS:]PORT", code: 2)
    }
    return (options, http, rest)
}

func runCommand(_ args: [String]) -> Int32 {
    let (options, http, rest) = parseRunOptions(args)
    let text: String, sources: [String]
    do { (_, text, sources) = try expandedSpec(rest) } catch let e as UsageError { fail(e.message, code: 2) } catch { fail("\(error)", code: 2) }
    initialize()
    let pipeline: Pipeline
    do { pipeline = try Pipeline(description: text) } catch let e as HostError { fail(e.message, code: e.exitCode) } catch { fail("\(error)", code: 2) }
    let runSource = http.address.map { _ in RunSource(pipeline: pipeline, access: options.controlAccess) }
    let api = runSource.map { startAPI(http, catalog: $0, quiet: options.quiet) }
    defer { api?.stop() }
    if options.verbose {
        if !sources.isEmpty { writeStandardError("variables: \(sources.joined(separator: ", "))\n") }
        writeStandardError("pipeline: \(text)\n")
    }
    let outcome = pipeline.run(options)
    runSource?.finished(outcome)
    if case .finished(interrupted: true) = outcome, !options.quiet {
        writeStandardError("interrupted: end of stream reached, output finalized\n")
    }
    return outcome.exitCode
}

/// `streamlens serve TEMPLATE [NAME=URI …] [--control SOCKET]`: one pipeline per source, made
/// from TEMPLATE with ${NAME} and ${URI} (SourceSet says why one pipeline each).
func serveCommand(_ args: [String]) -> Int32 {
    if let i = args.firstIndex(of: "--config") {
        guard i + 1 < args.count else { fail("--config needs a FILE (docs/deploy.md shows one)", code: 2) }
        return serveConfigured(args[i + 1], Array(args[..<i] + args[(i + 2)...]))
    }
    let (options, http, rest) = parseRunOptions(args)
    guard let first = rest.first else { fail("serve needs a TEMPLATE (a pipeline file using ${URI} and ${NAME})\n\n\(usage)", code: 2) }
    let spec: PipelineSpec
    do { spec = try PipelineSpec.load(first, searchDirectories: pipelineDirectories) } catch { fail("\(error)", code: 2) }
    let templateName = spec.origin == "command line" ? "the template" : "template \(spec.origin)"
    guard spec.variableNames.contains("URI") else {
        fail("\(templateName) does not use ${URI}: every source would be the same pipeline (write uri=${URI} or location=${URI})", code: 2)
    }
    var initial: [(name: String, uri: String)] = []
    for word in rest.dropFirst() {
        guard let eq = word.firstIndex(of: "="), eq != word.startIndex else {
            fail("expected NAME=URI after the template, got '\(word)'", code: 2)
        }
        let name = String(word[..<eq]), uri = String(word[word.index(after: eq)...])
        guard SourceSet.isValidName(name) else { fail("source name '\(name)' must be 1–64 letters, digits, '-' or '_'", code: 2) }
        if let problem = SourceSet.uriProblem(uri) { fail(problem, code: 2) }
        guard !initial.contains(where: { $0.name == name }) else { fail("source name \(name) is given twice", code: 2) }
        initial.append((name, uri))
    }
    guard !initial.isEmpty || options.control != nil || http.address != nil else {
        fail("serve needs sources (NAME=URI after the template), or --control SOCKET or --http PORT to add them", code: 2)
    }
    let environment = ProcessInfo.processInfo.environment
    let expand: @Sendable (String, String) throws -> String = { name, uri in
        try spec.expanded(variables: ["NAME": name, "URI": uri], environment: environment)
    }
    initialize()
    // The template is checked once before anything listens: a spec error is the command's.
    do { _ = try Pipeline(description: try expand("check", "file:///dev/null")) } catch let e as HostError { fail("\(templateName): \(e.message)", code: 2) } catch { fail("\(templateName): \(error)", code: 2) }
    ThreadBudget.process.throughput.store(true, ordering: .relaxed)
    let set = SourceSet(options: options, expand: expand)
    let api = http.address.map { _ in startAPI(http, catalog: set, quiet: options.quiet) }
    defer { api?.stop() }
    return set.serve(initial: initial, control: options.control, access: options.controlAccess, echo: !options.quiet,
                     keepRunning: options.control != nil || api != nil)
}

/// Listening before any pipeline starts: a busy port fails the run before any output is
/// opened, and a client sees the process (its memory, the stages as they come up) at once.
func startAPI(_ http: HTTPOptions, catalog: any SourceCatalog, quiet: Bool) -> APIServer {
    guard let address = http.address else { fail("no --http address", code: 2) }
    // Each connection is a descriptor: the soft limit (often 1024) is raised to the hard one so
    // that the server's own connection limit, not the process's, is what a flood meets.
    var limit = rlimit()
    if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < min(limit.rlim_max, 65536) {
        limit.rlim_cur = min(limit.rlim_max, 65536)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    var settings = APIServer.Settings(allowOrigin: http.allowOrigin)
    if let file = http.tokenFile { settings.token = readToken(file, option: http.tokenFileOption) }
    let server: APIServer
    do { server = try APIServer(address: address, option: http.option, catalog: catalog, settings: settings, version: version) } catch { fail("\(error)", code: 2) }
    let info = buildInfo()
    _ = MetricsRegistry.shared.addCollector { ProcessMetrics.collect() + [info] }
    if !quiet { writeStandardError("http: \(HTTPAddress(host: address.host, port: server.http.address.port).url)/ (API: /api/openapi.json, metrics: /metrics)\n") }
    return server
}

/// The bearer token: the file's content, trailing whitespace (a newline) trimmed.
func readToken(_ path: String, option: String = "--http-token-file") -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
        fail("\(option) \(path): cannot read it (\(FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file"))", code: 2)
    }
    guard let text = String(data: data, encoding: .utf8) else { fail("\(option) \(path): the token is not UTF-8 text", code: 2) }
    var token = text
    while let last = token.last, last.isWhitespace { token.removeLast() }
    guard !token.isEmpty else { fail("\(option) \(path) is empty: write the token in it (e.g. openssl rand -hex 24 > \(path))", code: 2) }
    guard !token.contains(where: { $0.isNewline || $0 == " " }) else {
        fail("\(option) \(path): the token is one line with no spaces (it goes in an Authorization: Bearer header)", code: 2)
    }
    return token
}

let version = "0.1"
/// `streamlens_build_info{version, gstreamer} 1`, the usual info metric.
func buildInfo() -> Metric {
    .gauge("streamlens_build_info", "StreamLens and GStreamer versions (the value is 1)",
           labels: [("version", version), ("gstreamer", GStreamer.versionString)], 1)
}

func inspectCommand(_ args: [String]) -> Int32 {
    let spec: PipelineSpec, text: String
    do { (spec, text, _) = try expandedSpec(args) } catch let e as UsageError { fail(e.message, code: 2) } catch { fail("\(error)", code: 2) }
    initialize()
    let pipeline: Pipeline
    do { pipeline = try Pipeline(description: text) } catch let e as HostError { fail(e.message, code: e.exitCode) } catch { fail("\(error)", code: 2) }
    printOut(text)
    printOut("")
    printOut("from: \(spec.origin)")
    if !spec.variableNames.isEmpty { printOut("variables: \(spec.variableNames.joined(separator: ", "))") }
    printOut("elements:")
    for e in pipeline.elements {
        printOut("  \(e.name)\(e.name == e.factory ? "" : " (\(e.factory))")\(e.isStage ? "  [StreamLens stage]" : "")")
    }
    return 0
}

func stagesCommand(_ arguments: [String]) -> Int32 {
    let markdown = arguments.contains("--markdown")
    let args = arguments.filter { $0 != "--markdown" }
    if let option = args.first(where: { $0.hasPrefix("-") }) { fail("unknown option \(option) (stages takes --markdown)", code: 2) }
    let stages = builtinStages.map { $0.descriptor }.filter { args.isEmpty || args.contains($0.name) }
    if stages.isEmpty { fail("unknown stage \(args.joined(separator: " ")) (`streamlens stages` lists them)", code: 2) }
    if markdown {
        print(stages.map(\.markdown).joined(separator: "\n"), terminator: "")
        return 0
    }
    for d in stages {
        printOut("\(d.name): \(d.summary)")
        printOut("  example: streamlens run '\(d.example)'")
        printOut("  caps: \(d.sinkCaps)\(d.isSink ? " (a sink: ends the pipeline)" : d.capsPassthrough ? " (output = input)" : "")")
        printOut("  properties:")
        for p in d.properties {
            if p.readOnly { printOut("    \(p.name)  [reading: get \(p.name)]  \(p.help)"); continue }
            printOut("    \(p.name)=\(p.defaultValue)  [\(p.constraint)\(p.live ? ", live" : "")]  \(p.help)")
        }
        if !d.keys.isEmpty {
            printOut("  keys (in a preview window; each is a `set` of a live property):")
            var shown = Set<String>()
            for k in d.keys where shown.insert(k.label).inserted {
                printOut("    \(k.label.padding(toLength: 5, withPad: " ", startingAt: 0)) \(k.help)")
            }
        }
        printOut("")
    }
    if args.isEmpty {
        printOut("In every preview window the \(HostKeys.pause.label) key \(HostKeys.pause.help), other keys are ignored, and closing the window ends the run.")
    }
    return 0
}

/// glibc's malloc set for a program that allocates frame-sized blocks many times a second:
/// a bounded number of arenas, and frames served from them rather than mapped and unmapped.
///
/// Why bounded arenas: a live pipeline makes new threads whenever its source restarts (rtspsrc,
/// the decoder), and glibc gives new threads new arenas (up to 8 per core), each keeping what it
/// freed, so RSS grew with every camera outage; with at most one arena per core (two at least)
/// restarted threads share the arenas already there.
///
/// Why frames from the arenas (a fixed mmap threshold of 32 MB, glibc's largest): a frame that
/// GStreamer copies (a buffer held elsewhere when a stage writes into it — a tee's other branch — a
/// decoder's output made writable) is 0.3–3.7 MB; above the mmap threshold each one is a fresh
/// mapping, zeroed page by page on first touch and unmapped when freed, which cost `streamlens
/// serve` with many live sources a large share of its CPU in page faults. glibc's default trim
/// threshold is kept (higher ones measured no faster). The figures are in the commit that made
/// this policy (bad770e).
///
/// Only the CLI does this: a library must not change its host's allocator. MALLOC_ARENA_MAX and
/// MALLOC_MMAP_THRESHOLD_ in the environment win over their settings here. mallopt is not in the
/// Glibc module (malloc.h), hence dlsym; the parameters' numbers are malloc.h's.
func useFrameFriendlyAllocator() {
    guard let symbol = dlsym(nil, "mallopt") else { return }
    typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
    let environment = ProcessInfo.processInfo.environment
    let settings: [(variable: String, parameter: Int32, value: Int32)] = [
        ("MALLOC_ARENA_MAX", -8, Int32(max(2, ProcessInfo.processInfo.activeProcessorCount))), // M_ARENA_MAX
        ("MALLOC_MMAP_THRESHOLD_", -3, 32 << 20), // M_MMAP_THRESHOLD (fixed: glibc no longer moves it)
    ]
    for setting in settings where environment[setting.variable] == nil { _ = mallopt(setting.parameter, setting.value) }
}
useFrameFriendlyAllocator()
// A reader that went away (`streamlens stages | head`, stderr into a closed pipe) makes that write
// fail instead of ending the process; what StreamLens writes itself checks for the failure.
signal(SIGPIPE, SIG_IGN)

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("missing command\n\n\(usage)", code: 2) }
arguments.removeFirst()
switch command {
case "run": exit(runCommand(arguments))
case "serve": exit(serveCommand(arguments))
case "config": exit(configCommand(arguments))
case "inspect": exit(inspectCommand(arguments))
case "stages": exit(stagesCommand(arguments))
case "import": exit(importCommand(arguments))
case "train-style": exit(trainStyleCommand(arguments))
case "models": exit(modelsCommand(arguments))
case "-h", "--help", "help": printOut(usage); exit(0)
case "--version":
    initialize()
    printOut("streamlens \(version) (\(GStreamer.versionString))")
    exit(0)
default: fail("unknown command \(command)\n\n\(usage)", code: 2)
}
