import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How much of a fragmented MP4 (`mp4mux fragment-duration=…`: ftyp, moov, then a moof and its
/// mdat per fragment) is whole: read from the top-level box headers only, never the media. A
/// write cut off by a full disk leaves a box whose size runs past the end, or a moof without
/// its mdat; the file up to the last whole fragment plays and decodes without an error.
public enum MP4Fragments {
    public struct Whole: Equatable, Sendable {
        /// Bytes from the start that hold whole boxes ending with a whole fragment (or whatever
        /// whole boxes follow it: mfra, free).
        public var length: Int
        /// Whole moof+mdat pairs in them.
        public var fragments: Int
        /// Whether a moov (the tracks' description) is among them: without it nothing plays.
        public var hasMovie: Bool
        /// Samples of the video track (its handler 'vide') in the whole fragments: its frames.
        public var videoFrames: Int
    }

    /// The whole part of the file at `path`; nil when it cannot be read.
    public static func whole(path: String) -> Whole? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return whole(size: Int(info.st_size)) { offset, count in
            var bytes = [UInt8](repeating: 0, count: count)
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
            return n == count ? bytes : nil
        }
    }

    /// The same, over any bytes: `read(offset, count)` gives exactly `count` bytes or nil.
    public static func whole(size: Int, read: (Int, Int) -> [UInt8]?) -> Whole {
        var result = Whole(length: 0, fragments: 0, hasMovie: false, videoFrames: 0)
        var videoTrack: UInt32?
        var pending = 0 // the open moof's video samples, counted once its mdat is whole
        var openFragment = false // a moof whose mdat has not come yet
        for box in boxes(from: 0, to: size, read: read) {
            guard let box else { break } // cut off here
            switch box.type {
            case "moov":
                result.hasMovie = true
                // Small (a few hundred bytes): read whole for the video track's id.
                if box.size <= 1 << 20, let bytes = read(box.offset, box.size) { videoTrack = Self.videoTrack(in: bytes) }
            case "moof":
                openFragment = true
                pending = box.size <= 1 << 20 ? (read(box.offset, box.size).map { Self.samples(of: videoTrack, in: $0) } ?? 0) : 0
                continue // whole only with its mdat
            case "mdat" where openFragment:
                openFragment = false
                result.fragments += 1
                result.videoFrames += pending
            default:
                guard !openFragment else { continue }
            }
            result.length = box.offset + box.size
        }
        return result
    }

    struct Box { var offset: Int; var size: Int; var type: String; var header: Int }

    /// The boxes from `start` to `end`, in order; a nil element where a box is cut off or
    /// malformed (and nothing after it).
    static func boxes(from start: Int, to end: Int, read: (Int, Int) -> [UInt8]?) -> [Box?] {
        var found: [Box?] = []
        var offset = start
        while offset + 8 <= end {
            guard let head = read(offset, 8) else { found.append(nil); break }
            var size = Int(Self.uint32(head, 0)), header = 8
            if size == 1 {
                guard offset + 16 <= end, let large = read(offset + 8, 8) else { found.append(nil); break }
                let value = (UInt64(Self.uint32(large, 0)) << 32) | UInt64(Self.uint32(large, 4))
                guard value <= UInt64(Int.max) else { found.append(nil); break }
                size = Int(value)
                header = 16
            } else if size == 0 {
                size = end - offset // to the end: mp4mux never writes one cut short
            }
            guard size >= header, offset + size <= end else { found.append(nil); break }
            found.append(Box(offset: offset, size: size, type: String(decoding: head[4..<8], as: UTF8.self), header: header))
            offset += size
        }
        return found
    }

    static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        guard at + 4 <= bytes.count else { return 0 }
        return bytes[at..<(at + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// The boxes inside `box`, a box of `bytes` (offsets are positions in `bytes`).
    static func children(of bytes: [UInt8], _ box: Box) -> [Box] {
        boxes(from: box.offset + box.header, to: box.offset + box.size) { offset, count in
            offset >= 0 && offset + count <= bytes.count ? Array(bytes[offset..<(offset + count)]) : nil
        }.compactMap { $0 }
    }

    /// The id of the track whose handler is 'vide', in a moov's bytes.
    static func videoTrack(in moov: [UInt8]) -> UInt32? {
        let root = Box(offset: 0, size: moov.count, type: "moov", header: 8)
        for trak in children(of: moov, root) where trak.type == "trak" {
            var id: UInt32?, video = false
            for child in children(of: moov, trak) {
                if child.type == "tkhd" {
                    // version 1: 64-bit creation and modification times before the id.
                    id = uint32(moov, child.offset + child.header + (moov[child.offset + child.header] == 1 ? 20 : 12))
                } else if child.type == "mdia" {
                    video = children(of: moov, child).contains { $0.type == "hdlr" && uint32(moov, $0.offset + $0.header + 8) == 0x7669_6465 } // "vide"
                }
            }
            if video, let id { return id }
        }
        return nil
    }

    /// Samples of track `track` in a moof's bytes (every track's when it is not known).
    static func samples(of track: UInt32?, in moof: [UInt8]) -> Int {
        let root = Box(offset: 0, size: moof.count, type: "moof", header: 8)
        var count = 0
        for traf in children(of: moof, root) where traf.type == "traf" {
            let parts = children(of: moof, traf)
            let id = parts.first { $0.type == "tfhd" }.map { uint32(moof, $0.offset + $0.header + 4) }
            guard track == nil || id == track else { continue }
            for trun in parts where trun.type == "trun" { count += Int(uint32(moof, trun.offset + trun.header + 4)) }
        }
        return count
    }
}
