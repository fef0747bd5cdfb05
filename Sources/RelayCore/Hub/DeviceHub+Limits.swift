extension DeviceHub {
    /// What the hub holds and lets through, per device and per app (the configuration's, see
    /// `DeviceHub.Limits(configuration)` in RelayServer).
    public struct Limits: Sendable {
        public var maxAppsPerDevice = 16
        public var appRate = 20.0
        public var appBurst = 40.0
        /// Consecutive rate-limited messages after which an app is closed with 4029.
        public var rateLimitCloseAfter = 200
        public var replayEvents: Set<String> = []
        /// The pushes robot events may become (docs/protocol.md v1.2), for devices with registrations.
        public var pushKinds: Set<PushKind> = []
        /// Commands awaiting a response, per device; the oldest is forgotten beyond this.
        public var pendingCommandsPerDevice = 1024
        /// Missed-event recovery's buffer per device (docs/protocol.md v1.1).
        public var history = DeviceHistory.Limits()
        /// Bytes every device's history may hold together (`HistoryMemory`).
        public var historyMemory = RelayConfiguration.defaults.recoveryMemoryBytes
        /// How long a resume with an epoch this node does not hold waits for a hand-off from
        /// the node the device moved from (nanoseconds; only while other nodes are live).
        public var resumeWait: UInt64 = 1_500_000_000
        public init() {}
    }
}
