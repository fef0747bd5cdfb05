// Made by scripts/generate.sh from the repository's VERSION file; CLITests fails while they differ.

/// The release this build is: `wimz-relay --version`, the `wimz_build_info` metric, the Debian
/// package's version (`VERSION`, the one source, is copied here by scripts/generate.sh).
public enum RelayVersion {
    public static let current = "1.2.0"
}
