import Foundation

/// A throwaway CA, a server certificate it signed for 127.0.0.1 (subjectAltName IP:127.0.0.1)
/// with its key, and a second CA that signed nothing, made with openssl in a folder of the
/// test's: the TLS tests' brokers (mosquitto, nats-server) serve with them.
struct TestCertificates {
    var ca: String, certificate: String, key: String, otherCA: String

    init(in directory: URL) throws {
        func openssl(_ args: [String]) throws {
            let r = try CLI.spawn(URL(fileURLWithPath: "/usr/bin/openssl"), args, in: directory, timeout: 30)
            guard r.status == 0 else { throw BrokerError("openssl \(args.joined(separator: " ")) failed: \(r.stderr)") }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for (name, subject) in [("ca", "/CN=StreamLens test CA"), ("other-ca", "/CN=StreamLens unrelated CA")] {
            try openssl(["req", "-x509"] + ec + ["-keyout", "\(name).key", "-out", "\(name).pem", "-days", "2", "-subj", subject])
        }
        try openssl(["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"])
        try "subjectAltName=IP:127.0.0.1\n".write(to: directory.appendingPathComponent("server.ext"), atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-out", "server.pem", "-days", "2", "-extfile", "server.ext"])
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        (ca, certificate, key, otherCA) = (path("ca.pem"), path("server.pem"), path("server.key"), path("other-ca.pem"))
    }
}
