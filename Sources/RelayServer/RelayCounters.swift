import RelayCore

/// Counters kept by the service thread (exported by /metrics).
struct RelayCounters {
    var authFailures: [AuthFailure: Int] = [:]
    var closes: [UInt16: Int] = [:]
    var drops: [DropReason: Int] = [:]
    var keepaliveTimeouts = 0
    var robotsReplaced = 0
}
