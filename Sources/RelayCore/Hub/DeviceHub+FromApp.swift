/// Frames from apps (docs/protocol.md "Frames on the sockets", tightened in v1.2): the strict check
/// (`AppFrame`), the rate limit, commands under the relay's own unguessable ids, and a busy robot
/// that drops the app's message instead of being closed.
extension DeviceHub {
    func fromApp(_ payload: Payload, session: Session, device: Device, now: UInt64) {
        let verdict = payload.isBinary ? .accepted(.opaque) : payload.withBytes(AppFrame.check)
        let envelope: Envelope? = if case .accepted(let envelope) = verdict { envelope } else { nil }
        // The app's own id goes back with an error about its command (only from a frame that passed).
        let commandID = envelope?.kind == .command ? envelope?.id.map { id in payload.withBytes { Array($0[id]) } } : nil
        if session.rateLimiter?.take(now: now) == false {
            observer?.hubDropped(.refused(.rateLimited))
            session.consecutiveRateLimited += 1
            if session.consecutiveRateLimited >= limits.rateLimitCloseAfter {
                close(session, .rateLimited, reason: "rate limited")
            } else if commandID != nil || session.consecutiveRateLimited == 1 || session.consecutiveRateLimited % 10 == 0 {
                // A dropped command always gets its error, with its id, so the app can fail that
                // call; other messages get one error per burst, so a flooding app does not also
                // flood itself (4029 ends either after limits.rateLimitCloseAfter drops in a row).
                deliver(RelayMessages.error(.rateLimited, "over \(Int(limits.appRate)) messages/s; message dropped",
                                            idToken: commandID), to: session)
            }
            return
        }
        session.consecutiveRateLimited = 0
        switch verdict {
        case .accepted: break
        case .malformed(let why):
            observer?.hubDropped(.refused(.badMessage))
            deliver(RelayMessages.error(.badMessage, why), to: session)
            return
        case .forbidden:
            // Only the relay speaks these: a forged http_request could answer another app's
            // request, a forged turn_credentials would steer the robot's video elsewhere.
            observer?.hubDropped(.refused(.forbiddenType))
            deliver(RelayMessages.error(.forbiddenType, "this type or event is the relay's own"), to: session)
            return
        }
        // A sealed device takes only sealed frames from its apps (v1.5): anything else would
        // reach the robot around the seal (the robot refuses it too).
        if device.sealedEpoch != nil, envelope?.kind != .sealed {
            observer?.hubDropped(.refused(.sealedDevice))
            deliver(RelayMessages.error(.sealedDevice, "this device is sealed: only sealed frames reach its robot", idToken: commandID),
                    to: session)
            return
        }
        // A guest without control sends no commands (docs/protocol.md v1.3): refused here, before the
        // robot, from the flag the token's changes keep current.
        if !session.mayCommand, envelope?.kind == .command {
            observer?.hubDropped(.refused(.forbidden))
            deliver(RelayMessages.error(.forbidden, "a guest without control can't send commands", idToken: commandID), to: session)
            return
        }
        guard let robot = device.robot else {
            observer?.hubDropped(.refused(.deviceOffline))
            deliver(RelayMessages.error(.deviceOffline, "the robot is not connected", idToken: commandID), to: session)
            return
        }
        var outgoing = payload
        var relayID: UInt64?
        if commandID != nil, let idRange = envelope?.id {
            // The robot sees an unguessable id of the relay's; its response is matched by it.
            var id = ExchangeID.random()
            while device.pending[id] != nil { id = ExchangeID.random() }
            var rewritten = [UInt8]()
            rewritten.reserveCapacity(payload.count - idRange.count + ExchangeID.textLength + 2)
            payload.withBytes { bytes in
                rewritten += bytes[..<idRange.lowerBound]
                rewritten.append(UInt8(ascii: "\""))
                ExchangeID.append(UInt8(ascii: "c"), id, to: &rewritten)
                rewritten.append(UInt8(ascii: "\""))
                rewritten += bytes[idRange.upperBound...]
            }
            outgoing = Payload(rewritten)
            relayID = id
        }
        if robot.wantsSenders, !payload.isBinary { outgoing = Payload(DeviceHub.inserting(session.senderMember, into: outgoing)) }
        // An app can't push its robot off the relay: a full robot queue drops the app's message.
        guard robot.closing == nil, robot.enqueue(outgoing) else {
            observer?.hubDropped(.refused(.robotBusy))
            deliver(RelayMessages.error(.robotBusy, "the robot is not keeping up; message dropped", idToken: commandID), to: session)
            return
        }
        if let relayID, let commandID { remember(relayID, app: session, idToken: commandID, in: device) }
        forwarded.appToRobot.add(payload.count)
    }

    /// `member` inserted as the first member of the JSON object `payload` (checked by `AppFrame`),
    /// where a recovering app's `seq` goes (`Numbering.firstMemberSlot`).
    static func inserting(_ member: [UInt8], into payload: Payload) -> [UInt8] {
        payload.withBytes { bytes in
            guard let slot = Numbering.firstMemberSlot(bytes) else { return Array(bytes) }
            var out = [UInt8]()
            out.reserveCapacity(bytes.count + member.count + 1)
            out += bytes[..<slot.at]
            out += member
            if slot.comma { out.append(UInt8(ascii: ",")) }
            out += bytes[slot.at...]
            return out
        }
    }

    private func remember(_ relayID: UInt64, app: Session, idToken: [UInt8], in device: Device) {
        device.pending[relayID] = (app, idToken)
        device.pendingOrder.append(relayID)
        if device.pendingOrder.count - device.pendingHead > limits.pendingCommandsPerDevice {
            device.pending[device.pendingOrder[device.pendingHead]] = nil
            device.pendingHead += 1
            if device.pendingHead > 4096 {
                device.pendingOrder.removeFirst(device.pendingHead)
                device.pendingHead = 0
            }
        }
    }

    /// `"c…"` (quoted, see `ExchangeID`) → its id.
    static func parseRelayID(_ token: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard token.count == ExchangeID.textLength + 2, token.first == UInt8(ascii: "\""), token.last == UInt8(ascii: "\"")
        else { return nil }
        return ExchangeID.parse(UnsafeBufferPointer(rebasing: token[1..<(ExchangeID.textLength + 1)]), prefix: UInt8(ascii: "c"))
    }

    /// A robot's answer to an app's command, back to that app under the app's own id.
    func routeResponse(_ payload: Payload, envelope: Envelope, device: Device) {
        guard let idRange = envelope.id, let relayID = payload.withBytes({ DeviceHub.parseRelayID(UnsafeBufferPointer(rebasing: $0[idRange])) }),
              let pending = device.pending.removeValue(forKey: relayID), pending.app.attached
        else {
            observer?.hubDropped(.unknownResponse)
            return
        }
        var restored = [UInt8]()
        restored.reserveCapacity(payload.count + pending.idToken.count)
        payload.withBytes { bytes in
            restored += bytes[..<idRange.lowerBound]
            restored += pending.idToken
            restored += bytes[idRange.upperBound...]
        }
        deliver(Payload(restored), to: pending.app)
        forwarded.robotToApps.add(restored.count)
    }
}
