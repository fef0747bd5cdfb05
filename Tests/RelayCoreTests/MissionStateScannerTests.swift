import Testing
@testable import RelayCore
import WimzProtocol

/// The hub's one-pass reader of a `mission_progress` frame agrees with `JSONReader` and
/// `MissionState(data:)` on every frame, plain or odd.
@Suite struct MissionStateScannerTests {
    func both(_ frame: String) -> (scanned: MissionState?, parsed: MissionState?) {
        let bytes = Array(frame.utf8)
        let scanned = bytes.withUnsafeBufferPointer { MissionStateScanner.state($0) }
        let parsed = (try? JSONReader.parse(bytes)).flatMap { MissionState(data: $0.member("data")) }
        return (scanned, parsed)
    }

    @Test func framesPlainAndOdd() {
        let frames = [
            #"{"type":"event","event":"mission_progress","data":{"status":"watching","trick":"sit","stage":2,"total_stages":5,"dog_name":"Rex","rewards":1,"progress":0.5,"target_sec":3}}"#,
            #" { "data" : { "status" : "success" , "stage" : 2.0 } , "type" : "event" } "#,
            #"{"type":"event","data":{"pad":"a\"b\\c{[","nested":{"status":"no","list":[1,{"x":"}"}]},"status":"watching"}}"#,
            #"{"data":{"status":"first","status":"second","stage":1,"stage":2}}"#,
            #"{"data":{"dog_name":"R\u00e9x","trick":"sit"}}"#,
            #"{"data":{"status":7,"stage":"2","progress":"half","rewards":1.5,"target_sec":-1.5e2,"trick":null,"dog_name":true}}"#,
            #"{"data":"not an object","status":"x"}"#,
            #"{"data":{"status":"a"},"data":{"status":"b"}}"#,
            #"{"type":"event"}"#,
            #"[1,2]"#,
            #"{"data":{"status":"a"}"#,
            #"{"data":{"status":"a"}} trailing"#,
            #"{"data":{"trick":"\#(String(repeating: "ü", count: 80))"}}"#,
            #"{"d\u0061ta":{"status":"escaped key"}}"#,
            #"{}"#,
            #"{"data":{}}"#,
        ]
        for frame in frames {
            let (scanned, parsed) = both(frame)
            #expect(scanned == parsed, "\(frame)")
        }
    }

    @Test func randomFramesAgree() {
        var generator = SystemRandomNumberGenerator()
        let values = [#""watching""#, "2", "2.5", "-3", "null", "true", #"{"k":[1,"]"]}"#, #"[]"#, #""e\"sc""#, #""lo\u00e9ng""#]
        let names = ["status", "trick", "stage", "total_stages", "dog_name", "rewards", "progress", "target_sec", "n", "pad"]
        for _ in 0..<500 {
            let members = (0..<Int.random(in: 0...8, using: &generator)).map { _ in
                #""\#(names.randomElement(using: &generator)!)":\#(values.randomElement(using: &generator)!)"#
            }
            let frame = #"{"type":"event","event":"mission_progress","data":{\#(members.joined(separator: ","))},"timestamp":"t"}"#
            let (scanned, parsed) = both(frame)
            #expect(scanned == parsed, "\(frame)")
        }
    }
}
