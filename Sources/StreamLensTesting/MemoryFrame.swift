import StreamLensCore

/// A frame held in memory: pixels and regions of interest, no GStreamer. What a stage sees
/// through `FramePixels` is what the bridge gives it (read and write views of the bytes, the
/// regions on the frame). A stage that hands frames on to GStreamer (lensrtsp, lensrecord)
/// gets a GstSample made from a copy of the bytes and the format's caps.
public final class MemoryPixels: FramePixels {
    public var bytes: [UInt8]
    public var regions: [RegionOfInterest]

    public init(bytes: [UInt8], regions: [RegionOfInterest] = []) {
        self.bytes = bytes
        self.regions = regions
    }

    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    public func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeMutableBytes(body)
    }

    public func addRegionOfInterest(_ region: RegionOfInterest) { regions.append(region) }

    public func updateRegionOfInterest(_ region: RegionOfInterest, at index: Int) -> Bool {
        guard regions.indices.contains(index) else { return false }
        regions[index] = region
        return true
    }

    public func regionsOfInterest() -> [RegionOfInterest] { regions }

    /// Frame records by kind (events, zones), as JSON text.
    public var records: [String: String] = [:]
    public func frameRecord(_ kind: String) -> String? { records[kind] }
    public func setFrameRecord(_ kind: String, json: String) { records[kind] = json }
}

extension VideoFormat {
    /// A packed format (RGB, BGR: 3 bytes a pixel; RGBx, BGRx, RGBA, BGRA…: 4) with rows of
    /// `width` pixels and no padding, as a test builds frames.
    public static func packed(_ pixelFormat: String, width: Int, height: Int, framerate: (Int, Int) = (30, 1)) -> VideoFormat {
        let bytesPerPixel = pixelFormat.count == 3 ? 3 : 4
        return VideoFormat(pixelFormat: pixelFormat, width: width, height: height, framerate: framerate,
                           strides: [width * bytesPerPixel], offsets: [0], size: width * height * bytesPerPixel)
    }
}
