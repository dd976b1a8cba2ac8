/// The rule for a source's name (serve's cameras, run's `main`): names go into file names,
/// RTSP mounts and metric labels, so 1–64 letters, digits, '-' or '_'.
public enum SourceName {
    public static func isValid(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }
}
