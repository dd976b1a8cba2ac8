import Foundation
import Testing

/// The package root (tests run from it; model manifests are relative to it).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A photo as packed RGB bytes, decoded by ffmpeg (no GStreamer in these tests).
func rgbPixels(of photo: String, width: Int, height: Int) throws -> [UInt8] {
    let ffmpeg = Process()
    ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    ffmpeg.arguments = ["-v", "error", "-i", photo, "-vf", "scale=\(width):\(height)", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    let pipe = Pipe()
    ffmpeg.standardOutput = pipe
    try ffmpeg.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    ffmpeg.waitUntilExit()
    try #require(ffmpeg.terminationStatus == 0 && data.count == width * height * 3, "ffmpeg could not decode \(photo) (run make setup)")
    return [UInt8](data)
}

/// Mean absolute difference of two byte arrays.
func meanDifference(_ a: [UInt8], _ b: [UInt8]) -> Double {
    zip(a, b).reduce(0) { $0 + Double(abs(Int($1.0) - Int($1.1))) } / Double(max(1, min(a.count, b.count)))
}
