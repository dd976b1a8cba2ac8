import Testing
@testable import StreamLensCore

/// lensmetadata's broker URLs: what parses, and that every refusal names the property.
@Suite struct MQTTLocationTests {
    @Test func parsesHostPortTopic() throws {
        let l = try MQTTLocation(parsing: "mqtt://127.0.0.1:18830/streamlens/test")
        #expect(l == MQTTLocation(host: "127.0.0.1", port: 18830, topic: "streamlens/test", tls: false))
        #expect(l.description == "mqtt://127.0.0.1:18830/streamlens/test")
    }

    @Test func defaultPortsAndTLS() throws {
        #expect(try MQTTLocation(parsing: "mqtt://broker.local/a").port == 1883)
        let s = try MQTTLocation(parsing: "mqtts://broker.local/a/b")
        #expect(s.port == 8883 && s.tls && s.topic == "a/b")
    }

    @Test func bracketedIPv6() throws {
        let l = try MQTTLocation(parsing: "mqtt://[::1]:1884/t")
        #expect(l.host == "::1" && l.port == 1884)
        #expect(l.description == "mqtt://[::1]:1884/t")
    }

    @Test(arguments: [
        ("mqtt://127.0.0.1:1883", "no topic"),
        ("mqtt://127.0.0.1:1883/", "no topic"),
        ("mqtt://127.0.0.1:0/t", "bad port 0"),
        ("mqtt://127.0.0.1:99999/t", "bad port 99999"),
        ("mqtt://127.0.0.1:http/t", "bad port http"),
        ("amqp://127.0.0.1/t", "unknown scheme amqp"),
        ("mqtt://:1883/t", "no host"),
        ("mqtt://127.0.0.1/a/#", "wildcard"),
        ("mqtt://me:secret@127.0.0.1/t", "credentials="),
    ])
    func refusals(url: String, why: String) {
        do {
            _ = try MQTTLocation(parsing: url)
            Issue.record("\(url) parsed")
        } catch let error as StageError {
            #expect(error.message.hasPrefix("property location=\(url): "))
            #expect(error.message.contains(why), "\(error.message)")
        } catch {
            Issue.record("\(error)")
        }
    }
}
