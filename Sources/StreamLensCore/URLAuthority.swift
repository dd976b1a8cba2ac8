/// The `HOST[:PORT]` part of a URL given in a property (lensmetadata's mqtt:// and http://
/// locations): IPv6 hosts in brackets (`[::1]:1883`), the port checked, no user or password
/// (credentials do not belong in a property that is printed).
public struct URLAuthority: Equatable, Sendable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) { self.host = host; self.port = port }

    /// `bad` makes the error for what is wrong (it names the property); `noHost` says how to
    /// write the URL.
    public init(parsing authority: Substring, defaultPort: Int, noHost: String, credentials: String,
                bad: (String) -> StageError) throws {
        guard !authority.contains("@") else { throw bad(credentials) }
        var hostPart = authority, portPart: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw bad("unclosed [ in the host") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("expected :PORT after ]") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw bad(noHost) }
        host = String(hostPart)
        if let portPart {
            guard let p = Int(portPart), (1...65535).contains(p) else { throw bad("bad port \(portPart) (1…65535)") }
            port = p
        } else {
            port = defaultPort
        }
    }

    /// `host:port`, an IPv6 host in brackets.
    public var description: String { "\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}
