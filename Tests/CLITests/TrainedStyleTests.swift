import Foundation
import Testing

/// The styles shipped in Models/ (trained by `streamlens train-style`, issue 7): every manifest
/// with a training record loads in lensstylize, turns a real photo visibly towards its style
/// image's colours and keeps the photo's structure. Needs nothing outside the repository.
@Suite(.serialized) struct TrainedStyleTests {
    struct Shipped {
        let name: String, manifest: String, model: String, styleImage: String, command: String, seed: Int
    }

    static func shipped() throws -> [Shipped] {
        let models = CLI.packageRoot.appendingPathComponent("Models")
        return try FileManager.default.contentsOfDirectory(atPath: models.path).filter { $0.hasSuffix(".json") }.sorted().compactMap { file in
            let url = models.appendingPathComponent(file)
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            guard let training = json["training"] as? [String: Any] else { return nil }
            let name = json["name"] as? String ?? ""
            return Shipped(name: name, manifest: "Models/\(file)", model: "Models/\(json["model"] as? String ?? "")",
                           styleImage: "Models/styles/\(name).jpg", command: training["command"] as? String ?? "",
                           seed: training["seed"] as? Int ?? -1)
        }
    }

    @Test func threeStylesShippedEachSmallWithItsTrainingCommand() throws {
        let styles = try Self.shipped()
        #expect(styles.map(\.name) == ["embers", "mosaic", "waves"], "\(styles.map(\.name))")
        for s in styles {
            let size = (try? FileManager.default.attributesOfItem(atPath: CLI.packageRoot.appendingPathComponent(s.model).path)[.size] as? Int) ?? nil
            #expect(size != nil && size! <= 2 * 1024 * 1024, "\(s.model): \(size.map(String.init) ?? "missing")")
            #expect(s.command.hasPrefix("streamlens train-style ") && s.command.contains("--seed \(s.seed)"), "\(s.name): \(s.command)")
            #expect(FileManager.default.fileExists(atPath: CLI.packageRoot.appendingPathComponent(s.styleImage).path), "\(s.styleImage) missing")
        }
    }

    /// Mean and spread of each channel: where a picture's colours sit.
    static func colourStatistics(_ rgb: [UInt8]) -> [Double] {
        let mean = StylizeTests.meanColor(rgb)
        let spread = (0..<3).map { c in
            (stride(from: c, to: rgb.count, by: 3).reduce(0.0) { $0 + pow(Double(rgb[$1]) - mean[c], 2) } / Double(rgb.count / 3)).squareRoot()
        }
        return mean + spread
    }

    static func distance(_ a: [Double], _ b: [Double]) -> Double { zip(a, b).map { ($0 - $1) * ($0 - $1) }.reduce(0, +).squareRoot() }

    /// A coarse 4x4x4 colour histogram, as fractions of the pixels.
    static func histogram(_ rgb: [UInt8]) -> [Double] {
        var h = [Double](repeating: 0, count: 64)
        for i in stride(from: 0, to: rgb.count, by: 3) { h[Int(rgb[i] >> 6) * 16 + Int(rgb[i + 1] >> 6) * 4 + Int(rgb[i + 2] >> 6)] += 1 }
        return h.map { $0 / Double(rgb.count / 3) }
    }

    /// The share of pixels two histograms have in common (1: the same colours).
    static func overlap(_ a: [Double], _ b: [Double]) -> Double { zip(a, b).map { min($0, $1) }.reduce(0, +) }

    @Test(arguments: ["mosaic", "waves", "embers"])
    func stylizesTowardsItsStyleAndKeepsStructure(_ name: String) throws {
        let s = try #require(try Self.shipped().first { $0.name == name }, "no trained style \(name) in Models/")
        let (w, h) = (512, 512)
        // Photos: one the trainer saw (the astronaut) and one it never did (the cat, held out).
        for photo in ["astronaut.png", "chelsea.png"] {
            let source = StylizeTests.photo(photo, width: w, height: h, count: 2)
            let (input, _) = try StylizeTests.frames(source, nil, width: w, height: h)
            let (styled, r) = try StylizeTests.frames(source, "lensstylize model=\(s.manifest) precision=f32", width: w, height: h)
            #expect(r.status == 0, "\(r.stderr)")
            try #require(input.count == 2 && styled.count == 2, "\(name) on \(photo): frames in \(input.count), out \(styled.count): \(r.stderr)")
            let (style, rs) = try StylizeTests.frames("filesrc location=\(s.styleImage) ! jpegdec ! videoconvert ! video/x-raw,format=RGB,width=256,height=256",
                                                       nil, width: 256, height: 256)
            try #require(style.count == 1, "\(s.styleImage): \(rs.stderr)")
            let target = Self.colourStatistics(style[0])
            let before = Self.distance(Self.colourStatistics(input[0]), target)
            let after = Self.distance(Self.colourStatistics(styled[0]), target)
            let palette = Self.histogram(style[0])
            let overlapBefore = Self.overlap(Self.histogram(input[0]), palette), overlapAfter = Self.overlap(Self.histogram(styled[0]), palette)
            let change = StylizeTests.meanAbsoluteDifference(input[0], styled[0])
            let edges = StylizeTests.edgeCorrelation(input[0], styled[0], width: w, height: h)
            print("\(name) on \(photo): colour distance to the style \(String(format: "%.1f", before)) -> \(String(format: "%.1f", after)), histogram overlap \(String(format: "%.2f", overlapBefore)) -> \(String(format: "%.2f", overlapAfter)), mean abs change \(String(format: "%.1f", change)), edge correlation \(String(format: "%.2f", edges))")
            // Towards the style's colours: more of the style's palette (a coarse histogram's
            // overlap up by 0.1 or more), and the channels' mean and spread closer to its on the
            // photo it was trained on. On the held-out cat, not more than 20 % farther: the
            // temporal loss (issue 38) cost the mosaic some contrast there (mean and spread 40.7
            // -> 42.6 from the style's), and the content loss (issue 55), which keeps the photo's
            // own light and dark, more (-> 47.5), while the palette overlap rises 0.31 -> 0.52.
            #expect(overlapAfter >= overlapBefore + 0.1, "\(name) on \(photo): colour histogram overlap with the style image \(overlapBefore) before, \(overlapAfter) after")
            let allowed = photo == "chelsea.png" ? 1.2 * before : before
            #expect(after < allowed, "\(name) on \(photo): colour mean+spread distance to the style image \(before) before, \(after) after")
            #expect(change > 20, "\(name) on \(photo): mean absolute change \(change)")
            #expect(edges > 0.3, "\(name) on \(photo): edge correlation \(edges)")
            #expect(styled[0] == styled[1], "a still picture gives the same frame twice")
        }
    }
}
