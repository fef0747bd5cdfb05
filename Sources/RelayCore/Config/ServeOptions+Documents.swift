/// The documents made from ``ServeOptions/all``: `serve --help`, the env example and the README's
/// table. `wimz-relay options --format env|markdown` prints them; ServeOptionsTests keeps the
/// committed files equal to them.
extension ServeOptions {
    /// The settings part of `wimz-relay serve --help`.
    public static var helpText: String {
        var lines = ["Every setting is a flag (--name value or --name=value) or its environment",
                     "variable; a flag wins over the variable. SIGTERM/SIGINT stop gracefully",
                     "(close 1001); SIGHUP re-reads the TLS certificate and the APNs key."]
        for section in ServeOption.Section.allCases {
            lines += ["", section.rawValue.uppercased() + ":"]
            for option in all where option.section == section {
                var where_ = [option.flag.map { "--\($0)" } ?? "(environment only)", option.env]
                if let value = option.defaultText { where_.append("default \(value)") }
                if let range = option.range { where_.append(range.text) }
                lines.append("  " + where_.joined(separator: ", "))
                lines += wrap(option.help, width: 70).map { "      " + $0 }
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `systemd/wimz-relay.env.example`: every setting; the ones each install must look at set,
    /// the others at their default and commented out (a later default then still applies).
    public static var envExample: String {
        var lines = ["# /etc/wimz-relay/wimz-relay.env — every setting of `wimz-relay serve` (flags win over these).",
                     "# Mode 0640, owner root, group wimz-relay (the package sets both): it holds secrets. Made by",
                     "# `wimz-relay options --format env`; the Debian package installs it as a conffile."]
        for section in ServeOption.Section.allCases {
            lines += ["", "# — \(section.rawValue) —"]
            for option in all where option.section == section {
                var comment = option.help
                if let range = option.range { comment += " (\(range.text))" }
                lines += wrap(comment, width: 98).map { "# " + $0 }
                if let example = option.example {
                    lines.append("\(option.env)=\(example)")
                } else {
                    lines.append("#\(option.env)=\(option.defaultIsValue ? option.defaultText ?? "" : "")")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The README's table of settings (between its `options:begin` and `options:end` markers).
    public static var markdownTable: String {
        var lines = ["| variable | flag | default | values | meaning |", "|---|---|---|---|---|"]
        for option in all {
            let cells = ["`\(option.env)`", option.flag.map { "`--\($0)`" } ?? "— (never on the command line)",
                         option.defaultText.map { option.defaultIsValue ? "`\($0)`" : $0 } ?? "—", option.range?.text ?? "", option.help]
            lines.append("| " + cells.map { $0.replacingPipes() }.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` in lines of at most `width` characters, broken at spaces.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}

extension String {
    /// `|` escaped for a Markdown table cell.
    fileprivate func replacingPipes() -> String {
        split(separator: "|", omittingEmptySubsequences: false).joined(separator: "\\|")
    }
}
