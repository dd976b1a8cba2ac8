import CYAML
import Foundation

/// A YAML document as a tree of nodes, each with the line it starts on: what libyaml's parser
/// loads (YAML 1.1; JSON is YAML too), copied out of its C structures. This file is the only
/// one that calls libyaml.
///
/// Scalars stay text: the schema that reads them knows what each should be. Aliases are
/// followed (an anchor used twice is copied twice), within a budget of nodes, so a file of
/// nested aliases (a "billion laughs") is refused rather than grown without bound.
public struct YAMLNode: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        /// `plain`: written without quotes (`8080`, `true`, `~` are plain; `"8080"` is not).
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        /// In the file's order; a key given twice is refused while loading.
        case mapping([(key: String, keyLine: Int, value: YAMLNode)])

        public static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case let (.scalar(x, p), .scalar(y, q)): return x == y && p == q
            case let (.sequence(x), .sequence(y)): return x == y
            case let (.mapping(x), .mapping(y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.keyLine == $1.keyLine && $0.value == $1.value }
            default: return false
            }
        }
    }
    public var value: Value
    /// 1-based.
    public var line: Int

    /// What a person calls this kind of node in a message.
    public var kind: String {
        switch value {
        case .scalar(let text, let plain): return plain && (text.isEmpty || text == "~" || text == "null") ? "nothing" : "a single value"
        case .sequence: return "a list"
        case .mapping: return "a mapping (key: value lines)"
        }
    }
}

/// A file that is not YAML, or more than the loader takes: the line and libyaml's words.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var message: String
    public var description: String { "line \(line): \(message)" }
}

public enum YAMLDocument {
    /// Nodes a document may expand to (aliases copied): far beyond any config, far below what
    /// would take the process's memory.
    public static let maxNodes = 100_000
    /// The largest file read.
    public static let maxBytes = 1 << 20

    /// The document's root; nil for an empty file. Throws for a YAML error, a second document,
    /// a key given twice, a key that is not a single value, or too many nodes.
    public static func load(_ text: String) throws(YAMLError) -> YAMLNode? {
        let bytes = Array(text.utf8)
        guard bytes.count <= maxBytes else { throw YAMLError(line: 1, message: "the file is larger than \(maxBytes >> 20) MB") }
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) != 0 else { throw YAMLError(line: 1, message: "libyaml could not start (out of memory)") }
        defer { yaml_parser_delete(&parser) }
        return try bytes.withUnsafeBufferPointer { buffer throws(YAMLError) -> YAMLNode? in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var document = yaml_document_t()
            guard yaml_parser_load(&parser, &document) != 0 else { throw parserError(&parser) }
            defer { yaml_document_delete(&document) }
            guard let root = yaml_document_get_root_node(&document) else { return nil }
            var budget = maxNodes
            let tree = try copy(root, in: &document, budget: &budget)
            var next = yaml_document_t()
            guard yaml_parser_load(&parser, &next) != 0 else { throw parserError(&parser) }
            defer { yaml_document_delete(&next) }
            if let second = yaml_document_get_root_node(&next) {
                throw YAMLError(line: Int(second.pointee.start_mark.line) + 1, message: "a second document (after ---): a config is one document")
            }
            return tree
        }
    }

    private static func parserError(_ parser: inout yaml_parser_t) -> YAMLError {
        let problem = parser.problem.map { String(cString: $0) } ?? "not YAML"
        let context = parser.context.map { String(cString: $0) + ": " } ?? ""
        let mark = parser.problem_mark.line > 0 || parser.problem_mark.column > 0 ? parser.problem_mark : parser.context_mark
        return YAMLError(line: Int(mark.line) + 1, message: "not valid YAML: \(context)\(problem)")
    }

    private static func copy(_ node: UnsafeMutablePointer<yaml_node_t>, in document: inout yaml_document_t, budget: inout Int) throws(YAMLError) -> YAMLNode {
        let line = Int(node.pointee.start_mark.line) + 1
        budget -= 1
        guard budget >= 0 else { throw YAMLError(line: line, message: "more than \(maxNodes) nodes (aliases nested to grow the document?)") }
        switch node.pointee.type {
        case YAML_SCALAR_NODE:
            let scalar = node.pointee.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            return YAMLNode(value: .scalar(text, plain: scalar.style == YAML_PLAIN_SCALAR_STYLE), line: line)
        case YAML_SEQUENCE_NODE:
            var items: [YAMLNode] = []
            var item = node.pointee.data.sequence.items.start
            while let i = item, i != node.pointee.data.sequence.items.top {
                if let child = yaml_document_get_node(&document, i.pointee) { items.append(try copy(child, in: &document, budget: &budget)) }
                item = i + 1
            }
            return YAMLNode(value: .sequence(items), line: line)
        case YAML_MAPPING_NODE:
            var pairs: [(key: String, keyLine: Int, value: YAMLNode)] = []
            var pair = node.pointee.data.mapping.pairs.start
            while let p = pair, p != node.pointee.data.mapping.pairs.top {
                if let k = yaml_document_get_node(&document, p.pointee.key), let v = yaml_document_get_node(&document, p.pointee.value) {
                    let key = try copy(k, in: &document, budget: &budget)
                    guard case .scalar(let name, _) = key.value else {
                        throw YAMLError(line: key.line, message: "a key that is \(key.kind): keys are single values")
                    }
                    if pairs.contains(where: { $0.key == name }) { throw YAMLError(line: key.line, message: "key \(name) is given twice in the same mapping") }
                    pairs.append((name, key.line, try copy(v, in: &document, budget: &budget)))
                }
                pair = p + 1
            }
            return YAMLNode(value: .mapping(pairs), line: line)
        default:
            return YAMLNode(value: .scalar("", plain: true), line: line)
        }
    }
}
