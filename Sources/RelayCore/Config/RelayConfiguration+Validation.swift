extension RelayConfiguration {
    /// Whether the relay can run with this configuration: every numeric setting within its
    /// ``ServeOptions`` range, and the rules that tie settings together. The daemon checks it at
    /// start, however the configuration was made.
    public func validate() throws(ConfigurationError) {
        for option in ServeOptions.all { try option.checkRange(self) }
        guard !databaseURL.isEmpty else {
            throw ConfigurationError("no database configured: pass --database-url or set WIMZ_DATABASE_URL")
        }
        guard (0...65_535).contains(listenPort) else { throw ConfigurationError("the listen port must be 0…65535") }
        if tcpUserTimeoutSeconds > 0, Double(tcpUserTimeoutSeconds) < tcpRetransmitCapSeconds {
            throw ConfigurationError("WIMZ_TCP_USER_TIMEOUT (\(tcpUserTimeoutSeconds) s) must be 0 or at least WIMZ_TCP_RTO_MAX (\(tcpRetransmitCapSeconds) s): one retransmission must fit in it")
        }
        guard timelineDays <= timelineMaxDays else {
            throw ConfigurationError("WIMZ_TIMELINE_DAYS (\(timelineDays)) must be at most WIMZ_TIMELINE_MAX_DAYS (\(timelineMaxDays))")
        }
        guard turnTTLMin <= turnTTLMax else { throw ConfigurationError("TURN TTL range must satisfy 1 <= min <= max") }
        guard !turnUsernameSeparator.isEmpty,
              turnUsernameSeparator.allSatisfy({ !$0.isWhitespace && $0 != "\"" && !$0.isLetter && !$0.isNumber }) else {
            throw ConfigurationError("TURN username separator must be punctuation without spaces or quotes")
        }
        guard DeviceID(turnRealm) != nil else {
            throw ConfigurationError("WIMZ_TURN_REALM must match [A-Za-z0-9_.-]{1,64}, not '\(turnRealm.prefix(80))'")
        }
        if (tlsCertificatePath == nil) != (tlsKeyPath == nil) {
            throw ConfigurationError("TLS needs both a certificate (WIMZ_TLS_CERT) and a key (WIMZ_TLS_KEY)")
        }
        if apnsKeyFile != nil, apnsKeyID == nil || apnsTeamID == nil || apnsTopic == nil {
            throw ConfigurationError("WIMZ_APNS_KEY_FILE needs WIMZ_APNS_KEY_ID, WIMZ_APNS_TEAM_ID and WIMZ_APNS_TOPIC")
        }
        if let adminToken {
            if adminToken.isEmpty { throw ConfigurationError("the admin token is empty") }
            if let problem = AdminTokenPolicy.problem(with: adminToken) { throw ConfigurationError(problem) }
        }
        for name in [nodeID, nodeAddress].compactMap({ $0 }) where !NodeName.isValid(name) {
            throw ConfigurationError("invalid node name '\(name.prefix(80))' ([A-Za-z0-9_.:-]{1,128})")
        }
    }
}
