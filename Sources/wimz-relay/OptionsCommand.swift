import ArgumentParser
import RelayCore

/// `wimz-relay options`: the documents made from serve's table of settings — the env example
/// (`systemd/wimz-relay.env.example`) and the README's table (`scripts/generate.sh` writes both).
struct OptionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "options",
        abstract: "Print serve's settings as an env file (--format env) or a Markdown table (--format markdown).")

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case env, markdown, help
    }

    @Option(help: "env, markdown or help.") var format: Format = .env

    func run() {
        switch format {
        case .env: print(ServeOptions.envExample, terminator: "")
        case .markdown: print(ServeOptions.markdownTable, terminator: "")
        case .help: print(ServeOptions.helpText)
        }
    }
}
