import Foundation

/// A pipeline as the user wrote it: a gst-launch string, or a file (in Pipelines/ or any path)
/// holding one. Files may spread the pipeline over several lines and use `#` comment lines.
/// Both may use `${NAME}` and `${NAME:-default}`, filled from `NAME=value` arguments, then the
/// environment, then the default.
public struct PipelineSpec: Sendable, Equatable {
    /// The pipeline text before substitution (comment lines removed, lines joined).
    public var text: String
    /// Where it came from: "command line" or the file's path.
    public var origin: String

    public init(text: String, origin: String = "command line") {
        self.text = text
        self.origin = origin
    }

    /// Reads SPEC as the CLI receives it. Text containing `!` (or spaces) is a pipeline itself;
    /// otherwise it names a file: a path, or a name in one of `searchDirectories` with or
    /// without the `.pipeline` extension.
    public static func load(_ argument: String, searchDirectories: [String]) throws -> PipelineSpec {
        let fm = FileManager.default
        if argument.contains("!") || argument.contains(" ") || argument.contains("=") {
            if !argument.contains("!"), fm.fileExists(atPath: argument) { return try read(file: argument) }
            return PipelineSpec(text: argument)
        }
        var candidates = [argument]
        for dir in searchDirectories {
            candidates.append("\(dir)/\(argument)")
            candidates.append("\(dir)/\(argument).pipeline")
        }
        for path in candidates where fm.fileExists(atPath: path) {
            var isDir: ObjCBool = false
            if fm.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue { return try read(file: path) }
        }
        // A single element name is still a valid (if short) pipeline: let GStreamer judge it.
        if !argument.contains("/") && !argument.hasSuffix(".pipeline") { return PipelineSpec(text: argument) }
        throw SpecError("no pipeline file \(argument) (looked in: \(candidates.joined(separator: ", ")))")
    }

    public static func read(file path: String) throws -> PipelineSpec {
        guard let data = FileManager.default.contents(atPath: path), let raw = String(data: data, encoding: .utf8) else {
            throw SpecError("cannot read pipeline file \(path)")
        }
        return PipelineSpec(text: joinLines(raw), origin: path)
    }

    /// Drops `#` comment lines and blank lines and joins the rest with single spaces.
    public static func joinLines(_ raw: String) -> String {
        raw.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            .map { $0.hasSuffix("\\") ? String($0.dropLast()).trimmingCharacters(in: .whitespaces) : $0 }
            .joined(separator: " ")
    }

    /// Names of the variables the text uses, in order of first use.
    public var variableNames: [String] {
        var names: [String] = []
        for reference in (try? Self.references(in: text)) ?? [] where !names.contains(reference.name) {
            names.append(reference.name)
        }
        return names
    }

    /// Environment variables that fill `${NAME}`: `STREAMLENS_VAR_NAME`, never plain `NAME` — an
    /// ambient `PORT` or `ADDRESS` in the user's shell must not move where a server listens.
    public static let environmentPrefix = "STREAMLENS_VAR_"

    /// Where each variable the text uses gets its value: the command line (`NAME=value`), the
    /// environment (`STREAMLENS_VAR_NAME`), the spec's own default, or nowhere (nil value).
    public func sources(variables: [String: String] = [:], environment: [String: String] = [:]) -> [(name: String, value: String?, from: String)] {
        var seen: Set<String> = []
        var result: [(String, String?, String)] = []
        for reference in (try? Self.references(in: text)) ?? [] where seen.insert(reference.name).inserted {
            if let v = variables[reference.name] {
                result.append((reference.name, v, "command line"))
            } else if let v = environment[Self.environmentPrefix + reference.name] {
                result.append((reference.name, v, Self.environmentPrefix + reference.name))
            } else if let v = reference.defaultValue {
                result.append((reference.name, v, "default"))
            } else {
                result.append((reference.name, nil, "unset"))
            }
        }
        return result
    }

    /// The text with every `${…}` replaced. `variables` (from the command line) win over
    /// `STREAMLENS_VAR_NAME` in `environment`, which wins over the default in `${NAME:-default}`.
    public func expanded(variables: [String: String] = [:], environment: [String: String] = [:]) throws -> String {
        var out = ""
        var cursor = text.startIndex
        for reference in try Self.references(in: text) {
            out += text[cursor..<reference.range.lowerBound]
            if let value = variables[reference.name] ?? environment[Self.environmentPrefix + reference.name] ?? reference.defaultValue {
                out += value
            } else {
                throw SpecError("variable \(reference.name) is not set: pass \(reference.name)=value after the spec (or set \(Self.environmentPrefix)\(reference.name))" +
                                (origin == "command line" ? "" : " (used in \(origin))"))
            }
            cursor = reference.range.upperBound
        }
        out += text[cursor...]
        return out
    }

    struct Reference {
        var name: String
        var defaultValue: String?
        var range: Range<String.Index>
    }

    static func references(in text: String) throws -> [Reference] {
        var result: [Reference] = []
        var i = text.startIndex
        while let dollar = text[i...].firstIndex(of: "$") {
            let next = text.index(after: dollar)
            guard next < text.endIndex, text[next] == "{" else { i = next; continue }
            guard let close = text[next...].firstIndex(of: "}") else {
                throw SpecError("unterminated ${ in spec at offset \(text.distance(from: text.startIndex, to: dollar))")
            }
            let body = String(text[text.index(after: next)..<close])
            let name: String, defaultValue: String?
            if let sep = body.range(of: ":-") {
                name = String(body[..<sep.lowerBound])
                defaultValue = String(body[sep.upperBound...])
            } else {
                name = body
                defaultValue = nil
            }
            guard isVariableName(name) else { throw SpecError("bad variable reference ${\(body)}") }
            result.append(Reference(name: name, defaultValue: defaultValue, range: dollar..<text.index(after: close)))
            i = text.index(after: close)
        }
        return result
    }

    static func isVariableName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first == "_" || CharacterSet.letters.contains(first) else { return false }
        return s.unicodeScalars.allSatisfy { $0 == "_" || CharacterSet.alphanumerics.contains($0) }
    }

    /// Splits CLI arguments after SPEC into `NAME=value` assignments; anything else is an error.
    public static func parseAssignments(_ arguments: [String]) throws -> [String: String] {
        var values: [String: String] = [:]
        for arg in arguments {
            guard let eq = arg.firstIndex(of: "="), isVariableName(String(arg[..<eq])) else {
                throw SpecError("expected NAME=value after the spec, got '\(arg)' (quote the whole pipeline as one argument)")
            }
            values[String(arg[..<eq])] = String(arg[arg.index(after: eq)...])
        }
        return values
    }
}

/// A problem with the spec itself, before GStreamer sees it.
public struct SpecError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
