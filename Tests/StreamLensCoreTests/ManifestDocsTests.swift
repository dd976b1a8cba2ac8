import Foundation
import StreamLensCore
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// docs/models.md's example manifests are what a user copies: each must load as written (its
/// decoder's parameters read and validated, its labels file found beside it), and each detector
/// family must have one.
@Suite struct ManifestDocsTests {
    @Test func everyExampleManifestInTheDocsLoads() throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("docs/models.md"), encoding: .utf8)
        let blocks = text.components(separatedBy: "```json\n").dropFirst().compactMap { $0.components(separatedBy: "\n```").first }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docs-manifests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("labels"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("Models/labels/coco.txt"),
                                         to: folder.appendingPathComponent("labels/coco.txt"))
        var families: Set<String> = []
        for (i, block) in blocks.enumerated() where block.contains("\"schema_version\"") {
            let path = folder.appendingPathComponent("example-\(i).json").path
            try block.write(toFile: path, atomically: true, encoding: .utf8)
            let manifest = try ModelManifest.load(path: path)
            families.insert(manifest.decoder.name)
            if manifest.decoder.detector != nil { _ = try manifest.makeDecoder() }
        }
        #expect(families.isSuperset(of: Set(DecoderRegistry.detectors.map { $0.decoderName })), "families with an example: \(families.sorted())")
    }
}
