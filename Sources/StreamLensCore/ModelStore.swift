import Foundation

/// Where third-party model files are installed, and how a manifest names one.
///
/// Model files StreamLens does not own (MediaPipe's detectors, Magenta's networks) are never
/// committed: `Models/model-catalogue.json` lists each with its licence, size, sha256 and public URLs,
/// and `streamlens models fetch NAME` (tools/models.py) downloads, verifies and installs them
/// into the store, one folder per catalogue entry. A manifest names such a file as
/// `catalogue:NAME/FILE` (e.g. `"model": "catalogue:magenta/style_transfer_f16_384.tflite"`),
/// never by a path outside the repository.
///
/// The store is per user, like the compiled-model cache (~/.cache/streamlens): the same files
/// serve every checkout, the plugin in any application and any working directory. Its folder:
/// `$STREAMLENS_MODELS`, else `$XDG_DATA_HOME/streamlens/models`, else
/// `~/.local/share/streamlens/models` — the rule tools/models.py follows too.
public enum ModelStore {
    /// The prefix of a catalogue reference in a manifest.
    public static let scheme = "catalogue:"

    /// The store's folder for this environment.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["STREAMLENS_MODELS"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit).standardizedFileURL.path
        }
        let base: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
            base = URL(fileURLWithPath: home).appendingPathComponent(".local/share").path
        }
        return URL(fileURLWithPath: base).appendingPathComponent("streamlens/models").path
    }

    /// A manifest's `catalogue:NAME/FILE`, split; nil for an ordinary path.
    public struct Reference: Equatable, Sendable {
        public var model: String
        public var file: String

        /// Throws for a reference that is not two plain names (nothing may point outside the store).
        public init?(_ text: String) throws {
            guard text.hasPrefix(ModelStore.scheme) else { return nil }
            let parts = text.dropFirst(ModelStore.scheme.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, parts.allSatisfy(Self.isPlainName) else {
                throw StageError("\(text) is not a catalogue reference: write catalogue:NAME/FILE (a model of Models/model-catalogue.json and one of its files)")
            }
            model = parts[0]
            file = parts[1]
        }

        static func isPlainName(_ s: String) -> Bool {
            !s.isEmpty && !s.hasPrefix(".") && !s.contains("\\") && !s.contains("\0")
        }

        /// The installed file, or a StageError that says how to install it.
        public func installedPath(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
            let folder = URL(fileURLWithPath: ModelStore.directory(environment: environment)).appendingPathComponent(model)
            let path = folder.appendingPathComponent(file).path
            guard FileManager.default.fileExists(atPath: path) else {
                throw StageError("model \(model) is not installed (\(path) not found): run `streamlens models fetch \(model)` (Models/model-catalogue.json lists where it comes from)")
            }
            return path
        }
    }
}
