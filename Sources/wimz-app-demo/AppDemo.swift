import ArgumentParser
import Foundation
import WimzRelayClient
import WimzRobot

/// A terminal stand-in for the iPhone app, on WimzRelayClient: the live mission as a progress
/// bar, the robot's online state and mode, the TURN credential's expiry, and commands.
@main
struct AppDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wimz-app-demo",
        abstract: "Watch a WIM-Z robot through the relay, as the app does.")

    @Option(help: "Relay base URL.") var url = "http://127.0.0.1:8080"
    @Option(help: "Device id.") var device = "demo-robot"
    @Option(help: "App token (default: env WIMZ_APP_TOKEN).") var token: String?
    @Option(help: "Send this command once the robot is online and print the response.") var command: String?
    @Option(help: "Exit after this many seconds (default: run until Ctrl-C).") var exitAfter: Double?
    @Option(help: "Go to the background after this many seconds, as an iPhone app's scene does: the socket closes and nothing is tried until the app would come back (here: never).") var backgroundAfter: Double?
    @Flag(help: "One line per change instead of a redrawn screen (also when stdout is not a terminal).") var plain = false
    @Flag(help: "One JSON line per robot event instead of the screen: {\"event\":NAME,\"decoded\":MODEL} with MODEL the library's typed model re-encoded by its coding keys (null when it did not decode).") var json = false

    @Flag(name: .customLong("state"), help: "Print the robot's last-known state (GET /api/devices/ID/state) as one JSON line: {\"online\",\"last_seen\",\"events\":{NAME:{\"received_at\",\"decoded\":MODEL}}}, then exit.") var state = false
    @Option(name: .customLong("register-push"), help: "Register this APNs device token (hex) for every push kind of the device, print the stored registration as JSON, then exit.") var registerPush: String?
    @Option(name: .customLong("push-environment"), help: "production or sandbox (--register-push and the Live Activity tokens; default sandbox).") var pushEnvironment = "sandbox"
    @Option(name: .customLong("live-activity-start"), help: "Hand over this push-to-start token (hex) for the mission's Live Activity, print it as stored, then exit.") var liveActivityStart: String?
    @Option(name: .customLong("live-activity"), help: "Hand over an activity's update token as ID:HEX (repeatable), print each as stored, then exit.") var liveActivity: [String] = []
    @Flag(name: .customLong("live-activities"), help: "Print this app token's Live Activity tokens for the device as JSON, then exit.") var liveActivities = false
    @Flag(name: .customLong("api-check"), help: "Call each of the robot's Quick Reference endpoints once through RobotAPI and print one JSON line per call: {\"call\":NAME,\"route\":\"direct|relay\",\"decoded\":MODEL}, then exit.") var apiCheck = false
    @Option(help: "Invite someone (owners): family or guest; prints the invitation with its code as JSON, then exits.") var invite: String?
    @Option(help: "--invite: the name shown in the member list.") var label = "invited from the terminal"
    @Flag(help: "--invite guest: may send commands and change things through the robot's API.") var control = false
    @Option(help: "--invite: when the access ends, ISO 8601 (required for a guest, at most 30 days ahead).") var until: String?
    @Flag(help: "List the household (owners and family) as JSON, then exit.") var members = false
    @Option(help: "Remove the member with this token_id (owners): its sockets close and its video is cut; then exit.") var remove: Int64?
    @Option(help: "The robot's own API on the LAN, e.g. http://192.168.1.20:8000 (--api-check: direct when it answers a probe, else the relay).") var direct: String?
    @Option(name: .customLong("probe-timeout"), help: "Seconds the LAN probe waits for the robot (--api-check with --direct; default 0.8).") var probeTimeout: Double = 0.8
    @Flag(name: .customLong("settings"), help: "Print the robot's settings (desired, reported, pending) as JSON, then exit.") var showSettings = false
    @Option(help: "Merge this JSON object into the robot's desired settings (read, merged, written; again on a conflict), print what was written, then exit.") var set: String?
    @Flag(help: "Print the newest page of the household's timeline as JSON, then exit.") var timeline = false
    @Option(name: .customLong("timeline-limit"), help: "--timeline: entries in the page (1-500).") var timelineLimit = 50
    @Option(name: .customLong("away-since"), help: "Sync the timeline and print what happened since this ISO 8601 time (barks, treats, missions by dog, time offline), computed here, then exit.") var awaySince: String?
    @Option(name: .customLong("timeline-file"), help: "--away-since: keep the timeline's copy in this file between runs.") var timelineFile: String?
    @OptionGroup(title: "Sealed household (v1.5)") var sealed: SealedOptions

    func run() async throws {
        if let link = sealed.join {
            guard let relayURL = URL(string: url) else { throw ValidationError("not a URL: \(url)") }
            _ = try await exitingOnRefusal {
                try await SealedCommands(options: sealed, relay: relayURL, device: device).join(link, label: label)
                return true
            }
            return
        }
        guard let token = token ?? ProcessInfo.processInfo.environment["WIMZ_APP_TOKEN"], !token.isEmpty else {
            throw ValidationError("an app token is required: --token or WIMZ_APP_TOKEN")
        }
        guard let relayURL = URL(string: url) else { throw ValidationError("not a URL: \(url)") }
        if apiCheck {
            let relay = RobotRoute.relay(relayURL, deviceID: device, token: token)
            let api = try direct.map { text in
                guard let lan = URL(string: text) else { throw ValidationError("not a URL: \(text)") }
                return RobotAPI(direct: lan, relay: relay, probeTimeout: .milliseconds(Int(probeTimeout * 1000)))
            } ?? RobotAPI(route: relay)
            try await APICheck(api: api).run()
            return
        }
        var configuration = RelayClient.Configuration(url: relayURL, deviceID: device, token: token)
        configuration.sealed = try sealed.household()
        let client = RelayClient(configuration)
        if try await SealedCommands.run(self, token: token, client: client) { return }
        if configuration.sealed != nil { _ = try? await client.refreshSealedEpoch() }  // a newer epoch than the ones kept
        if try await HouseholdCommands.run(self, client: client) { return }
        if try await LiveActivityCommands.run(self, client: client) { return }
        if try await SettingsCommands.run(self, client: client) { return }
        if try await TimelineCommands.run(self, client: client) { return }
        if state {
            print(StateLine(try await client.lastKnownState()).text)
            return
        }
        if let registerPush {
            guard let token = Data(hex: registerPush), let environment = PushEnvironment(rawValue: pushEnvironment) else {
                throw ValidationError("--register-push takes the token's hex digits; --push-environment production or sandbox")
            }
            let stored = try await client.registerForPush(deviceToken: token, environment: environment)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(stored), as: UTF8.self))
            return
        }
        var screen = Screen(device: device, redraw: !plain && isatty(STDOUT_FILENO) == 1)
        await client.start()

        scheduleLifecycle(of: client)
        // One loop draws everything: the client's events and notes from the helper tasks.
        let (inputs, sink) = AsyncStream.makeStream(of: Screen.Input.self)
        Task {
            for await event in client.events { sink.yield(.event(event)) }
            sink.finish()
        }
        let turnWatcher = Task {
            // What the app would hand to RTCPeerConnection, each time the client refreshes it.
            for await credentials in client.turnCredentialUpdates() {
                sink.yield(.turn(expiresAt: credentials.expiresAt, servers: credentials.iceServers.count))
            }
        }
        var commandSent = false
        for await input in inputs {
            if json, case .event(let event) = input, let line = EventLine(event) { print(line.text); fflush(nil) }
            screen.apply(input)
            if case .event(.deviceStatus(let status)) = input, status.online, let command, !commandSent {
                commandSent = true
                Task {
                    do {
                        let response = try await client.send(command: command)
                        sink.yield(.commandAnswered(command, response.ok, (response.ok ? response.data : response.error ?? .null).text))
                    } catch {
                        sink.yield(.commandFailed(command, "\(error)"))
                    }
                }
            }
            if !json { screen.render() }
        }
        turnWatcher.cancel()
        if case .stopped(let reason) = await client.state, reason != .stopped {
            print("stopped: \(reason)")
            throw ExitCode(2)
        }
    }
}

extension AppDemo {
    /// `--background-after` and `--exit-after`: what iOS's scene phase and the user would do.
    func scheduleLifecycle(of client: RelayClient) {
        if let backgroundAfter {
            Task {
                try await sleepOnDispatch(for: .seconds(backgroundAfter))
                await client.enterBackground()
            }
        }
        if let exitAfter {
            Task {
                try await sleepOnDispatch(for: .seconds(exitAfter))
                await client.stop()
            }
        }
    }
}

/// What the terminal shows; redrawn in place on a terminal, one line per change otherwise.
struct Screen {
    enum Input: Sendable {
        case event(RelayEvent)
        case turn(expiresAt: Date, servers: Int)
        case commandAnswered(String, Bool, String)
        case commandFailed(String, String)
    }

    let device: String
    let redraw: Bool
    var connection = "connecting"
    var online = "unknown"
    var you = "-"
    var mode = "-"
    var mission = "-"
    /// The run as the lock screen shows it (the Live Activity's content state).
    var lockScreen: MissionActivityAttributes.ContentState?
    var fraction: Double?
    var turn = "-"
    var settings = "-"
    var last = "-"
    private var lastLine = ""

    init(device: String, redraw: Bool) {
        self.device = device
        self.redraw = redraw
    }

    mutating func apply(_ input: Input) {
        switch input {
        case .event(let event): apply(event)
        case .turn(let expiresAt, let servers):
            turn = "\(servers) ICE servers, TURN credential expires \(expiresAt.formatted(date: .abbreviated, time: .standard))"
        case .commandAnswered(let name, let ok, let data): last = "command \(name): \(ok ? "ok" : "failed") \(data)"
        case .commandFailed(let name, let error): last = "command \(name): \(error)"
        }
    }

    private mutating func apply(_ event: RelayEvent) {
        switch event {
        case .connection(let state): connection = "\(state)"
        case .deviceStatus(let status):
            if let own = status.member {
                you = own.access.rawValue + (own.control ? "" : " (no control)")
                    + (own.until.map { ", until \($0.formatted(date: .abbreviated, time: .shortened))" } ?? "")
            }
            online = status.online ? "online" : "offline"
            lockScreen?.robotOnline = status.online
            if let lockScreen { mission = LockScreen.text(lockScreen) }
            if let since = status.since { online += " since \(since.formatted(date: .omitted, time: .standard))" }
        case .event(let message): apply(RobotEvent(message))
        case .message(let raw): last = String(raw.prefix(60))
        case .binary(let bytes): last = "binary message, \(bytes.count) bytes"
        case .sealedFrameRejected(let why): last = "sealed frame dropped: \(why)"
        case .sealedHistoryRejected(let why): last = "shared history dropped: \(why)"
        case .timelineChanged(let newest): last = "timeline: new entries up to \(newest)"
        case .settingsChanged(let desired, let reported):
            settings = "desired v\(desired.map(String.init) ?? "–"), robot runs v\(reported.map(String.init) ?? "–")"
        }
    }

    private mutating func apply(_ event: RobotEvent) {
        switch event {
        case .missionProgress(let event):
            guard let progress = event.model else { return }
            let state = MissionActivityAttributes.ContentState(progress, robotOnline: online.hasPrefix("online"))
            lockScreen = state
            mission = LockScreen.text(state)
            fraction = progress.fraction
        case .modeChanged(let event):
            mode = (event.model?.mode ?? "?") + (event.model?.locked == true ? " (locked: \(event.model?.lockReason ?? ""))" : "")
        case .other(let message): last = message.name
        case .barkDetected(let event): last = "bark_detected \(event.model?.loudnessDb.map { "\($0) dB" } ?? "")"
        case .dogDetected(let event): last = "dog_detected \(event.model?.dogName ?? event.model?.dogId ?? "")"
        case .treatDispensed(let event):
            last = "treat_dispensed \(event.model?.dailyCount.map(String.init) ?? "?")/\(event.model?.dailyLimit.map(String.init) ?? "?") today"
        case .audioState(let event): last = "audio \(event.model?.state ?? "?") \(event.model?.track ?? "")"
        case .programProgress(let event): last = "program \(event.model?.programName ?? "") \(event.model?.currentMission ?? "")"
        }
    }

    mutating func render() {
        let bar = fraction.map { value -> String in
            let filled = Int((min(max(value, 0), 1) * 30).rounded())
            return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled)
                + "] \(Int((value * 100).rounded()))%"
        } ?? "[no mission]"
        if redraw {
            print("\u{1B}[H\u{1B}[2J", terminator: "")
            print("WIM-Z \(device) — relay \(connection), you: \(you)")
            print("robot:   \(online), mode \(mode)")
            print("mission: \(mission)")
            print("         \(bar)")
            print("TURN:    \(turn)")
            print("settings: \(settings)")
            print("last:    \(last)")
        } else {
            let line = "relay=\(connection) you=\(you) robot=\(online) mode=\(mode) mission=\(mission) \(bar) turn=\(turn) settings=\(settings) last=\(last)"
            if line != lastLine { print(line) }
            lastLine = line
        }
        fflush(nil)  // all streams: stdout is a C global Swift 6 will not touch
    }
}

/// `--json`: one line per robot event, what the library understood of it.
struct EventLine {
    let text: String

    init?(_ event: RelayEvent) {
        guard let robotEvent = event.robotEvent, let (name, decoded) = EventLine.decoded(robotEvent) else { return nil }
        text = #"{"event":"\#(name)","decoded":\#(decoded)}"#
    }

    /// A robot event's name and its model re-encoded by its coding keys ("null" when it did not
    /// decode); nil for anything but the guide's events.
    static func decoded(_ event: RobotEvent) -> (name: String, json: String)? {
        func encoded<M>(_ name: String, _ e: TypedEvent<M>) -> (String, String) {
            (name, e.model.flatMap { try? RobotJSON.encoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) } ?? "null")
        }
        switch event {
        case .missionProgress(let e): return encoded("mission_progress", e)
        case .modeChanged(let e): return encoded("mode_changed", e)
        case .audioState(let e): return encoded("audio_state", e)
        case .barkDetected(let e): return encoded("bark_detected", e)
        case .dogDetected(let e): return encoded("dog_detected", e)
        case .treatDispensed(let e): return encoded("treat_dispensed", e)
        case .programProgress(let e): return encoded("program_progress", e)
        default: return nil
        }
    }
}

/// `--state`: the last-known state, each event decoded by the library's model (as `--json`).
struct StateLine {
    let text: String

    init(_ state: LastKnownState) {
        let events = state.events.keys.sorted().map { name -> String in
            let known = state.events[name]!
            let decoded = EventLine.decoded(RobotEvent(known.message))?.json ?? "null"
            let at = known.receivedAt.map { #""\#($0.formatted(.iso8601))""# } ?? "null"
            return #""\#(name)":{"received_at":\#(at),"decoded":\#(decoded)}"#
        }
        let seen = state.lastSeen.map { #""\#($0.formatted(.iso8601))""# } ?? "null"
        text = #"{"device_id":"\#(state.deviceID)","online":\#(state.online),"last_seen":\#(seen),"events":{\#(events.joined(separator: ","))}}"#
    }
}

/// `--api-check`: every Quick Reference call once, in the guide's order, each decoded model
/// printed by its own coding keys (what the library understood), or the error.
struct APICheck {
    let api: RobotAPI

    func run() async throws {
        let route = await api.route().kind.rawValue
        func emit<M: Encodable>(_ name: String, _ call: () async throws -> M) async {
            let encoder = RobotJSON.encoder()  // the guide's snake_case keys
            do {
                let model = try await call()
                let text = (try? encoder.encode(model)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
                print(#"{"call":"\#(name)","route":"\#(route)","decoded":\#(text)}"#)
            } catch {
                print(#"{"call":"\#(name)","route":"\#(route)","error":\#(JSONValueText.quote("\(error)"))}"#)
            }
        }
        await emit("missions/available") { try await api.availableMissions() }
        await emit("missions/start") { try await api.startMission("sit_training", parameters: ["dog_id": "elsa"]) }
        await emit("missions/status") { try await api.missionStatus() }
        await emit("mode/locked") { try await api.setMode("coach") }
        await emit("missions/stop") { try await api.stopMission() }
        await emit("programs/available") { try await api.availablePrograms() }
        await emit("programs/start") { try await api.startProgram("puppy_basics", dogID: "elsa") }
        await emit("programs/status") { try await api.programStatus() }
        await emit("programs/stop") { try await api.stopProgram() }
        await emit("mode") { try await api.mode() }
        await emit("mode/set") { try await api.setMode("coach") }
        await emit("reports/weekly") { try await api.weeklyReport() }
        await emit("reports/dog") { try await api.dogProgress("elsa", weeks: 8) }
        await emit("reports/trends") { try await api.trends(weeks: 8) }
        await emit("reports/compare") { try await api.compareDogs() }
        await emit("programs/delete-preset") { try await api.deleteProgram("puppy_basics") }
        fflush(nil)
    }
}

/// A JSON string literal for an error text.
enum JSONValueText {
    static func quote(_ text: String) -> String {
        let data = try? JSONEncoder().encode(text)
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }
}

extension Data {
    /// Bytes from hex digits (an even number of them), nil for anything else.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for k in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[k...k + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.init(bytes)
    }
}
