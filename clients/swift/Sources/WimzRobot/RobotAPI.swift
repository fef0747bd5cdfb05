import Foundation
import WimzRelayClient
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where the robot's REST API is reached: on the LAN, or through the relay (docs/protocol.md v1.1
/// "HTTP to the robot through the relay"), or on a sealed device (v1.5) sealed over the relay
/// client's socket — the same paths every way.
public struct RobotRoute: Sendable, Equatable {
    public enum Kind: String, Sendable { case direct, relay, sealed }
    public var kind: Kind
    /// `http://<robot-ip>:8000`, or `{relay}/api/devices/{device_id}/robot` (sealed: what the
    /// plain route would be, for logs; nothing is sent to it).
    public var baseURL: URL
    /// The app token, for the relay.
    public var token: String?
    /// The client whose socket carries a sealed route's calls.
    public var client: RelayClient?

    public init(kind: Kind, baseURL: URL, token: String?, client: RelayClient? = nil) {
        (self.kind, self.baseURL, self.token, self.client) = (kind, baseURL, token, client)
    }

    public static func == (a: RobotRoute, b: RobotRoute) -> Bool {
        a.kind == b.kind && a.baseURL == b.baseURL && a.token == b.token && a.client === b.client
    }

    /// Through `client`'s socket, sealed: for a sealed device, whose relay refuses plain HTTP to
    /// its robot (409 `sealed_device`).
    public static func sealed(_ client: RelayClient) -> RobotRoute {
        let configuration = client.configuration
        return RobotRoute(kind: .sealed, baseURL: relayURL(configuration.url, WimzProtocol.Path.device(configuration.deviceID, .robot)),
                          token: nil, client: client)
    }

    /// The robot's own API on the home network.
    public static func direct(_ url: URL) -> RobotRoute { RobotRoute(kind: .direct, baseURL: url, token: nil) }

    /// Through the relay at `base` (e.g. `https://api.wimzai.com`) with an app token of the device.
    public static func relay(_ base: URL, deviceID: String, token: String) -> RobotRoute {
        RobotRoute(kind: .relay, baseURL: relayURL(base, WimzProtocol.Path.device(deviceID, .robot)), token: token)
    }
}

/// The robot's REST API (the integration guide's §3–§6 and its Quick Reference) as typed async
/// calls, over the LAN or through the relay — the guide's §2 table as code: with
/// ``init(direct:relay:probeTimeout:session:)`` every call goes direct while the robot answered a
/// short probe on the LAN, else through the relay; the choice is made again after
/// ``networkChanged()`` (called by itself on a path change where `Network` exists) or a failed
/// direct call.
public actor RobotAPI {
    private let fixed: RobotRoute?
    private let directURL: URL?
    private let relayRoute: RobotRoute?
    private let probeTimeout: Duration
    private let session: URLSession
    private var chosen: RobotRoute?
    /// The network path watcher while a route is chosen (PlatformWatchers: a path that came back
    /// or moved interface re-probes); released, it stops.
    private var pathWatch: (any Sendable)?

    /// Every call over `route`.
    public init(route: RobotRoute, session: URLSession = .shared) {
        fixed = route
        directURL = nil
        relayRoute = nil
        probeTimeout = .zero
        self.session = session
    }

    /// Direct when the robot answers `GET /mode` at `direct` within `probeTimeout`, else `relay`.
    public init(direct: URL, relay: RobotRoute, probeTimeout: Duration = .milliseconds(800), session: URLSession = .shared) {
        fixed = nil
        directURL = direct
        relayRoute = relay
        self.probeTimeout = probeTimeout
        self.session = session
    }

    /// The route the next call takes (probing first if none is chosen).
    public func route() async -> RobotRoute {
        if let fixed { return fixed }
        if let chosen { return chosen }
        let route = await probe() ? RobotRoute.direct(directURL!) : relayRoute!
        chosen = route
        startWatchingPath()
        return route
    }

    /// The network changed (Wi-Fi ↔ cellular): the next call probes again.
    public func networkChanged() { chosen = nil }

    private func probe() async -> Bool {
        guard let directURL else { return false }
        var request = URLRequest(url: directURL.appendingPathComponent("mode"))
        request.timeoutInterval = Double(probeTimeout.components.seconds) + Double(probeTimeout.components.attoseconds) / 1e18
        guard let (_, response) = try? await session.data(for: request) else { return false }
        return (response as? HTTPURLResponse)?.statusCode == 200
    }

    private func startWatchingPath() {
        guard pathWatch == nil else { return }
        // Its first update is the current path, which the probe just judged: no re-probe for it.
        pathWatch = PlatformWatchers.watchPath { [weak self] in await self?.networkChanged() }
    }

    /// Stops watching the network path (also when the API goes away).
    public func stopWatchingPath() { pathWatch = nil }

    // MARK: - Missions (§3)

    public func availableMissions() async throws -> [Mission] {
        try await call("GET", "missions/available", as: MissionsResponse.self).missions ?? []
    }
    public func startMission(_ name: String, parameters: [String: String] = [:]) async throws -> MissionStartResponse {
        try await call("POST", "missions/start", body: ["mission_name": .string(name), "parameters": .object(parameters.mapValues { .string($0) })])
    }
    public func missionStatus() async throws -> MissionStatus { try await call("GET", "missions/status") }
    public func stopMission() async throws -> GenericResponse { try await call("POST", "missions/stop") }
    public func pauseMission() async throws -> GenericResponse { try await call("POST", "missions/pause") }
    public func resumeMission() async throws -> GenericResponse { try await call("POST", "missions/resume") }

    // MARK: - Programs (§4)

    public func availablePrograms() async throws -> [Program] {
        try await call("GET", "programs/available", as: ProgramsResponse.self).programs ?? []
    }
    public func startProgram(_ name: String, dogID: String? = nil) async throws -> ProgramStartResponse {
        var body: [String: JSON] = ["program_name": .string(name)]
        if let dogID { body["dog_id"] = .string(dogID) }
        return try await call("POST", "programs/start", body: .object(body))
    }
    public func programStatus() async throws -> ProgramStatus { try await call("GET", "programs/status") }
    public func stopProgram() async throws -> GenericResponse { try await call("POST", "programs/stop") }
    public func pauseProgram() async throws -> GenericResponse { try await call("POST", "programs/pause") }
    public func resumeProgram() async throws -> GenericResponse { try await call("POST", "programs/resume") }
    /// `POST /programs/create` with the guide's fields (§4.5).
    public func createProgram(name: String, displayName: String, description: String = "", missions: [String],
                              dailyTreatLimit: Int, restBetweenMissionsSec: Int? = nil) async throws -> GenericResponse {
        var body: [String: JSON] = ["name": .string(name), "display_name": .string(displayName), "description": .string(description),
                                    "missions": .array(missions.map { .string($0) }), "daily_treat_limit": .integer(Int64(dailyTreatLimit))]
        if let restBetweenMissionsSec { body["rest_between_missions_sec"] = .integer(Int64(restBetweenMissionsSec)) }
        return try await call("POST", "programs/create", body: .object(body))
    }
    /// Preset programs cannot be deleted: the robot answers 400 (thrown as ``RelayClientError/http(status:code:message:)``).
    public func deleteProgram(_ name: String) async throws -> GenericResponse { try await call("DELETE", "programs/\(name)") }

    // MARK: - Mode (§5)

    public func mode() async throws -> ModeInfo { try await call("GET", "mode") }
    /// While the mode is locked the robot answers `success: false` with `error`.
    public func setMode(_ mode: String) async throws -> ModeSetResponse { try await call("POST", "mode", body: ["mode": .string(mode)]) }

    // MARK: - Reports (§6)

    public func weeklyReport() async throws -> WeeklyReportResponse { try await call("GET", "reports/weekly") }
    public func dogProgress(_ dogID: String, weeks: Int = 8) async throws -> DogProgressResponse {
        try await call("GET", "reports/dog/\(dogID)", query: [URLQueryItem(name: "weeks", value: String(weeks))])
    }
    public func trends(weeks: Int = 8) async throws -> TrendsResponse {
        try await call("GET", "reports/trends", query: [URLQueryItem(name: "weeks", value: String(weeks))])
    }
    public func compareDogs() async throws -> ComparisonResponse { try await call("GET", "reports/compare") }

    // MARK: - Transport

    /// One request over the current route. Errors: the relay's refusals and the robot's non-2xx
    /// answers as ``RelayClientError`` (`.deviceOffline` for 503 `device_offline`, `.http` with
    /// the JSON `error`/`message` otherwise), `.notConnected` when nothing answered.
    private func call<T: Decodable>(_ method: String, _ path: String, query: [URLQueryItem] = [], body: JSON? = nil,
                                    as _: T.Type = T.self) async throws -> T {
        let route = await route()
        let (status, data) = try await send(method, path, query: query, body: body, over: route)
        guard (200..<300).contains(status) else {
            // The two answers an app acts on differently get their own cases.
            switch RelayClientError.refusal(status: status, body: data) {
            case .http(_, ErrorCode.deviceOffline.rawValue, let message): throw RelayClientError.deviceOffline(message: message)
            case .http(429, _, let message): throw RelayClientError.rateLimited(message: message)
            case let refusal: throw refusal
            }
        }
        do {
            return try RobotJSON.decoder().decode(T.self, from: data)
        } catch {
            throw RelayClientError.invalidResponse("\(method) \(path): \(error)")
        }
    }

    /// The request's status and body, over HTTP or (sealed) the relay client's socket.
    private func send(_ method: String, _ path: String, query: [URLQueryItem], body: JSON?,
                      over route: RobotRoute) async throws -> (Int, Data) {
        var components = URLComponents(url: route.baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        if route.kind == .sealed, let client = route.client {
            let answer = try await client.robotRequest(method, path: "/" + path, query: components.percentEncodedQuery,
                                                       headers: body == nil ? [:] : ["content-type": "application/json"],
                                                       body: body.map { Data($0.text.utf8) })
            return (answer.status, answer.body)
        }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let token = route.token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.text.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        } else if method == "POST" {
            request.httpBody = Data()
        }
        do {
            let (data, response) = try await session.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        } catch {
            if route.kind == .direct, fixed == nil { chosen = nil }  // the LAN went away: probe again
            throw RelayClientError.notConnected
        }
    }
}
