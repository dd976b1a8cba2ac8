/// One line of the control channel (`streamlens run --control -|SOCKET`): changes properties of
/// a running pipeline's elements, between frames, without stopping it.
///
///     set [ELEMENT] NAME=VALUE [NAME=VALUE …]   e.g.  set strength=0.3
///                                                      set style device=AUTO
///                                                      set lensstylize0 style-image="/pics/wave 2.jpg"
///     get [ELEMENT] NAME
///     list                                       the stages, their live properties and values
///     help
///
/// ELEMENT is an element's name (`name=` in the spec, or GStreamer's default such as
/// lensstylize0); without it, the pipeline's only StreamLens stage. Values are GStreamer's
/// property syntax (as in a spec); double quotes keep spaces, backslash escapes a quote.
public enum ControlCommand: Equatable, Sendable {
    case set(element: String?, assignments: [(name: String, value: String)])
    case get(element: String?, name: String)
    case list
    case help

    public static let usage = """
        commands: set [ELEMENT] NAME=VALUE…  |  get [ELEMENT] NAME  |  list  |  help
        (ELEMENT defaults to the pipeline's only StreamLens stage)
        """

    /// Parses one line; nil for a blank line or a comment (#…). Throws a `ControlError` saying
    /// what is wrong.
    public static func parse(_ line: String) throws -> ControlCommand? {
        let words = try split(line)
        guard let verb = words.first else { return nil }
        if verb.hasPrefix("#") { return nil }
        let args = Array(words.dropFirst())
        switch verb.lowercased() {
        case "set":
            var element: String?
            var rest = args[...]
            if let first = rest.first, !first.contains("=") {
                element = first
                rest = rest.dropFirst()
            }
            guard !rest.isEmpty else { throw ControlError("set needs NAME=VALUE (e.g. set strength=0.5)") }
            let assignments = try rest.map { word -> (name: String, value: String) in
                guard let eq = word.firstIndex(of: "=") else { throw ControlError("expected NAME=VALUE, got '\(word)'") }
                let name = String(word[..<eq]), value = String(word[word.index(after: eq)...])
                guard isPropertyName(name) else { throw ControlError("'\(name)' is not a property name") }
                return (name, value)
            }
            return .set(element: element, assignments: assignments)
        case "get":
            switch args.count {
            case 1: guard isPropertyName(args[0]) else { throw ControlError("'\(args[0])' is not a property name") }
                return .get(element: nil, name: args[0])
            case 2: guard isPropertyName(args[1]) else { throw ControlError("'\(args[1])' is not a property name") }
                return .get(element: args[0], name: args[1])
            default: throw ControlError("get takes [ELEMENT] NAME")
            }
        case "list":
            guard args.isEmpty else { throw ControlError("list takes no arguments") }
            return .list
        case "help":
            return .help
        default:
            // One line: on the socket every command gets exactly one reply line.
            throw ControlError("unknown command '\(verb)' (commands: set, get, list, help)")
        }
    }

    /// GObject property names: a letter, then letters, digits, '-' or '_'.
    static func isPropertyName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first.isASCIILetter else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCIILetter || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
    }

    /// Words separated by spaces or tabs; "…" groups (the quotes are removed), \" and \\ escape.
    static func split(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false, quoted = false, escaped = false
        for ch in line {
            if escaped {
                current.append(ch)
                escaped = false
                continue
            }
            switch ch {
            case "\\" where quoted:
                escaped = true
            case "\"":
                quoted.toggle()
                inWord = true
            case " ", "\t", "\r", "\n":
                if quoted {
                    current.append(ch)
                } else if inWord {
                    words.append(current); current = ""; inWord = false
                }
            default:
                current.append(ch)
                inWord = true
            }
        }
        guard !quoted else { throw ControlError("unterminated quote") }
        if inWord { words.append(current) }
        return words
    }

    public static func == (a: ControlCommand, b: ControlCommand) -> Bool {
        switch (a, b) {
        case let (.set(e1, a1), .set(e2, a2)):
            return e1 == e2 && a1.map(\.name) == a2.map(\.name) && a1.map(\.value) == a2.map(\.value)
        case let (.get(e1, n1), .get(e2, n2)): return e1 == e2 && n1 == n2
        case (.list, .list), (.help, .help): return true
        default: return false
        }
    }
}

/// A control line that cannot be carried out; the channel replies `error: <message>` and goes on.
public struct ControlError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    /// The property the command was refused for, when one was (the HTTP API's 422 names it).
    public var property: String?
    public init(_ message: String, property: String? = nil) {
        self.message = message
        self.property = property
    }
    public var description: String { message }
}

private extension Unicode.Scalar {
    var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}

/// A language of one-line commands (the control socket's, serve's): parsed from a line, with
/// `help` and a usage text.
public protocol ControlLanguage {
    /// nil for an empty line.
    static func parse(_ line: String) throws -> Self?
    static var usage: String { get }
    var isHelp: Bool { get }
}

extension ControlLanguage {
    /// One line answered with one line: "ok" for an empty one, the usage for `help`, what
    /// `perform` answers for the rest, or "error: …" for whatever throws.
    public static func answer(_ line: String, _ perform: (Self) throws -> String) -> String {
        do {
            guard let command = try parse(line) else { return "ok" }
            return command.isHelp ? usage.replacingOccurrences(of: "\n", with: " ") : try perform(command)
        } catch let error as ControlError {
            return "error: \(error.message)"
        } catch {
            return "error: \(error)"
        }
    }
}

extension ControlCommand: ControlLanguage {
    public var isHelp: Bool { self == .help }
}

extension ServeCommand: ControlLanguage {
    public var isHelp: Bool { self == .help }
}
