import Foundation
@testable import StreamLensCore

// What the detector families' tests on hand-made tensors share (DetectorFamilyTests,
// YOLOv8SegDecoderTests).

/// A model input of that size (RGB, 0…1, NCHW).
func input(_ width: Int, _ height: Int) -> ModelManifest.Input {
    ModelManifest.Input(width: width, height: height, colorOrder: .rgb, valueRange: [0, 1], layout: .nchw)
}

/// Whether two boxes agree to `tolerance` on every corner.
func near(_ a: Box, _ b: Box, _ tolerance: Double = 1e-6) -> Bool {
    abs(a.xMin - b.xMin) <= tolerance && abs(a.yMin - b.yMin) <= tolerance && abs(a.xMax - b.xMax) <= tolerance && abs(a.yMax - b.yMax) <= tolerance
}

/// Decodes `tensors` (in bind's order) with a bound decoder.
func decode(_ decoder: any DetectionDecoder, _ tensors: [[Float]]) -> [Detection] {
    func go(_ i: Int, _ buffers: [UnsafeBufferPointer<Float>]) -> [Detection] {
        i == tensors.count ? decoder.decode(buffers) : tensors[i].withUnsafeBufferPointer { go(i + 1, buffers + [$0]) }
    }
    return go(0, [])
}
