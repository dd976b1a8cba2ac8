import Foundation
import StreamLensCore
import StreamLensHTTP

/// In a cluster, a request about a camera another instance runs is answered by that instance:
/// sent on (method, path, query, body) to the API it advertises in etcd, with this instance's
/// own token (every instance of a cluster has the same), and its answer passed back. A request
/// that was sent on already is never sent on again (a view that changed in between would
/// otherwise bounce it between two instances).
extension APIServer {
    static let forwardedHeader = "X-StreamLens-Forwarded-By"

    func forward(_ call: APICall, to holder: String, source: String) {
        if call.request.header(Self.forwardedHeader) != nil {
            return call.reply(Self.error(409, "source \(source) moved while the request was on its way: ask again"))
        }
        waiting.run(else: call.replying) { [self] in call.reply(forwarded(call.request, to: holder, source: source)) }
    }

    private func forwarded(_ request: HTTPRequest, to holder: String, source: String) -> HTTPReply {
        guard let c = URLComponents(string: holder), let host = c.host, let port = c.port else {
            return Self.error(502, "source \(source) runs at \(holder), which is not an address this instance can reach (cluster: advertise)")
        }
        var target = URLComponents()
        target.path = request.path
        if !request.query.isEmpty { target.queryItems = request.query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) } }
        var headers: [(String, String)] = [(Self.forwardedHeader, "streamlens")]
        for name in ["content-type", "accept"] { if let v = request.header(name) { headers.append((name, v)) } }
        if let token = settings.token { headers.append(("Authorization", "Bearer \(token)")) }
        let response: HTTPResponse
        do {
            response = try HTTPClient(host: host, port: port, timeout: 20).exchange(method: request.method, path: target.string ?? request.path,
                                                                                  headers: headers, body: Data(request.body))
        } catch {
            return Self.error(502, "source \(source) runs at \(holder), which did not answer: \(error)")
        }
        var reply = HTTPReply(status: response.status, body: Array(response.body))
        for name in ["content-type", "location", "retry-after", "etag"] {
            if let v = response.headers[name] { reply.headers.append((name.capitalized, v)) }
        }
        return reply
    }
}
