import Foundation
import Testing
import RelayFuzzChecks

/// Every seed and every crasher the fuzzers found (Tests/Fuzz/) stays a test of its target.
@Suite struct FuzzRegressionTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// (target, file) for each kept input: corpus/<target>/* and crashers/<target>-crash-*.
    static var inputs: [(String, URL)] {
        let files = FileManager.default
        var out: [(String, URL)] = []
        for target in FuzzChecks.targets.keys.sorted() {
            let corpus = fuzzDirectory.appendingPathComponent("corpus/\(target)")
            for name in (try? files.contentsOfDirectory(atPath: corpus.path)) ?? [] {
                out.append((target, corpus.appendingPathComponent(name)))
            }
        }
        let crashers = fuzzDirectory.appendingPathComponent("crashers")
        for name in (try? files.contentsOfDirectory(atPath: crashers.path)) ?? [] {
            guard let target = name.split(separator: "-").first.map(String.init), FuzzChecks.targets[target] != nil else { continue }
            out.append((target, crashers.appendingPathComponent(name)))
        }
        return out
    }

    @Test func everyKeptInputPassesItsCheck() throws {
        let inputs = Self.inputs
        #expect(inputs.count >= FuzzChecks.targets.count * 3, "seed corpus missing")
        for (target, file) in inputs {
            let bytes = [UInt8](try Data(contentsOf: file))
            #expect(FuzzChecks.targets[target]!(bytes) == nil, "\(target): \(file.lastPathComponent)")
        }
    }

    @Test func theChecksCatchWhatTheyGuard() {
        // A check that could never fail would make the fuzzers pointless.
        #expect(FuzzChecks.token(Array("/x?token=secret".utf8)) == nil)
        #expect(FuzzChecks.request(Array(("GET /" + String(repeating: "a", count: 100)).utf8)) == nil)
        #expect(FuzzChecks.envelope(Array(#"{"type":"command","id":"x"}"#.utf8)) == nil)
        #expect(FuzzChecks.appFrame(Array(#"{"type":"command","id":"x","data":[1,{"a":null}]}"#.utf8)) == nil)
    }
}
