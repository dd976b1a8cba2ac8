import Foundation
import Testing

/// What set-up leaves outside the checkout is safe for the whole machine.
@Suite struct SetupTests {
    /// Every folder set-up put on the system's dynamic linker path is root's alone (and so are
    /// the folders above it), and none is inside this checkout: a library planted in a folder a
    /// user can write would be loaded by every program on the machine.
    @Test func theDynamicLinkerPathHoldsOnlyRootOwnedFolders() throws {
        let conf = "/etc/ld.so.conf.d/streamlens-openvino.conf"
        let text = try String(contentsOfFile: conf, encoding: .utf8)
        let folders = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        #expect(!folders.isEmpty, "\(conf) lists no folder")
        let checkout = CLI.packageRoot.resolvingSymlinksInPath().path
        for folder in folders {
            let real = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
            #expect(!real.hasPrefix(checkout + "/"), "\(folder) is inside the checkout")
            var path = real
            while true {
                let attributes = try FileManager.default.attributesOfItem(atPath: path)
                let owner = (attributes[.ownerAccountID] as? NSNumber)?.intValue ?? -1
                let mode = (attributes[.posixPermissions] as? Int) ?? 0o777
                #expect(owner == 0, "\(path) belongs to uid \(owner), not root")
                // The sticky /tmp would be world-writable but it is never on this path.
                #expect(mode & 0o022 == 0, "\(path) is writable by its group or others (mode \(String(mode, radix: 8)))")
                if path == "/" { break }
                path = (path as NSString).deletingLastPathComponent
            }
            // The C API the build links is there.
            #expect(FileManager.default.fileExists(atPath: real + "/libopenvino_c.so"), "\(real)/libopenvino_c.so")
        }
    }
}
