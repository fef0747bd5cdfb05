import Foundation
import WimzProtocol

// A connection that went quiet is not dropped on suspicion: a replacement is opened beside it,
// and whichever shows life first is kept.
//
// A quiet socket may be dead (the phone's address changed and a carrier NAT forgot the flow: it
// never answers again) or only cut off for a while (a tunnel: it answers once the radio is back,
// the relay's retransmissions reach it within WIMZ_TCP_RTO_MAX). Dropping it at once would make
// every tunnel cost a whole new connection; waiting for the usual deadline makes every address
// change cost 29 s. So, when an early probe goes unanswered, the client races both: the old
// socket keeps delivering if it can (any sign of life abandons the replacement), and a fresh one
// is opened with the old one's resume point (`since=E:N`) and taken as soon as it opens — what
// the old one delivered meanwhile is not shown twice (`duplicateThrough`).

extension RelayClient {
    /// The socket the connection loop takes next: a replacement opened while the last one was
    /// still held, or a new one (`openRacing`: staggered attempts).
    func replacementOrOpen() async throws -> any WebSocketConnection {
        if let socket = replacementSocket {
            replacementSocket = nil
            return socket
        }
        setState(.connecting)
        let clock = configuration.clock, began = clock.now()
        let socket = try await openRacing(configuration.transport, to: connectURL(), headers: upgradeHeaders, clock: clock)
        estimate.noteOpened(in: clock.now() - began)
        return socket
    }

    var upgradeHeaders: [String: String] { ["Authorization": "Bearer \(currentToken)"] }

    /// Starts opening a replacement beside the open connection (once: one race at a time).
    func beginReplacement() {
        guard replacementRace == nil, replacementSocket == nil, connection != nil else { return }
        replacementGeneration += 1
        let generation = replacementGeneration, transport = configuration.transport, clock = configuration.clock
        let url = connectURL(), headers = upgradeHeaders
        replacementRace = Task { [weak self] in
            let socket = try? await openRacing(transport, to: url, headers: headers, clock: clock)
            guard let self else {
                await socket?.close(code: 1000)
                return
            }
            await self.replacementEnded(socket, generation: generation)
        }
    }

    /// The old connection showed life: the replacement is not needed (a socket it opens later is closed).
    func abandonReplacement() {
        guard let race = replacementRace else { return }
        replacementRace = nil
        replacementGeneration += 1
        race.cancel()
    }

    /// Closes a replacement that opened but will not be used (the client stops, or goes to the background).
    func closeReplacement() async {
        abandonReplacement()
        guard let socket = replacementSocket else { return }
        replacementSocket = nil
        await socket.close(code: CloseCode.goingAway.rawValue)
    }

    /// The race ended: an opened socket replaces the quiet one (dropped now, without a closing
    /// handshake it could not answer); a lost race leaves the old one to the usual deadline.
    private func replacementEnded(_ socket: (any WebSocketConnection)?, generation: Int) async {
        guard generation == replacementGeneration else {
            await socket?.close(code: 1000)  // abandoned meanwhile
            return
        }
        replacementRace = nil
        guard let socket else { return }
        guard let old = connection else {
            await socket.close(code: 1000)
            return
        }
        replacementSocket = socket
        endingOnPurpose = true
        await old.abort()
    }
}
