/// Closing sessions: each close also stops routing to its session (`detach`), so nothing is
/// queued for a socket whose close frame is on its way.
extension DeviceHub {
    /// Closes `session` with `code` and stops routing to it: how a session is closed (its socket
    /// sends the close frame when its turn comes).
    public func close(_ session: Session, _ code: CloseCode, reason: String) {
        session.close(code, reason: reason)
        detach(session)
    }

    /// Closes and detaches sessions matching `predicate` (revocation, disable, shutdown).
    @discardableResult
    public func close(where predicate: (Session) -> Bool, code: CloseCode, reason: String) -> [Session] {
        close(allSessions.filter(predicate), code: code, reason: reason)
    }

    /// Closes the sockets of `device` (every device's when nil) that `predicate` picks.
    @discardableResult
    public func close(device: DeviceID?, where predicate: (Session) -> Bool, code: CloseCode, reason: String) -> [Session] {
        guard let device else { return close(where: predicate, code: code, reason: reason) }
        return close(sessions(of: device).filter(predicate), code: code, reason: reason)
    }

    /// Closes every socket of `device` (cluster: another node claimed it).
    @discardableResult
    public func close(device: DeviceID, code: CloseCode, reason: String) -> [Session] {
        close(sessions(of: device), code: code, reason: reason)
    }

    private func close(_ victims: [Session], code: CloseCode, reason: String) -> [Session] {
        for s in victims { close(s, code, reason: reason) }
        return victims
    }
}
