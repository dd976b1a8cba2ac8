// swift-tools-version: 6.0
// StreamLens's libFuzzer harnesses: one executable per fuzz target, each linking libFuzzer's
// own main (`swift build --sanitize=fuzzer`). Driven by tools/fuzz.sh (`make fuzz`).
//
// A package of its own because the harnesses need `-parse-as-library` (an unsafe flag): in the
// root Package.swift an unsafe flag would make StreamLens unusable as a dependency, whereas this
// package is only ever built as a root package. It depends on the root package by path and
// builds only StreamLensCore and StreamLensDraw (cairo) from it (no GStreamer, no OpenVINO).
import PackageDescription

/// The fuzz targets: `fuzz-<name>` in Sources/fuzz-<name>, corpus in corpus/<name>.
let targets = ["pipeline-spec", "property-value", "model-manifest", "manifest-fields", "control-command", "http-response",
               "inference-response", "remote-tensors"]

let package = Package(
    name: "StreamLensFuzz",
    dependencies: [.package(name: "StreamLens", path: "..")],
    targets: [
        // What each target does with one input; the unit tests compile the same file through a
        // symlink to replay the corpus (Tests/StreamLensCoreTests/FuzzEntryPoints.swift).
        .target(name: "FuzzEntryPoints", dependencies: [.product(name: "StreamLensCore", package: "StreamLens"),
                                                         .product(name: "StreamLensDraw", package: "StreamLens")]),
    ] + targets.map { name in
        // libFuzzer supplies main(); without -parse-as-library a lone source file would be
        // compiled as a script with a main of its own.
        .executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzEntryPoints"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    }
)
