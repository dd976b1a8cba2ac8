import Foundation
import StreamLensCore
import StreamLensGst
import StreamLensHTTP

/// The sources and their stages: list, add, remove, readiness, properties (PATCH), keys and
/// clips — the same calls the control socket makes (`SourceCatalog`, `PipelineCommands`).
extension APIServer {
    func root(_ call: APICall) {
        if (call.request.header("accept") ?? "").contains("text/html") {
            let page = settings.token.map { authenticated(call.request, token: $0) } ?? true ? "index.html" : "login.html"
            return call.reply(consoleFile(page))
        }
        call.reply(Self.encoded(200, APIAnswer.Root(version: version)))
    }

    /// `detailed`: which sources (a caller without the token learns only ready or not).
    func readiness(detailed: Bool) -> HTTPReply {
        let all = catalog.statuses()
        let waiting = all.filter { $0.state != SourceSet.State.playing.rawValue }
        if waiting.isEmpty { return Self.encoded(200, APIAnswer.Ready(sources: detailed ? all.map(\.name) : nil)) }
        return Self.encoded(503, APIAnswer.NotReady(notPlaying: detailed ? waiting.map { .init(name: $0.name, state: $0.state, error: $0.error) } : nil))
    }

    func noSource(_ name: String) -> HTTPReply {
        Self.error(SourceRefusal.unknown(name, among: catalog.statuses().map(\.name)))
    }

    func source(_ name: String) -> HTTPReply {
        guard let status = catalog.statuses().first(where: { $0.name == name }) else { return noSource(name) }
        return Self.encoded(200, APIAnswer.SourceDetail(status: status, stages: catalog.stageSummaries(of: name)))
    }

    func stages(_ name: String) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        return Self.encoded(200, commands.stages().map(APIAnswer.Stage.init))
    }

    func stage(_ name: String, _ stage: String) -> HTTPReply {
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        do { return Self.encoded(200, APIAnswer.Stage(try commands.stage(stage))) } catch { return Self.error(404, Self.message(error)) }
    }

    /// Starts a source and answers once it plays (or failed to start), on a thread of its own.
    func addSource(_ call: APICall) {
        waiting.run(else: call.replying) { [self] in call.reply(addSource(call.request)) }
    }

    private func addSource(_ request: HTTPRequest) -> HTTPReply {
        let body: [String: JSONValue]
        switch Self.jsonBody(request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let object) = value else { return Self.error(400, "the body must be a JSON object {\"name\": …, \"uri\": …}") }
            body = object
        }
        if !catalog.acceptsNewSources, let refusal = catalog.add(name: "", uri: "") { return Self.error(refusal) }
        guard case .string(let name)? = body["name"], case .string(let uri)? = body["uri"] else {
            return Self.error(422, "the body needs \"name\" and \"uri\", both strings")
        }
        if let unknown = body.keys.first(where: { $0 != "name" && $0 != "uri" }) { return Self.error(422, "unknown field \(unknown) (a source has name and uri)") }
        // The name, the URI and whether the name is taken are checked by the catalog (under its lock).
        if let refusal = catalog.add(name: name, uri: uri) { return Self.error(refusal) }
        var response = source(name)
        response.status = 201
        response.headers.append(("Location", "/api/sources/\(name)"))
        return kept(response)
    }

    /// A change's answer, saying when the change will not outlive a restart (serve --config
    /// could not write its state): an HTTP Warning header, code 199.
    func kept(_ response: HTTPReply) -> HTTPReply {
        guard let problem = catalog.changesNotKept else { return response }
        var response = response
        let text = problem.unicodeScalars.filter { $0.properties.generalCategory != .control && $0 != "\"" && $0 != "\\" }
        response.headers.append(("Warning", "199 streamlens \"not kept across a restart: \(String(text))\""))
        return response
    }

    /// Ends a source and answers once its outputs are finalized, on a thread of its own; a name
    /// that is not there is answered at once (nothing waits behind starts for that).
    func removeSource(_ call: APICall) {
        let name = call.parameter("name")
        guard catalog.statuses().contains(where: { $0.name == name }) else { return call.reply(noSource(name)) }
        waiting.run(else: call.replying) { [self] in call.reply(removeSource(name)) }
    }

    private func removeSource(_ name: String) -> HTTPReply {
        if !catalog.acceptsNewSources, let refusal = catalog.remove(name: name) { return Self.error(refusal) }
        guard let before = catalog.statuses().first(where: { $0.name == name }) else { return noSource(name) }
        if let refusal = catalog.remove(name: name) { return Self.error(refusal) }
        var status = before
        status.state = before.state == SourceSet.State.failed.rawValue ? before.state : SourceSet.State.ended.rawValue
        status.fps = 0
        return kept(Self.encoded(200, status))
    }

    func patch(_ call: APICall) -> HTTPReply {
        let (name, stage) = (call.parameter("name"), call.parameter("stage"))
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        do { _ = try commands.stage(stage) } catch { return Self.error(404, Self.message(error)) }
        let object: [String: JSONValue]
        switch Self.jsonBody(call.request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let o) = value, !o.isEmpty else { return Self.error(422, "the body must be a JSON object of properties and values, e.g. {\"strength\": 0.5}") }
            object = o
        }
        var assignments: [(name: String, value: String)] = []
        for key in object.keys.sorted() {
            guard let text = object[key]!.propertyText else {
                return Self.error(422, "property \(key): the value must be a string, a number or true/false", property: key)
            }
            assignments.append((key, text))
        }
        do {
            try commands.set(element: stage, assignments)
        } catch {
            return Self.error(422, error.message, property: error.property)
        }
        return kept(self.stage(name, stage))
    }

    func press(_ call: APICall) -> HTTPReply {
        let name = call.parameter("name")
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        switch Self.jsonBody(call.request) {
        case .failure(let refusal): return refusal
        case .success(let value):
            guard case .object(let o) = value, case .string(let key)? = o["key"], !key.isEmpty, key.count <= 32,
                  !key.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                return Self.error(422, "the body must be {\"key\": NAME}, e.g. {\"key\": \"+\"} or {\"key\": \"space\"}")
            }
            return Self.encoded(200, APIAnswer.Done(done: commands.press(key: key)))
        }
    }

    /// A clip now from every lensrecord of the source (or the one `?stage=` names): each one's
    /// `record` property set to the reason (`?reason=`, default api). 202: the stages asked;
    /// the clip itself comes later, as a `clip` event.
    func record(_ call: APICall) -> HTTPReply {
        let name = call.parameter("name")
        guard let commands = catalog.commands(of: name) else { return noSource(name) }
        let wanted = call.request.query["stage"]
        let recorders = commands.stages().filter { $0.factory == "lensrecord" && (wanted == nil || $0.name == wanted) }
        guard !recorders.isEmpty else {
            return Self.error(404, wanted.map { "source \(name) has no lensrecord named \($0)" } ?? "source \(name) has no lensrecord stage")
        }
        var reason = (call.request.query["reason"] ?? "api").trimmingCharacters(in: .whitespacesAndNewlines)
        if reason.isEmpty { reason = "api" }
        guard reason.count <= 64, reason.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            return Self.error(422, "reason: at most 64 letters, digits, - _ or .", property: "reason")
        }
        for stage in recorders {
            do { try commands.set(element: stage.name, [("record", reason)]) } catch { return Self.error(422, error.message, property: error.property) }
        }
        return Self.encoded(202, APIAnswer.Recording(recording: recorders.map(\.name), reason: reason))
    }
}
