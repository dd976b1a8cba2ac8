import Foundation
import StreamLensCore
import Testing

/// MP4Fragments on a fragmented MP4 built box by box (video on track 2, audio on track 1, as
/// mp4mux may number them), cut at every length as a full disk cuts a file; the real thing, cut
/// by a file size limit and decoded by ffmpeg, is in CLITests/EventClipTests.
@Suite struct MP4FragmentsTests {
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let size = UInt32(8 + payload.count)
        return [UInt8(size >> 24), UInt8(size >> 16 & 255), UInt8(size >> 8 & 255), UInt8(size & 255)] + Array(type.utf8) + payload
    }
    static func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255)] }

    static func track(id: UInt32, handler: String) -> [UInt8] {
        box("trak", box("tkhd", u32(7) + u32(0) + u32(0) + u32(id) + [UInt8](repeating: 0, count: 68))
            + box("mdia", box("mdhd", [UInt8](repeating: 0, count: 24)) + box("hdlr", u32(0) + u32(0) + Array(handler.utf8) + [UInt8](repeating: 0, count: 13))))
    }
    static func fragment(video: UInt32, audio: UInt32, mdat: Int) -> [UInt8] {
        func traf(_ id: UInt32, _ count: UInt32) -> [UInt8] {
            box("traf", box("tfhd", u32(0) + u32(id)) + box("tfdt", u32(0) + u32(0)) + box("trun", u32(0x701) + u32(count) + [UInt8](repeating: 0, count: Int(count) * 12)))
        }
        return box("moof", box("mfhd", u32(0) + u32(1)) + traf(2, video) + traf(1, audio)) + box("mdat", [UInt8](repeating: 0xAB, count: mdat))
    }

    @Test func everyCutKeepsWholeFragmentsOnly() {
        let head = Self.box("ftyp", Array("isomiso2".utf8)) + Self.box("moov", Self.box("mvhd", [UInt8](repeating: 0, count: 100))
            + Self.track(id: 1, handler: "soun") + Self.track(id: 2, handler: "vide"))
        let first = Self.fragment(video: 15, audio: 22, mdat: 300), second = Self.fragment(video: 14, audio: 21, mdat: 250)
        let file = head + first + second + Self.box("mfra", [UInt8](repeating: 0, count: 16))
        let boundaries = [(head.count, 0, 0), (head.count + first.count, 1, 15), (head.count + first.count + second.count, 2, 29), (file.count, 2, 29)]
        for length in 0...file.count {
            let whole = MP4Fragments.whole(size: length) { offset, count in offset + count <= length ? Array(file[offset..<(offset + count)]) : nil }
            let expected = boundaries.last { $0.0 <= length } ?? (0, 0, 0)
            if length < head.count {
                #expect(whole.fragments == 0 && whole.videoFrames == 0, "cut at \(length)")
                continue
            }
            #expect(whole.hasMovie && whole.length == expected.0 && whole.fragments == expected.1 && whole.videoFrames == expected.2,
                    "cut at \(length): \(whole), expected \(expected)")
        }
    }

    /// Sizes that lie (past the end, under a header, a 64-bit size beyond Int) end the walk there.
    @Test func lyingSizesEndTheWalk() {
        let ftyp = Self.box("ftyp", Array("isom".utf8))
        for bad in [Self.u32(4) + Array("moov".utf8), Self.u32(1) + Array("moov".utf8) + [255, 255, 255, 255, 255, 255, 255, 255], Self.u32(1_000_000) + Array("moof".utf8)] {
            let file = ftyp + bad
            let whole = MP4Fragments.whole(size: file.count) { offset, count in offset + count <= file.count ? Array(file[offset..<(offset + count)]) : nil }
            #expect(whole.length == ftyp.count && !whole.hasMovie && whole.fragments == 0, "\(bad): \(whole)")
        }
    }
}
