import Foundation
import StreamLensCluster
import StreamLensConfig
import StreamLensCore
import StreamLensGst
import StreamLensHTTP
import Synchronization

/// `streamlens serve --config FILE` with `cluster:`: one instance of a cluster sharing one camera
/// list in etcd (docs/scaling.md). The config's sources are put in etcd (each unless it is there
/// already or was removed through the API); which run here is the cluster's to decide
/// (`ClusterMember`); no state file is kept (etcd is the state). Each camera's pipeline also
/// gets ${INSTANCE} (this instance) and ${CLAIM} (its claim's revision, unique and rising over
/// the cluster's life) for outputs that must not be doubled.
func serveClustered(_ plan: ServePlan, _ cluster: ServeConfig.Cluster, options: Pipeline.Options, http: HTTPOptions,
                    log: @escaping @Sendable (String) -> Void) -> Int32 {
    let member = MemberReference()
    let instance = cluster.instance
    let expand = plan.expand { name in
        ["INSTANCE": instance, "CLAIM": member.value.withLock { $0?.claimRevision(of: name) }.map(String.init) ?? "0"]
    }
    let set = SourceSet(options: options, expand: expand)
    let etcd = EtcdClient(endpoints: cluster.etcd, timeout: Double(cluster.leaseTTL) / 3)
    // What the others are told this instance's API is: `advertise:`, else STREAMLENS_ADVERTISE
    // (a Kubernetes pod's own address, from the downward API), else the listener's address (a
    // wildcard one by the host name).
    let environment = ProcessInfo.processInfo.environment["STREAMLENS_ADVERTISE"].flatMap { $0.isEmpty ? nil : $0 }
    if let environment, !environment.hasPrefix("http://") {
        fail("STREAMLENS_ADVERTISE \(environment): the URL the other instances reach this one's API at, http://HOST:PORT", code: 2)
    }
    let advertised = cluster.advertise ?? environment ?? http.address.map { a in
        HTTPAddress(host: ["0.0.0.0", "::", ""].contains(a.host) ? ProcessInfo.processInfo.hostName : a.host, port: a.port).url
    }
    let settings = ClusterMember.Settings(instance: instance, prefix: cluster.prefix, leaseTTL: cluster.leaseTTL, limit: cluster.limit, http: advertised)
    let running = ClusterMember(settings: settings, etcd: etcd, set: set, log: log)
    member.value.withLock { $0 = running }
    let catalog = ClusterCatalog(member: running, set: set) { name, uri in _ = try Pipeline(description: try expand(name, uri)) }
    let api = http.address.map { _ in startAPI(http, catalog: catalog, quiet: options.quiet) }
    defer { api?.stop() }
    if !options.quiet {
        log("cluster: \(instance) of \(cluster.etcd.joined(separator: ",")) (prefix \(cluster.prefix), lease \(cluster.leaseTTL) s\(cluster.limit.map { ", at most \($0) cameras" } ?? ""))")
    }
    running.start(initial: plan.config.sources.map { s in
        var stages: [String: [String: String]] = [:]
        for v in s.stages { stages[v.element, default: [:]][v.property] = v.value }
        return (s.name, ClusterView.Source(uri: s.uri, stages: stages.isEmpty ? nil : stages))
    })
    let code = set.serve(initial: [], control: options.control, access: options.controlAccess, echo: !options.quiet, keepRunning: true, catalog: catalog)
    running.leave()
    return code
}

/// The member, for the template's ${CLAIM} (the source set that needs it is made first).
private final class MemberReference: Sendable {
    let value = Mutex<ClusterMember?>(nil)
}
