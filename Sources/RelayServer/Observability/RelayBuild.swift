import CBuildStamp
import RelayCore

/// Which build this binary is: `wimz-relay --version`, `/healthz`, the `listening` log line and
/// the `wimz_build_info` metric all say it.
public enum RelayBuild {
    /// The package's version when scripts/package.sh built it (`1.2.0` on the release's tag,
    /// `1.2.0~dev.465+g002ac410d3` between releases); any other build is `VERSION~dev`, which
    /// sorts before the release it leads to and is never taken for it.
    public static let version: String = {
        guard let stamped = CBuildStamp_packageVersion() else { return RelayVersion.current + "~dev" }
        return String(cString: stamped)
    }()
}
