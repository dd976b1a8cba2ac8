import Foundation
import StreamLensCore

/// A remote model's figures for the end-of-stream summary and the outage notices: requests,
/// round trips, bytes on the wire, frames that went on without inference while the server was
/// away. One per stage, used by its worker thread.
struct RemoteRecord {
    private(set) var roundTrips = TimingWindow()
    private(set) var bytesSent = 0, bytesReceived = 0, requests = 0, failures = 0, skipped = 0
    /// While the server is away: when to try again, and how long the next wait is.
    private var retryAt: UInt64 = 0
    private var backoff: UInt64 = 250_000_000
    private(set) var down = false

    /// A new request may go out (not waiting out a back-off after a failure).
    func mayTry(now: UInt64) -> Bool { !down || now >= retryAt }

    mutating func skip() { skipped += 1 }

    /// One finished request; the notice to give, if the server just went away or came back.
    mutating func record(_ request: PendingInference, error: InferenceError?, address: RemoteModelAddress) -> StageNotice? {
        requests += 1
        bytesSent += request.bytesSent
        bytesReceived += request.bytesReceived
        let now = DispatchTime.now().uptimeNanoseconds
        if let error {
            failures += 1
            retryAt = now + backoff
            let wait = backoff
            backoff = min(backoff * 2, 4_000_000_000)
            let first = !down
            down = true
            return first ? StageNotice(.warning, "\(error.message); frames go on without inference, trying again every \(String(format: "%.2g", Double(wait) / 1e9))…4 s") : nil
        }
        roundTrips.record(request.roundTripMilliseconds)
        backoff = 250_000_000
        guard down else { return nil }
        down = false
        return StageNotice(.info, "\(address.description) answers again (\(skipped) frames went on without inference so far)")
    }

    var summary: String {
        let perRequest = requests > 0 ? (bytesSent / requests, bytesReceived / requests) : (0, 0)
        return String(format: "remote: %d requests, round trip p50 %.1f ms p95 %.1f ms, %d+%d bytes a request, %d failed, %d frames without inference",
                      requests, roundTrips.median ?? 0, roundTrips.percentile(95) ?? 0, perRequest.0, perRequest.1, failures, skipped)
    }
}
