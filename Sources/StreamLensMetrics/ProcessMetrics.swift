import Foundation
import StreamLensCore
#if canImport(Glibc)
import Glibc
#endif

/// The process's own figures, read from the kernel at each scrape (Linux: /proc/self): resident
/// memory, CPU time, threads, open file descriptors, start time. Prometheus' client libraries
/// call these `process_*`; here they carry the `streamlens_` prefix like every StreamLens metric.
public enum ProcessMetrics {
    private static let startTime = Date().timeIntervalSince1970

    public static func collect() -> [Metric] {
        var m: [Metric] = []
        if let rss = residentBytes() {
            m.append(.gauge("streamlens_process_resident_memory_bytes", "Resident memory of the process", Double(rss)))
        }
        var usage = rusage()
        if getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 {
            let seconds = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
            m.append(Metric("streamlens_process_cpu_seconds_total", "CPU time of the process, user and system", .counter(seconds)))
        }
        if let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count {
            m.append(.gauge("streamlens_process_threads", "Threads of the process", Double(threads)))
        }
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count {
            m.append(.gauge("streamlens_process_open_fds", "Open file descriptors of the process", Double(fds)))
        }
        m.append(.gauge("streamlens_process_start_time_seconds", "When the process started, seconds since the Unix epoch", startTime))
        return m
    }

    /// /proc/self/statm's second field (resident pages) times the page size.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
