import Foundation
import Synchronization

/// The process's events, one JSON object each, numbered from 1: what the stages found on frames
/// (lenszone's crossings, entries and exits: the `streamlens-event` bus messages) and what
/// happened to sources (added, playing, ended, failed, restarted, removed). The HTTP API streams
/// them (`GET /api/events`, Server-Sent Events) and replays the last `capacity` of them to a
/// client that reconnects with the last id it saw.
///
/// Subscribers are called under the log's lock, in id order: they must only hand the entry on
/// (an HTTP stream's write is queued), never wait.
public final class EventLog: Sendable {
    public struct Entry: Sendable, Equatable {
        public var id: Int
        /// One line of JSON: `id`, `source`, `type` and the event's own fields.
        public var json: String
    }

    public static let shared = EventLog(capacity: 1000)

    public let capacity: Int
    private struct State {
        var nextID = 1
        var entries: [Entry] = []
        var subscribers: [Int: @Sendable (Entry) -> Void] = [:]
        var nextSubscriber = 1
    }
    private let state = Mutex(State())

    public init(capacity: Int) { self.capacity = capacity }

    /// Adds an event of `source` (a `streamlens serve` source's name; `main` under `run`) with its
    /// `type` and fields (strings, numbers, booleans).
    @discardableResult
    public func append(source: String, type: String, fields: [String: any Sendable] = [:]) -> Int {
        var object = fields
        object["type"] = type
        return append(source: source, object: object)
    }

    /// Adds an event given as a JSON object (a stage's event as lensmetadata writes it), with
    /// `stage` (the element that found it) added. A text that is not a JSON object is not added.
    @discardableResult
    public func append(source: String, stage: String, eventJSON: String) -> Int? {
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(eventJSON.utf8)) as? [String: Any] else { return nil }
        var object: [String: any Sendable] = [:]
        for (key, value) in parsed { object[key] = EventLog.sendable(value) }
        object["stage"] = stage
        return append(source: source, object: object)
    }

    private static func sendable(_ value: Any) -> any Sendable {
        switch value {
        case let v as String: return v
        // A stage's event has strings and numbers only (FrameEvent).
        case let v as NSNumber: return v.doubleValue == v.doubleValue.rounded() && abs(v.doubleValue) < 1e15 ? v.intValue as any Sendable : v.doubleValue
        default: return String(describing: value)
        }
    }

    private func append(source: String, object: [String: any Sendable]) -> Int {
        state.withLock { s in
            var object = object
            let id = s.nextID
            s.nextID += 1
            object["id"] = id
            object["source"] = source
            if object["time_unix"] == nil { object["time_unix"] = (Date().timeIntervalSince1970 * 1000).rounded() / 1000 }
            let entry = Entry(id: id, json: EventLog.encode(object))
            s.entries.append(entry)
            if s.entries.count > capacity { s.entries.removeFirst(s.entries.count - capacity) }
            for subscriber in s.subscribers.values { subscriber(entry) }
            return id
        }
    }

    /// Registers `receive` for every event from now on, after handing it, under the same lock,
    /// the events kept after `lastID` (none when nil): nothing is missed, repeated or out of order.
    /// The token ends the subscription (`unsubscribe`).
    public func subscribe(after lastID: Int?, _ receive: @escaping @Sendable (Entry) -> Void) -> Int {
        state.withLock { s in
            if let lastID { for entry in s.entries where entry.id > lastID { receive(entry) } }
            let token = s.nextSubscriber
            s.nextSubscriber += 1
            s.subscribers[token] = receive
            return token
        }
    }

    public func unsubscribe(_ token: Int) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: token) }
    }

    /// The events kept, oldest first.
    public var entries: [Entry] { state.withLock { $0.entries } }

    /// Keys sorted, so the same event always reads the same.
    static func encode(_ object: [String: any Sendable]) -> String {
        "{" + object.keys.sorted().map { key in JSONText.string(key) + ":" + JSONText.value(object[key]!) }.joined(separator: ",") + "}"
    }
}

/// JSON text of plain values, as Swift prints numbers (0.3, not 0.29999999999999999).
public enum JSONText {
    public static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    public static func number(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int(d)) }
        return "\(d)"
    }

    public static func value(_ v: any Sendable) -> String {
        switch v {
        case let s as String: return string(s)
        case let b as Bool: return b ? "true" : "false"
        case let i as Int: return String(i)
        case let d as Double: return number(d)
        case let a as [any Sendable]: return "[" + a.map { value($0) }.joined(separator: ",") + "]"
        case let o as [String: any Sendable]: return "{" + o.keys.sorted().map { string($0) + ":" + value(o[$0]!) }.joined(separator: ",") + "}"
        default: return string(String(describing: v))
        }
    }
}
