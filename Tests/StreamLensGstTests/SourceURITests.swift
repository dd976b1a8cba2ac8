import Foundation
import StreamLensCore
import StreamLensGst
import Testing

/// A source's URI goes into `serve`'s template as one token, as given, or is refused: a URI is
/// the API's caller's text, and the pipeline built must be the template's.
@Suite struct SourceURITests {
    static let template = PipelineSpec(text: "uridecodebin name=dec uri=${URI} ! fakesink name=out-${NAME}")

    /// What breaks gst-launch's token (a trailing backslash escaped the template's ` !`; quotes,
    /// white space, control characters) is refused with a message, and nothing is built.
    @Test func whatWouldChangeThePipelineIsRefused() {
        let set = SourceSet(options: Pipeline.Options()) { name, uri in try Self.template.expanded(variables: ["NAME": name, "URI": uri]) }
        for hostile in ["file:///tmp/x\\", #"file:///tmp/x\" ! fakesink name="y"#, "file:///a b", "file:///a\tb", "file:///a\u{1B}[2Jb",
                        "file:///x\n! fakesink", "file:///\"quoted\"", "file:///a'b", "file:///a!b", "file:///a\u{7F}b"] {
            let refusal = set.add(name: "h", uri: hostile)
            #expect(refusal?.kind == .invalid, "\(hostile.debugDescription): \(String(describing: refusal))")
            #expect(refusal.map { !$0.message.contains("\n") } == true, "a refusal is one line: \(String(describing: refusal?.message))")
        }
        #expect(set.count == 0)
    }

    /// Every other printable character stays inside the value: GStreamer's own parser, given the
    /// expanded template, sets exactly this URI, and builds the template's two elements.
    @Test func everyOtherCharacterStaysInTheURI() throws {
        try GStreamer.initialize(stages: [])
        let odd = "file:///a,b;c(d)[e]{f}$g&h*i+j~k@l#m?n=o%20p|q^r<s>t`u:v=w.x/é"
        #expect(SourceSet.uriProblem(odd) == nil)
        let pipeline = try Pipeline(description: try Self.template.expanded(variables: ["NAME": "cam", "URI": odd]))
        let commands = PipelineCommands(pipeline: pipeline, access: ControlAccess(otherElements: true))
        #expect(commands.execute("get dec uri") == odd)
        #expect(commands.execute("get out-cam name") == "out-cam")
    }
}
