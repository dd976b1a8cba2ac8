import Foundation
import StreamLensCore

/// A broker's user and password: from `credentials=` (a file holding `user:password` on its
/// first line), else from STREAMLENS_MQTT_USER and STREAMLENS_MQTT_PASSWORD, else none — never
/// from a property value or the URL, so they stay out of pipeline specs and process lists
/// (lensrtsp's auth-file and STREAMLENS_RTSP_* follow the same rules).
public struct MQTTCredentials: Sendable, Equatable {
    public var user: String
    public var password: String
    public init(user: String, password: String) { self.user = user; self.password = password }

    public static func resolve(file: String, environment: [String: String]) throws -> MQTTCredentials? {
        if !file.isEmpty {
            try InputFile.check(file, what: "credentials")
            guard let data = FileManager.default.contents(atPath: file) else {
                let why = FileManager.default.fileExists(atPath: file) ? "permission denied" : "no such file"
                throw StageError("cannot read credentials file \(file) (\(why))")
            }
            let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw StageError("credentials file \(file) must hold user:password on its first line")
            }
            return MQTTCredentials(user: String(line[..<colon]), password: String(line[line.index(after: colon)...]))
        }
        let user = environment["STREAMLENS_MQTT_USER"] ?? "", password = environment["STREAMLENS_MQTT_PASSWORD"] ?? ""
        if user.isEmpty && password.isEmpty { return nil }
        // Say which half is missing; never echo the password.
        guard !user.isEmpty else {
            throw StageError("STREAMLENS_MQTT_PASSWORD is set but STREAMLENS_MQTT_USER is not: set both, or neither")
        }
        guard !password.isEmpty else {
            throw StageError("STREAMLENS_MQTT_USER is set but STREAMLENS_MQTT_PASSWORD is not: set both, or neither")
        }
        return MQTTCredentials(user: user, password: password)
    }
}
