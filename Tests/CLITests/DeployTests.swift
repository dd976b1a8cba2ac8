import Foundation
import Testing

/// deploy/: the Kubernetes objects validated offline against Kubernetes' own schemas
/// (kubernetes-validate, set-up's .deps/k8s-venv), each workload with the probes, limits and
/// non-root user a cluster expects; the configs they carry (the ConfigMap's, compose's) taken by
/// `streamlens config check`.
@Suite struct DeployTests {
    static let root = CLI.packageRoot
    static let venv = root.appendingPathComponent(".deps/k8s-venv/bin")

    /// The objects of one variant: deploy/kubernetes (one serve) or deploy/kubernetes/cluster
    /// (a StatefulSet sharing the cameras in etcd).
    static func manifests(_ folder: String) -> [String] {
        let dir = root.appendingPathComponent(folder)
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
            .map { dir.appendingPathComponent($0).path }
    }
    static let variants = ["deploy/kubernetes", "deploy/kubernetes/cluster"]

    @Test(arguments: variants) func theKubernetesObjectsValidateAgainstTheSchemas(_ folder: String) throws {
        let manifests = Self.manifests(folder)
        try #require(manifests.count >= 3, "\(folder) holds \(manifests)")
        let r = try CLI.spawn(Self.venv.appendingPathComponent("kubernetes-validate"), ["--strict"] + manifests, timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        let objects = try manifests.map { try String(contentsOfFile: $0, encoding: .utf8).components(separatedBy: "\nkind: ").count - 1 }.reduce(0, +)
        #expect(r.stdout.components(separatedBy: " passed for resource ").count - 1 == objects, "\(r.stdout)")
    }

    /// Every Deployment and StatefulSet: liveness /healthz, readiness /readyz, limits, requests,
    /// runAsNonRoot, a read-only root; a ConfigMap, a Service; nothing but Kubernetes objects.
    @Test(arguments: variants) func everyWorkloadHasProbesLimitsAndANonRootUser(_ folder: String) throws {
        let script = """
            import sys, yaml
            docs = [d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]
            assert all("apiVersion" in d and "kind" in d for d in docs), "not a Kubernetes object"
            kinds = sorted({d["kind"] for d in docs})
            work = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
            assert work, "no workload"
            for d in work:
                spec = d["spec"]["template"]["spec"]
                for c in spec["containers"]:
                    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", c["name"]
                    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", c["name"]
                    assert {"cpu", "memory"} <= set(c["resources"]["limits"]) and {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
                    sc = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
                    assert sc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True, c["name"]
            assert "ConfigMap" in kinds and "Service" in kinds, kinds
            print(" ".join(kinds))
            """
        let r = try CLI.spawn(Self.venv.appendingPathComponent("python"), ["-c", script] + Self.manifests(folder), timeout: 60)
        #expect(r.status == 0 && r.stdout.contains(folder.hasSuffix("cluster") ? "ConfigMap Service StatefulSet" : "ConfigMap Deployment"), "\(r.stdout)\(r.stderr)")
    }

    /// The ConfigMap's config and compose's, checked as serve would check them (the token and
    /// state paths pointed at a scratch folder: they are the pod's).
    @Test(arguments: ["kubernetes", "kubernetes/cluster", "compose"]) func theShippedConfigsAreValid(_ which: String) throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var text: String
        if which.hasPrefix("kubernetes") {
            let script = "import sys, yaml; print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d['kind'] == 'ConfigMap')['data']['streamlens.yaml'])"
            let r = try CLI.spawn(Self.venv.appendingPathComponent("python"), ["-c", script, Self.root.appendingPathComponent("deploy/\(which)/configmap.yaml").path], timeout: 60)
            try #require(r.status == 0, "\(r.stderr)")
            text = r.stdout
        } else {
            text = try String(contentsOf: Self.root.appendingPathComponent("deploy/config/streamlens.yaml"), encoding: .utf8)
        }
        let token = dir.appendingPathComponent("token").path
        try "t0ken\n".write(toFile: token, atomically: true, encoding: .utf8)
        for line in text.split(separator: "\n") where line.contains("token-file:") {
            text = text.replacingOccurrences(of: String(line), with: "  token-file: \(token)")
        }
        text = text.replacingOccurrences(of: "/var/lib/streamlens/", with: dir.path + "/")
        let file = dir.appendingPathComponent("streamlens.yaml").path
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try CLI.run(["config", "check", file], timeout: 60)
        #expect(check.status == 0 && check.stdout.contains("valid:"), "\(check.stdout)\(check.stderr)")
    }
}
