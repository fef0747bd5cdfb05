/// One setting of `wimz-relay serve`: its environment variable and flag, the default, the values
/// it may take, its help, and where it lands in ``RelayConfiguration``. The rows are
/// ``ServeOptions/all``; the CLI's help and parsing, `validate()`, the env example and the
/// README's table are all made from them.
public struct ServeOption: Sendable {
    /// Where the setting is listed (env example, README, help).
    public enum Section: String, Sendable, CaseIterable {
        case service = "Service"
        case turn = "TURN"
        case tls = "TLS served by the relay itself"
        case websocket = "WebSockets"
        case robotHTTP = "HTTP to the robot"
        case recovery = "Missed events and pairing"
        case push = "Push through APNs"
        case cluster = "Several nodes"
        case retention = "Retention"
    }

    /// `WIMZ_…`.
    public let env: String
    /// The long flag without `--`; nil: environment only (a secret never goes on the command line).
    public let flag: String?
    public let section: Section
    public let help: String
    /// The default as the docs show it; nil: none (unset).
    public let defaultText: String?
    /// Whether `defaultText` is a value one could set (`127.0.0.1:8080`), not a description of
    /// one (`hostname:port`).
    public var defaultIsValue = true
    /// Numeric settings: the values they may take.
    public let range: SettingRange?
    /// What the env example sets, uncommented (a value every install must look at); nil: the
    /// example shows the default commented out, so a later default still applies.
    public let example: String?
    let apply: @Sendable (inout RelayConfiguration, String) throws(ConfigurationError) -> Void
    /// The numeric value `range` checks.
    let number: (@Sendable (RelayConfiguration) -> Double)?

    /// How the option is named in messages: `WIMZ_X (--x)`.
    public var name: String { flag.map { "\(env) (--\($0))" } ?? env }

    /// Throws when `config`'s value of this setting is outside its range.
    func checkRange(_ config: RelayConfiguration) throws(ConfigurationError) {
        guard let range, let value = number?(config), !range.contains(value) else { return }
        throw ConfigurationError("\(name) must be \(range.text), not \(SettingRange.number(value))")
    }

    /// Fails with the usual wording for a value that does not parse.
    static func invalid(_ env: String, _ text: String, _ wants: String) -> ConfigurationError {
        ConfigurationError("invalid value for \(env): '\(text.prefix(80))' (\(wants))")
    }
}

extension ServeOption {
    typealias Path<T> = WritableKeyPath<RelayConfiguration, T> & Sendable

    /// A whole number in `range`.
    static func int(_ env: String, _ flag: String, _ section: Section, _ path: Path<Int>, _ range: SettingRange,
                    _ help: String) -> ServeOption {
        ServeOption(env: env, flag: flag, section: section, help: help,
                    defaultText: String(RelayConfiguration.defaults[keyPath: path]), range: range, example: nil,
                    apply: { config, text throws(ConfigurationError) in
                        guard let value = Int(text) else { throw invalid(env, text, "a whole number") }
                        config[keyPath: path] = value
                    }, number: { Double($0[keyPath: path]) })
    }

    /// A number (seconds, a rate) in `range`.
    static func number(_ env: String, _ flag: String, _ section: Section, _ path: Path<Double>, _ range: SettingRange,
                       _ help: String) -> ServeOption {
        ServeOption(env: env, flag: flag, section: section, help: help,
                    defaultText: SettingRange.number(RelayConfiguration.defaults[keyPath: path]), range: range, example: nil,
                    apply: { config, text throws(ConfigurationError) in
                        guard let value = Double(text), value.isFinite else { throw invalid(env, text, "a number") }
                        config[keyPath: path] = value
                    }, number: { $0[keyPath: path] })
    }

    /// Text with a default.
    static func text(_ env: String, _ flag: String, _ section: Section, _ path: Path<String>, _ help: String,
                     example: String? = nil) -> ServeOption {
        ServeOption(env: env, flag: flag, section: section, help: help, defaultText: RelayConfiguration.defaults[keyPath: path],
                    range: nil, example: example, apply: { config, text in config[keyPath: path] = text }, number: nil)
    }

    /// Text that is unset unless given (`accept` refuses malformed values).
    static func optional(_ env: String, _ flag: String?, _ section: Section, _ path: Path<String?>, _ help: String,
                         example: String? = nil, defaultText: String? = nil,
                         accept: (@Sendable (String) -> Bool)? = nil, wants: String = "") -> ServeOption {
        ServeOption(env: env, flag: flag, section: section, help: help, defaultText: defaultText, defaultIsValue: false,
                    range: nil, example: example, apply: { config, text throws(ConfigurationError) in
                        if let accept, !accept(text) { throw invalid(env, text, wants) }
                        config[keyPath: path] = text
                    }, number: nil)
    }

    /// Anything else: `apply` parses and sets.
    static func custom(_ env: String, _ flag: String?, _ section: Section, _ help: String, defaultText: String?,
                       describing: Bool = false, example: String? = nil,
                       _ apply: @escaping @Sendable (inout RelayConfiguration, String) throws(ConfigurationError) -> Void)
        -> ServeOption {
        ServeOption(env: env, flag: flag, section: section, help: help, defaultText: defaultText, defaultIsValue: !describing,
                    range: nil, example: example, apply: apply, number: nil)
    }
}
