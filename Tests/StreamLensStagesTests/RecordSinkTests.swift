import Foundation
import StreamLensCore
import StreamLensStages
import StreamLensTesting
import Testing

/// lensmetadata's record sinks as the stage sees them: one property table, the sink chosen by
/// the location's scheme, `publish` for every sink.
@Suite(.serialized) struct RecordSinkTests {
    static let (w, h) = (32, 24)
    static let frame = [UInt8](repeating: 1, count: 32 * 24 * 3)

    /// The sinks' own properties join the stage's table once each (GObject refuses a repeated name).
    @Test func thePropertyTableHoldsEverySinksPropertiesOnce() {
        let names = MetadataStage.descriptor.properties.map(\.name)
        #expect(Set(names).count == names.count, "\(names)")
        #expect(names == ["location", "publish", "max-queued", "qos", "credentials", "ca-file", "timeout-ms", "retries", "spool", "spool-max-mb", "source", "compression", "sasl-mechanism", "mode", "thread"], "\(names)")
    }

    /// file://PATH is the same file sink as PATH; publish=events keeps only the frames with events.
    @Test func aFileURLWritesOnlyTheFramesWithEvents() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("streamlens-sink-\(getpid()).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let driver = try StageDriver(MetadataStage.self, settings: ["location": .string("file://" + path), "publish": .string("events")])
        try driver.start(.packed("RGB", width: Self.w, height: Self.h))
        let carrier = MemoryPixels(bytes: [])
        carrier.addEvents([FrameEvent(type: "crossed", zone: "door", objectId: 7, label: "car", direction: "in", time: 0)])
        _ = driver.push(Self.frame)
        _ = driver.push(Self.frame, records: carrier.records)
        _ = driver.push(Self.frame)
        _ = driver.finish()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(#""frame":1"#) && lines[0].contains(#""type":"crossed""#), "\(lines)")
    }

    /// A bus location that cannot work is refused at start, naming the property and what is wrong.
    @Test(arguments: [
        ("kafka://127.0.0.1:9092", "property location=kafka://127.0.0.1:9092: no topic after the host (…://HOST:PORT/TOPIC)"),
        ("kafka://127.0.0.1:9092,:9093/t", "property location=kafka://127.0.0.1:9092,:9093/t: no host (…://HOST:PORT/TOPIC)"),
        ("nats://127.0.0.1:99999/s", "property location=nats://127.0.0.1:99999/s: bad port 99999 (1…65535)"),
        ("nats://a:1,b:2/s", "property location=nats://a:1,b:2/s: one NATS server (HOST:PORT)"),
        ("nats://camera:pw@127.0.0.1/s", "property location=nats://camera:pw@127.0.0.1/s: no user or password in the URL: use credentials=FILE"),
        ("nats://127.0.0.1/cams.>", "property location=nats://127.0.0.1/cams.>: cams.> is not a subject to publish to (no wildcards * or >, no empty tokens)"),
        ("kafka://127.0.0.1/a/b", "property location=kafka://127.0.0.1/a/b: the topic a/b has a space or a /"),
    ])
    func aBadBusLocationIsRefusedAtStart(_ location: String, _ message: String) {
        #expect(throws: StageError(message)) {
            _ = try StageDriver(MetadataStage.self, settings: ["location": .string(location)])
        }
    }

    @Test func anUnknownSchemeIsRefusedWithTheKnownOnes() {
        #expect(throws: StageError("property location=amqp://127.0.0.1/t: unknown scheme amqp (file://, mqtt://, mqtts://, http://, https://, kafka://, nats://, or a file path)")) {
            _ = try StageDriver(MetadataStage.self, settings: ["location": .string("amqp://127.0.0.1/t")])
        }
    }
}
