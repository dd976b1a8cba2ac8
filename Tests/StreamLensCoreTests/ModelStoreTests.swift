import Foundation
import StreamLensCore
import Testing

/// Where catalogue models are installed and how manifests name them (ModelStore); the fetching
/// itself is tools/models.py, tested through the CLI (CLITests/ModelsTests).
@Suite struct ModelStoreTests {
    @Test func theStoreFolderFollowsTheEnvironment() {
        #expect(ModelStore.directory(environment: ["STREAMLENS_MODELS": "/srv/models/", "HOME": "/home/u"]) == "/srv/models")
        #expect(ModelStore.directory(environment: ["XDG_DATA_HOME": "/data", "HOME": "/home/u"]) == "/data/streamlens/models")
        #expect(ModelStore.directory(environment: ["HOME": "/home/u"]) == "/home/u/.local/share/streamlens/models")
        // A relative XDG_DATA_HOME is invalid by the XDG rules, and an empty variable is unset.
        #expect(ModelStore.directory(environment: ["XDG_DATA_HOME": "data", "STREAMLENS_MODELS": "", "HOME": "/home/u"])
                == "/home/u/.local/share/streamlens/models")
    }

    @Test func referencesAreTwoPlainNames() throws {
        #expect(try ModelStore.Reference("catalogue:magenta/style_transfer_f16_384.tflite")
                == ModelStore.Reference("catalogue:magenta/style_transfer_f16_384.tflite"))
        let r = try #require(try ModelStore.Reference("catalogue:magenta/style_transfer_f16_384.tflite"))
        #expect(r.model == "magenta" && r.file == "style_transfer_f16_384.tflite")
        #expect(try ModelStore.Reference("face.tflite") == nil)
        #expect(try ModelStore.Reference("/abs/catalogue:x/y") == nil)
        for bad in ["catalogue:", "catalogue:magenta", "catalogue:magenta/", "catalogue:/etc/passwd", "catalogue:../x/y",
                    "catalogue:magenta/../../etc/passwd", "catalogue:magenta/sub/file", "catalogue:.hidden/f", "catalogue:m/.f"] {
            #expect(throws: StageError.self, "\(bad)") { _ = try ModelStore.Reference(bad) }
        }
    }

    @Test func anInstalledFileIsFoundAndAMissingOneNamesTheFetchCommand() throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: store) }
        try FileManager.default.createDirectory(at: store.appendingPathComponent("demo"), withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: store.appendingPathComponent("demo/model.onnx"))
        let environment = ["STREAMLENS_MODELS": store.path]
        let reference = try #require(try ModelStore.Reference("catalogue:demo/model.onnx"))
        #expect(try reference.installedPath(environment: environment) == store.appendingPathComponent("demo/model.onnx").path)
        let missing = try #require(try ModelStore.Reference("catalogue:other/model.onnx"))
        #expect(throws: StageError("model other is not installed (\(store.path)/other/model.onnx not found): run `streamlens models fetch other` (Models/model-catalogue.json lists where it comes from)")) {
            try missing.installedPath(environment: environment)
        }
    }

    @Test func aManifestWithABadReferenceIsRefusedWhenDecoded() throws {
        let text = """
            {"schema_version": 1, "name": "ff", "model": "catalogue:../ff.onnx",
             "input": {"width": 64, "height": 48, "color_order": "RGB", "value_range": [0, 1], "layout": "NCHW"},
             "decoder": {"name": "image", "parameters": {}}, "licence": "test"}
            """
        #expect(throws: StageError("model manifest ff.json: catalogue:../ff.onnx is not a catalogue reference: write catalogue:NAME/FILE (a model of Models/model-catalogue.json and one of its files)")) {
            try ModelManifest.decode(Data(text.utf8), origin: "ff.json")
        }
    }
}
