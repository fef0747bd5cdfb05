import Testing
import RelayCore

@Suite struct ReleaseVersionTests {
    @Test func parsesOnlyMajorMinorPatch() {
        #expect(ReleaseVersion("1.10.2")?.description == "1.10.2")
        for bad in ["", "1", "1.2", "1.2.3.4", "1.2.x", "1..3", "v1.2.3", "1.2.3~dev.4", " 1.2.3", "1.2.-3", "١.٢.٣"] {
            #expect(ReleaseVersion(bad) == nil, "\(bad)")
        }
    }

    @Test func ordersByNumberNotText() throws {
        let ordered = try ["0.9.9", "1.0.0", "1.0.10", "1.2.0", "1.10.0", "2.0.0"].map { try #require(ReleaseVersion($0)) }
        for (older, newer) in zip(ordered, ordered.dropFirst()) { #expect(older < newer) }
        #expect(ReleaseVersion.current == ReleaseVersion(RelayVersion.current))
    }
}
