import Foundation
import StreamLensCore

/// A broker's user and password (MQTT, Kafka's SASL, NATS): from `credentials=` (a file holding
/// `user:password` on its first line), else from STREAMLENS_<BUS>_USER and
/// STREAMLENS_<BUS>_PASSWORD (STREAMLENS_MQTT_USER…), else none — never
/// from a property value or the URL, so they stay out of pipeline specs and process lists
/// (lensrtsp's auth-file and STREAMLENS_RTSP_* follow the same rules).
public struct BrokerCredentials: Sendable, Equatable {
    public var user: String
    public var password: String
    public init(user: String, password: String) { self.user = user; self.password = password }

    /// `bus`: the environment's infix (MQTT, KAFKA, NATS).
    public static func resolve(file: String, environment: [String: String], bus: String) throws -> BrokerCredentials? {
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
            return BrokerCredentials(user: String(line[..<colon]), password: String(line[line.index(after: colon)...]))
        }
        let userName = "STREAMLENS_\(bus)_USER", passwordName = "STREAMLENS_\(bus)_PASSWORD"
        let user = environment[userName] ?? "", password = environment[passwordName] ?? ""
        if user.isEmpty && password.isEmpty { return nil }
        // Say which half is missing; never echo the password.
        guard !user.isEmpty else {
            throw StageError("\(passwordName) is set but \(userName) is not: set both, or neither")
        }
        guard !password.isEmpty else {
            throw StageError("\(userName) is set but \(passwordName) is not: set both, or neither")
        }
        return BrokerCredentials(user: user, password: password)
    }
}
