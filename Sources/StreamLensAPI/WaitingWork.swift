import StreamLensHTTP
import Synchronization
import Foundation

/// Requests whose answers wait (a source starting, up to its start timeout; a WHEP answer's
/// candidates; the next frame at a point), each on a thread of its own, at most `limit` at once;
/// beyond that the request is answered 503 with Retry-After at once. Not a GCD queue: on Linux
/// its pool is about as wide as the machine's cores and a block waiting on a semaphore holds a
/// worker, so as many sources starting as there are cores would hold up every other such
/// answer, a refusal included.
final class WaitingWork: Sendable {
    let limit: Int
    private let running = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Runs `body` on a new thread, or answers `refuse` with 503 when `limit` are running.
    func run(else refuse: @escaping @Sendable (HTTPReply) -> Void, _ body: @escaping @Sendable () -> Void) {
        guard running.add(1, ordering: .relaxed).newValue <= limit else {
            running.subtract(1, ordering: .relaxed)
            var busy = APIServer.error(503, "\(limit) requests are already waiting for the pipelines (sources starting, video being negotiated): try again shortly")
            busy.headers.append(("Retry-After", "1"))
            return refuse(busy)
        }
        Thread.detachNewThread { [self] in
            defer { running.subtract(1, ordering: .relaxed) }
            body()
        }
    }
}
