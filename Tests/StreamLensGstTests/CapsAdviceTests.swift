import CGStreamer
import Foundation
@testable import StreamLensGst
import Testing

/// The advice on a link whose caps do not meet (CapsAdvice), on real caps; and for every advice
/// that names elements, the proof: GStreamer itself cannot link the two caps filters directly,
/// and runs the pipeline to its end once the advised elements stand between them.
@Suite(.serialized) struct CapsAdviceTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let source: String
        let offer: String
        let wants: String
        let advice: CapsAdvice
        var testDescription: String { "\(offer) → \(wants)" }
    }

    static let video = "videotestsrc num-buffers=3"
    static let audio = "audiotestsrc num-buffers=3"

    static let cases: [Case] = [
        Case(source: video, offer: "video/x-raw,format=I420,width=320,height=240", wants: "video/x-raw,format=BGRx,width=320,height=240",
             advice: .convert(["videoconvert"])),
        Case(source: video, offer: "video/x-raw,format=I420,width=320,height=240", wants: "video/x-raw,format=I420,width=640,height=480",
             advice: .convert(["videoscale"])),
        Case(source: video, offer: "video/x-raw,format=I420,framerate=30/1", wants: "video/x-raw,format=I420,framerate=10/1",
             advice: .convert(["videorate"])),
        Case(source: video, offer: "video/x-raw,format=I420,width=320,height=240", wants: "video/x-raw,format=RGB,width=64,height=64",
             advice: .convert(["videoconvert", "videoscale"])),
        Case(source: video, offer: "video/x-raw,format=I420,width=320,height=240,framerate=30/1",
             wants: "video/x-raw,format=RGB,width=64,height=64,framerate=15/1", advice: .convert(["videoconvert", "videoscale", "videorate"])),
        Case(source: audio, offer: "audio/x-raw,format=S16LE,rate=44100,channels=1", wants: "audio/x-raw,format=F32LE,rate=44100,channels=2",
             advice: .convert(["audioconvert"])),
        Case(source: audio, offer: "audio/x-raw,format=S16LE,rate=44100,channels=1", wants: "audio/x-raw,format=F32LE,rate=16000,channels=1",
             advice: .convert(["audioconvert", "audioresample"])),
        // H.264 is preferred when the far side takes it, wherever it stands in the caps.
        Case(source: video, offer: "video/x-raw,format=I420", wants: "video/x-vp8; video/x-h264", advice: .encode("x264enc")),
        Case(source: video, offer: "video/x-raw,format=I420", wants: "video/x-vp8", advice: .encode("vp8enc")),
        Case(source: video, offer: "video/x-raw,format=I420", wants: "video/x-h264,stream-format=byte-stream", advice: .encode("x264enc")),
        Case(source: video, offer: "video/x-h264", wants: "video/x-raw", advice: .decode),
        Case(source: video, offer: "video/x-raw", wants: "audio/x-raw", advice: .otherMedia),
        Case(source: audio, offer: "audio/mpeg", wants: "video/x-raw", advice: .otherMedia),
        Case(source: video, offer: "video/x-raw,format=I420", wants: "video/x-raw", advice: .none),
        Case(source: video, offer: "application/x-rtp", wants: "video/x-raw", advice: .unknown),
    ]

    static func caps(_ text: String) -> UnsafeMutablePointer<GstCaps> { gst_caps_from_string(text)! }

    @Test(arguments: cases) func theAdviceIsTheFewestElementsThatFit(_ c: Case) throws {
        _ = try makePipeline("fakesrc num-buffers=0 ! fakesink") // GStreamer initialized
        let offer = Self.caps(c.offer), wants = Self.caps(c.wants)
        defer { gst_caps_unref(offer); gst_caps_unref(wants) }
        #expect(CapsAdvice.advise(offer: offer, wants: wants) == c.advice)
    }

    @Test(arguments: cases) func theAdvisedElementsMakeThePipelineRun(_ c: Case) throws {
        let elements: [String]
        switch c.advice {
        case .convert(let names): elements = names
        case .encode(let encoder): elements = [encoder]
        default: return
        }
        let filters = (offer: "capsfilter caps=\"\(c.offer)\"", wants: "capsfilter caps=\"\(c.wants)\"")
        let direct = "\(c.source) ! \(filters.offer) ! \(filters.wants) ! fakesink"
        do {
            _ = try makePipeline(direct)
            Issue.record("GStreamer links \(direct) without help")
        } catch let e as HostError {
            #expect(e.message.hasPrefix("cannot link capsfilter"), "\(e.message)")
        }
        let fixed = "\(c.source) ! \(filters.offer) ! \(elements.joined(separator: " ! ")) ! \(filters.wants) ! fakesink"
        #expect(try makePipeline(fixed).run(quietOptions()) == .finished(interrupted: false), "\(fixed)")
    }

    /// The messages that carry the advice, as a user sees them (docs/bad-inputs.md rows 20-29
    /// run them through the binary).
    @Test func theAdviceBecomesASentenceNamingTheElements() throws {
        func specError(_ text: String) -> String? {
            do { _ = try makePipeline(text); return nil } catch let e as HostError { return e.message } catch { return "\(error)" }
        }
        let video = specError("videotestsrc name=camera ! video/x-raw,width=320,height=240,framerate=30/1 ! capsfilter name=small caps=video/x-raw,format=RGB,width=64,height=64,framerate=5/1 ! fakesink")
        #expect(video?.hasSuffix("camera gives video/x-raw (any of 111 formats) 320x240 30 fps, small takes video/x-raw RGB 64x64 5 fps; put videoscale ! videorate between camera and small") == true, "\(video ?? "no error")")
        let audio = specError("audiotestsrc name=tone ! audio/x-raw,rate=44100 ! capsfilter name=phone caps=audio/x-raw,rate=8000 ! fakesink")
        #expect(audio?.hasSuffix("put an audioresample between tone and phone") == true, "\(audio ?? "no error")")
        let muxer = specError("audiotestsrc ! audio/x-raw ! mp4mux ! fakesink")
        #expect(muxer?.contains("put an encoder (e.g. ") == true, "\(muxer ?? "no error")")
    }
}
