import Foundation
import StreamLensCore
import Synchronization

/// etcd's v3 API through its JSON gateway: every etcd 3.4 serves it on its client port (POST
/// /v3/kv/range, /v3/kv/txn, /v3/lease/grant…; keys and values in base64, 64-bit numbers as
/// strings), so StreamLens needs no gRPC stack and no C for it, only the HTTP client it already
/// has (`HTTPClient`: kept-alive connections, every answer read within limits and a deadline).
/// Debian packages no etcd client library for C or Swift.
///
/// Endpoints are tried in turn: a request that fails to reach one goes to the next, and the one
/// that answered is used first from then on.
public final class EtcdClient: Sendable {
    private let clients: [HTTPClient]
    private let preferred = Atomic<Int>(0)
    public let endpoints: [String]

    /// `endpoints`: http://HOST:PORT URLs (`ServeConfig.Cluster.endpointProblem` checks them);
    /// `timeout`: each request's deadline, seconds.
    public init(endpoints: [String], timeout: Double) {
        self.endpoints = endpoints
        clients = endpoints.compactMap { e in
            guard let c = URLComponents(string: e), let host = c.host, let port = c.port else { return nil }
            var limits = HTTPResponseReader.Limits()
            limits.bodyBytes = 16 * 1024 * 1024
            return HTTPClient(host: host, port: port, timeout: timeout, limits: limits)
        }
    }

    /// One key and its value as etcd holds it.
    public struct KeyValue: Sendable, Equatable {
        public var key: String
        public var value: Data
        public var createRevision: Int64
        public var modRevision: Int64
        /// The lease it lives under (0: none).
        public var lease: Int64
    }

    // MARK: Leases

    /// A new lease of `ttl` seconds; its ID.
    public func grant(ttl: Int) throws(EtcdError) -> Int64 {
        let answer = try call("/v3/lease/grant", ["TTL": String(ttl)])
        guard let id = Self.int(answer["ID"]), id != 0 else { throw EtcdError("etcd granted no lease: \(Self.brief(answer))") }
        return id
    }

    /// Renews lease `id`; the seconds it now has to live (0: it has expired or was revoked).
    public func keepAlive(_ id: Int64) throws(EtcdError) -> Int {
        let answer = try call("/v3/lease/keepalive", ["ID": String(id)])
        let result = answer["result"] as? [String: Any] ?? answer
        return Int(Self.int(result["TTL"]) ?? 0)
    }

    /// Ends lease `id` now: every key under it goes at once.
    public func revoke(_ id: Int64) throws(EtcdError) {
        _ = try call("/v3/lease/revoke", ["ID": String(id)])
    }

    // MARK: Keys

    /// Every key under `prefix`, and the store's revision they were read at.
    public func range(prefix: String) throws(EtcdError) -> (revision: Int64, values: [KeyValue]) {
        let answer = try call("/v3/kv/range", ["key": Self.base64(prefix), "range_end": Self.base64(Self.prefixEnd(prefix))])
        let values = (answer["kvs"] as? [[String: Any]] ?? []).compactMap { kv -> KeyValue? in
            guard let key = (kv["key"] as? String).flatMap({ Data(base64Encoded: $0) }).map({ String(decoding: $0, as: UTF8.self) }) else { return nil }
            return KeyValue(key: key, value: (kv["value"] as? String).flatMap { Data(base64Encoded: $0) } ?? Data(),
                            createRevision: Self.int(kv["create_revision"]) ?? 0, modRevision: Self.int(kv["mod_revision"]) ?? 0,
                            lease: Self.int(kv["lease"]) ?? 0)
        }
        return (Self.revision(answer), values)
    }

    /// Whether `key` itself is there (a range of that one key).
    public func exists(_ key: String) throws(EtcdError) -> Bool {
        let answer = try call("/v3/kv/range", ["key": Self.base64(key), "count_only": true])
        return (Self.int(answer["count"]) ?? 0) > 0
    }

    /// Sets `key` (under `lease`, or none for 0); the revision written.
    @discardableResult
    public func put(_ key: String, _ value: Data, lease: Int64 = 0) throws(EtcdError) -> Int64 {
        try Self.revision(call("/v3/kv/put", Self.putRequest(key, value, lease: lease)))
    }

    /// Sets `key` only if it does not exist (a transaction on its create revision): the revision
    /// written, or nil when the key was there already.
    public func create(_ key: String, _ value: Data, lease: Int64 = 0) throws(EtcdError) -> Int64? {
        let answer = try call("/v3/kv/txn", [
            "compare": [["target": "CREATE", "key": Self.base64(key), "create_revision": "0", "result": "EQUAL"]],
            "success": [["request_put": Self.putRequest(key, value, lease: lease)]],
        ])
        return answer["succeeded"] as? Bool == true ? Self.revision(answer) : nil
    }

    /// Deletes `key`; with `lease`, only while the key is under that lease.
    @discardableResult
    public func delete(_ key: String, ifLease lease: Int64? = nil) throws(EtcdError) -> Bool {
        let request: [String: Any] = ["key": Self.base64(key)]
        guard let lease else {
            let answer = try call("/v3/kv/deleterange", request)
            return (Self.int(answer["deleted"]) ?? 0) > 0
        }
        let answer = try call("/v3/kv/txn", [
            "compare": [["target": "LEASE", "key": Self.base64(key), "lease": String(lease), "result": "EQUAL"]],
            "success": [["request_delete_range": request]],
        ])
        return answer["succeeded"] as? Bool == true
    }

    // MARK: The wire

    private func call(_ path: String, _ request: [String: Any]) throws(EtcdError) -> [String: Any] {
        guard !clients.isEmpty else { throw EtcdError("no etcd endpoint") }
        let body: Data
        do { body = try JSONSerialization.data(withJSONObject: request) } catch { throw EtcdError("could not encode a request to etcd") }
        var problems: [String] = []
        let first = preferred.load(ordering: .relaxed)
        for k in 0..<clients.count {
            let i = (first + k) % clients.count
            let response: HTTPResponse
            do {
                response = try clients[i].exchange(method: "POST", path: path, headers: [("Content-Type", "application/json")], body: body)
            } catch {
                problems.append("\(endpoints[i]): \(error)")
                continue
            }
            preferred.store(i, ordering: .relaxed)
            let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
            guard response.status == 200, let object else {
                let text = String(decoding: response.body.prefix(300), as: UTF8.self)
                throw EtcdError("etcd \(endpoints[i]) answered \(path) with HTTP \(response.status): \(text)")
            }
            if let error = object["error"] as? String { throw EtcdError("etcd \(endpoints[i]): \(error)") }
            return object
        }
        throw EtcdError("etcd cannot be reached (\(problems.joined(separator: "; ")))")
    }

    private static func putRequest(_ key: String, _ value: Data, lease: Int64) -> [String: Any] {
        var put: [String: Any] = ["key": base64(key), "value": value.base64EncodedString()]
        if lease != 0 { put["lease"] = String(lease) }
        return put
    }

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    /// The end of the range of keys starting with `prefix`: its last byte plus one.
    static func prefixEnd(_ prefix: String) -> String {
        var bytes = Array(prefix.utf8)
        while let last = bytes.last {
            if last < 0xFF { bytes[bytes.count - 1] = last + 1; return String(decoding: bytes, as: UTF8.self) }
            bytes.removeLast()
        }
        return "\0"
    }

    /// A 64-bit number as the gateway writes it (a string; a number in some fields).
    static func int(_ value: Any?) -> Int64? {
        if let s = value as? String { return Int64(s) }
        if let n = value as? NSNumber { return n.int64Value }
        return nil
    }

    private static func revision(_ answer: [String: Any]) -> Int64 {
        int((answer["header"] as? [String: Any])?["revision"]) ?? 0
    }

    private static func brief(_ answer: [String: Any]) -> String {
        ((try? JSONSerialization.data(withJSONObject: answer)).map { String(decoding: $0.prefix(200), as: UTF8.self) }) ?? "?"
    }
}

public struct EtcdError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
