import Foundation

/// A user and password for a server StreamLens talks to or runs (lensrtsp's viewers, an MQTT
/// broker): from a file holding `user:password` on its first line, else from two environment
/// variables, else none — never from a property value or a URL, so they stay out of pipeline
/// specs and process lists.
public struct UserPassword: Sendable, Equatable {
    public var user: String
    public var password: String

    public init(user: String, password: String) { self.user = user; self.password = password }

    /// From `file` when it is not empty (named `fileName` in messages: "auth-file"), else from
    /// `<variables>_USER` and `<variables>_PASSWORD`; nil when neither is given. `basic`: HTTP
    /// Basic authentication's rules (RTSP), where the password may not be empty and the user may
    /// not contain the ':' that separates them. A StageError says what is missing or wrong,
    /// never echoing the password.
    public static func resolve(file: String, fileName: String, variables: String, environment: [String: String],
                               basic: Bool = false) throws -> UserPassword? {
        if !file.isEmpty {
            try InputFile.check(file, what: fileName)
            guard let data = FileManager.default.contents(atPath: file) else {
                let why = FileManager.default.fileExists(atPath: file) ? "permission denied" : "no such file"
                throw StageError("cannot read \(fileName) \(file) (\(why))")
            }
            let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex, !basic || line.index(after: colon) != line.endIndex else {
                throw StageError("\(fileName) \(file) must hold user:password on its first line")
            }
            return UserPassword(user: String(line[..<colon]), password: String(line[line.index(after: colon)...]))
        }
        let userVariable = variables + "_USER", passwordVariable = variables + "_PASSWORD"
        let user = environment[userVariable] ?? "", password = environment[passwordVariable] ?? ""
        if user.isEmpty && password.isEmpty { return nil }
        let both = basic ? "set both for authentication, or neither" : "set both, or neither"
        guard !user.isEmpty else { throw StageError("\(passwordVariable) is set but \(userVariable) is not: \(both)") }
        guard !password.isEmpty else { throw StageError("\(userVariable) is set but \(passwordVariable) is not: \(both)") }
        guard !basic || !user.contains(":") else {
            throw StageError("\(userVariable) must not contain ':' (Basic authentication separates user and password with it)")
        }
        return UserPassword(user: user, password: password)
    }
}
