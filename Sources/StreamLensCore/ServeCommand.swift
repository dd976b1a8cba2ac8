/// One line of `streamlens serve`'s control channel: sources added and removed while the others
/// run, their list, and `ControlCommand`'s set/get/list addressed to one source.
///
///     add NAME URI            start a source (answers once it plays, or with its error)
///     remove NAME             end a source (its outputs finalized) and forget it
///     sources                 one line: a JSON array of {name, uri, state, fps, frames, drops, restarts, seconds[, error]}
///     set NAME [ELEMENT] PROPERTY=VALUE…    as `streamlens run --control`, in source NAME
///     get NAME [ELEMENT] PROPERTY
///     list NAME
///     help
public enum ServeCommand: Equatable, Sendable {
    case add(name: String, uri: String)
    case remove(name: String)
    case sources
    /// A `ControlCommand` line (verb and arguments, the source's name taken out) for one source.
    case source(name: String, line: String)
    case help

    public static let usage = """
        commands: add NAME URI  |  remove NAME  |  sources  |  set NAME [ELEMENT] PROPERTY=VALUE…  |  get NAME [ELEMENT] PROPERTY  |  list NAME  |  help
        """

    /// Parses one line; nil for a blank line or a comment (#…). Throws a `ControlError` saying
    /// what is wrong.
    public static func parse(_ line: String) throws -> ServeCommand? {
        let words = try ControlCommand.split(line)
        guard let verb = words.first else { return nil }
        if verb.hasPrefix("#") { return nil }
        let args = Array(words.dropFirst())
        switch verb.lowercased() {
        case "add":
            guard args.count == 2 else { throw ControlError("add takes NAME URI (e.g. add door rtsp://192.168.1.20/stream)") }
            return .add(name: args[0], uri: args[1])
        case "remove":
            guard args.count == 1 else { throw ControlError("remove takes NAME") }
            return .remove(name: args[0])
        case "sources":
            guard args.isEmpty else { throw ControlError("sources takes no arguments") }
            return .sources
        case "set", "get", "list":
            let forms = ["set": "set NAME [ELEMENT] PROPERTY=VALUE…", "get": "get NAME [ELEMENT] PROPERTY", "list": "list NAME"]
            guard let name = args.first else { throw ControlError("\(verb.lowercased()) takes the source's name first: \(forms[verb.lowercased()]!)") }
            let inner = verb.lowercased() + " " + rest(of: line, after: 2)
            // Checked here, so a bad line is refused the same way whatever the source.
            _ = try ControlCommand.parse(inner)
            return .source(name: name, line: inner)
        case "help":
            return .help
        default:
            throw ControlError("unknown command '\(verb)' (commands: add, remove, sources, set, get, list, help)")
        }
    }

    /// The text of `line` after its first `count` words (unquoted words: a verb and a name).
    static func rest(of line: String, after count: Int) -> String {
        var s = Substring(line)
        for _ in 0..<count {
            s = s.drop { $0 == " " || $0 == "\t" }
            s = s.drop { $0 != " " && $0 != "\t" }
        }
        return String(s.drop { $0 == " " || $0 == "\t" })
    }
}
