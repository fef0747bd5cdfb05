import Foundation
import Testing
@testable import RelayCore

/// The one table of serve's settings: parsing, checking, and the documents made from it.
@Suite struct ServeOptionsTests {
    let database = ["WIMZ_DATABASE_URL": "host=/tmp dbname=x"]

    func configuration(_ arguments: [String], _ environment: [String: String] = [:]) throws(ConfigurationError) -> RelayConfiguration {
        try ServeOptions.configuration(arguments: arguments, environment: database.merging(environment) { $1 })
    }

    func refusal(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
        do {
            _ = try configuration(arguments, environment)
            return "accepted"
        } catch {
            return error.description
        }
    }

    @Test func flagsWinOverTheEnvironmentAndEmptyVariablesAreUnset() throws {
        let config = try configuration(["--turn-realm", "flag-realm", "--pairing-code-ttl=900"],
                                       ["WIMZ_TURN_REALM": "env-realm", "WIMZ_PAIRING_CODE_TTL": "60", "WIMZ_LISTEN": ""])
        #expect(config.turnRealm == "flag-realm" && config.pairingCodeSeconds == 900)
        #expect(config.listenHost == "127.0.0.1" && config.listenPort == 8080)
        #expect(try configuration([], ["WIMZ_TURN_REALM": "env-realm"]).turnRealm == "env-realm")
    }

    /// A renamed setting is still read by its old name (an env file of an earlier release); its
    /// new name wins, and a value out of range is refused by either.
    @Test func aRenamedSettingIsReadByItsOldNameToo() throws {
        #expect(try configuration([], ["WIMZ_UPGRADE_HOLD": "7"]).credentialHoldSeconds == 7)
        #expect(try configuration([], ["WIMZ_UPGRADE_HOLD": "7", "WIMZ_CREDENTIAL_HOLD": "3"]).credentialHoldSeconds == 3)
        #expect(try configuration(["--credential-hold", "4"], ["WIMZ_UPGRADE_HOLD": "7"]).credentialHoldSeconds == 4)
        #expect(refusal([], ["WIMZ_UPGRADE_HOLD": "99"]).contains("WIMZ_CREDENTIAL_HOLD"))
        #expect(ServeOptions.renamed.values.allSatisfy { ServeOptions.option($0) != nil })
    }

    @Test func everyOptionParsesItsOwnDefault() throws {
        // What the docs call the default is a value the option takes, and gives back as its default.
        for option in ServeOptions.all where option.defaultIsValue {
            guard let text = option.defaultText else { continue }
            var config = RelayConfiguration.defaults
            try option.apply(&config, text)
            #expect(option.number.map { $0(config) == $0(.defaults) } ?? true, "\(option.env)")
        }
        #expect(Set(ServeOptions.all.map(\.env)).count == ServeOptions.all.count)
        #expect(Set(ServeOptions.all.compactMap(\.flag)).count == ServeOptions.all.compactMap(\.flag).count)
    }

    @Test func valuesOutsideTheirRangeAndMalformedOnesAreRefusedByName() {
        #expect(refusal(["--pairing-code-ttl", "10"]) == "WIMZ_PAIRING_CODE_TTL (--pairing-code-ttl) must be 30–86400, not 10")
        #expect(refusal([], ["WIMZ_ROBOT_HTTP_TIMEOUT": "0"]).contains("must be positive, at most 300"))
        #expect(refusal([], ["WIMZ_SEND_QUEUE_BYTES": "100"]).contains("at least 1024"))
        #expect(refusal([], ["WIMZ_TURN_TTL": "soon"]) == "invalid value for WIMZ_TURN_TTL: 'soon' (a whole number)")
        #expect(refusal(["--listen", "nonsense"]).contains("invalid listen address"))
        #expect(refusal([], ["WIMZ_LOG_LEVEL": "loud"]).contains("invalid log level"))
        #expect(refusal(["--turn-ttl-min", "500", "--turn-ttl-max", "400"]).contains("min <= max"))
        #expect(refusal(["--turn-realm", "a b"]).contains("WIMZ_TURN_REALM must match"))
        #expect(refusal(["--tls-cert", "/c.pem"]).contains("needs both"))
        #expect(refusal(["--apns-key-file", "/k.p8"]).contains("WIMZ_APNS_KEY_ID"))
        #expect(refusal([], ["WIMZ_ADMIN_TOKEN": "short"]).contains("too weak"))
        #expect(refusal(["--admin-token", "x"]).contains("--admin-token is not accepted"))
        #expect(refusal(["--no-such-thing", "1"]).contains("unknown option --no-such-thing"))
        #expect(refusal(["--listen"]) == "--listen needs a value")
        #expect(refusal(["stray"]).contains("unexpected argument"))
        do {
            _ = try ServeOptions.configuration(arguments: [], environment: [:])
            Issue.record("no database accepted")
        } catch {
            #expect(error.description.contains("WIMZ_DATABASE_URL"))
        }
    }

    @Test func commandsThatActForTheRelayReadJustTheirSettings() throws {
        let config = try ServeOptions.configuration(reading: ["WIMZ_TURN_REALM"],
                                                    environment: ["WIMZ_TURN_REALM": "acme", "WIMZ_LOG_LEVEL": "loud"])
        #expect(config.turnRealm == "acme")
        #expect(throws: ConfigurationError.self) {
            try ServeOptions.configuration(reading: ["WIMZ_PAIRING_CODE_TTL"], environment: ["WIMZ_PAIRING_CODE_TTL": "5"])
        }
    }

    /// The committed env example and docs/configuration.md's table are the table's (regenerate with
    /// `scripts/generate.sh`).
    @Test func theEnvExampleAndTheConfigurationTableAreGeneratedFromTheTable() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = try String(contentsOf: root.appendingPathComponent("systemd/wimz-relay.env.example"), encoding: .utf8)
        #expect(example == ServeOptions.envExample, "systemd/wimz-relay.env.example: run scripts/generate.sh")
        let readme = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let begin = "<!-- options:begin (scripts/generate.sh) -->\n", end = "<!-- options:end -->"
        let start = try #require(readme.range(of: begin)), stop = try #require(readme.range(of: end))
        #expect(String(readme[start.upperBound..<stop.lowerBound]) == ServeOptions.markdownTable, "docs/configuration.md: run scripts/generate.sh")
    }
}
