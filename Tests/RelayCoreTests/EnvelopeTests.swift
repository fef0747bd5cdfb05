import Testing
import WimzProtocol
@testable import RelayCore

@Suite struct EnvelopeTests {
    func scan(_ text: String) -> (Envelope, [UInt8]) {
        let bytes = Array(text.utf8)
        return (Envelope.scan(bytes), bytes)
    }

    func slice(_ bytes: [UInt8], _ range: Range<Int>?) -> String? {
        range.map { String(decoding: bytes[$0], as: UTF8.self) }
    }

    @Test(arguments: [
        (#"{"type":"event","event":"mode_changed","data":{}}"#, "mode_changed"),
        (#"{"event":"audio_state","type":"event"}"#, "audio_state"),
        (#" { "type" : "event" , "data" : {"event":"decoy","type":"command"} , "event" : "x" } "#, "x"),
    ])
    func events(_ text: String, _ name: String) {
        let (e, bytes) = scan(text)
        #expect(e.kind == .event)
        #expect(slice(bytes, e.eventName) == name)
    }

    @Test(arguments: [
        (#"{"type":"command","id":"7","command":"sit"}"#, #""7""#),
        (#"{"id":42,"type":"command"}"#, "42"),
        (#"{"type":"command","data":[1,{"id":"no"}],"id":"a\"b"}"#, #""a\"b""#),
    ])
    func commands(_ text: String, _ id: String) {
        let (e, bytes) = scan(text)
        #expect(e.kind == .command)
        #expect(slice(bytes, e.id) == id)
    }

    @Test func responsesAndOthers() {
        let (r, bytes) = scan(#"{"type":"response","id":"c12","ok":true}"#)
        #expect(r.kind == .response && slice(bytes, r.id) == #""c12""#)
        #expect(scan(#"{"type":"webrtc_offer","sdp":"…"}"#).0.kind == .other)
        #expect(scan(#"{"no_type":1}"#).0.kind == .other)
        #expect(scan(#"{"type":"command"}"#).0 == Envelope(kind: .command, eventName: nil, id: nil))
    }

    @Test(arguments: ["", "not json", "[1,2]", "\"str\"", "{", #"{"type":"#, #"{"type" "event"}"#, "{\"a\":\"unterminated"])
    func opaque(_ text: String) {
        #expect(scan(text).0.kind == .opaque)
    }

    @Test func damageAfterTheNeededFieldsStillRoutes() {
        // A frame whose type and event are readable is an event even if the rest is cut.
        #expect(scan(#"{"type":"event","event":"x","data":{"#).0.kind == .event)
    }
}

@Suite struct TokenBucketTests {
    @Test func burstThenRate() {
        var bucket = TokenBucket(rate: 20, burst: 40, now: 0)
        var allowed = 0
        for _ in 0..<100 where bucket.take(now: 0) { allowed += 1 }
        #expect(allowed == 40)
        do { let v = bucket.take(now: 10_000_000); #expect(!v) }  // 10 ms: 0.2 tokens
        do { let v = bucket.take(now: 50_000_000); #expect(v) }   // 50 ms: 1 token
        var later = 0
        for _ in 0..<100 where bucket.take(now: 10_000_000_000) { later += 1 }
        #expect(later == 40)  // capped at burst
    }
}

/// The scanner's type literals (StaticStrings, for the hot path) are WimzProtocol's names.
@Suite struct EnvelopeVocabularyTests {
    @Test func everyTypeTheScannerKnowsIsWimzProtocols() {
        let expected: [(String, Envelope.Kind)] = [
            (WimzProtocol.MessageType.event, .event), (WimzProtocol.MessageType.command, .command),
            (WimzProtocol.MessageType.response, .response), (WimzProtocol.MessageType.httpRequest, .httpRequest),
            (WimzProtocol.MessageType.httpResponse, .httpResponse), (WimzProtocol.MessageType.httpBody, .httpBody),
            (WimzProtocol.MessageType.error, .other),
        ]
        for (type, kind) in expected {
            let envelope = Envelope.scan(Array(#"{"type":"\#(type)","event":"e","id":"1"}"#.utf8))
            #expect(envelope.kind == kind, "\(type)")
        }
        #expect(Envelope.compactEventPrefix.description == #"{"type":"\#(WimzProtocol.MessageType.event)","event":""#)
    }
}

/// The compact-event fast path finds what the general scanner finds, or steps aside.
@Suite struct CompactEventTests {
    func general(_ text: String) -> Envelope {
        Array(text.utf8).withUnsafeBufferPointer { b in
            var scanner = Envelope.Scanner(bytes: b)
            return scanner.run()
        }
    }

    @Test(arguments: [
        #"{"type":"event","event":"bark_detected","data":{"n":1}}"#,
        #"{"type":"event","event":"","data":{}}"#,
        #"{"type":"event","event":"a\"b","data":{}}"#,     // an escape: the scanner decides
        #"{"type":"event","event":"cut"#,                  // no closing quote
        #"{"type":"event","event":"x","type":"command"}"#,
        #"{"type":"event","event":"é😀"}"#,
        #"{"type": "event", "event": "spaced"}"#,          // not the prefix: the scanner
        #"{"type":"event","event":"ok","data":{"s":"a\"b"}}"#,  // an escape after the name: still fast
        #"{"type":"event","event":"\"}"#,                 // a backslash first
    ])
    func agreesWithTheScanner(_ text: String) {
        let bytes = Array(text.utf8)
        let fast = bytes.withUnsafeBufferPointer { Envelope.compactEvent($0) }
        if let fast { #expect(fast == general(text)) }
        #expect(Envelope.scan(bytes) == general(text))
        let name = text.dropFirst(25).prefix { $0 != "\"" }
        #expect((fast != nil) == (text.hasPrefix(#"{"type":"event","event":""#) && !name.contains("\\")
                                  && text.dropFirst(25).contains("\"")))
    }
}

@Suite struct SendQueueTests {
    @Test func boundedByMessagesAndBytes() {
        var q = SendQueue(maxMessages: 3, maxBytes: 10)
        do { let v = q.push(Payload([1, 2, 3, 4])); #expect(v) }
        do { let v = q.push(Payload([1, 2, 3, 4])); #expect(v) }
        do { let v = q.push(Payload([1, 2, 3])); #expect(!v) }  // 11 bytes
        do { let v = q.push(Payload([1, 2])); #expect(v) }
        do { let v = q.push(Payload([])); #expect(!v) }  // 4th message
        #expect(q.count == 3 && q.bytes == 10)
        do { let v = q.popFirst()?.bytes.count; #expect(v == 4) }
        #expect(q.bytes == 6)
        var big = SendQueue(maxMessages: 3, maxBytes: 10)
        do { let v = big.push(Payload([UInt8](repeating: 0, count: 50))); #expect(v) }  // one oversized message into an empty queue
        do { let v = big.push(Payload([1])); #expect(!v) }
    }

    @Test func fifoAcrossCompaction() {
        var q = SendQueue(maxMessages: 10_000, maxBytes: 1 << 30)
        for i in 0..<500 { _ = q.push(Payload([UInt8(i & 0xff)])) }
        for i in 0..<300 { #expect(q.popFirst()?.bytes == [UInt8(i & 0xff)]) }
        for i in 500..<700 { _ = q.push(Payload([UInt8(i & 0xff)])) }
        for i in 300..<700 { #expect(q.popFirst()?.bytes == [UInt8(i & 0xff)]) }
        #expect(q.isEmpty && q.bytes == 0)
    }

    /// Random pushes and pops against an array: order, count and bytes, across wraps and growth.
    @Test func ringAgreesWithAnArray() {
        var q = SendQueue(maxMessages: 300, maxBytes: 1 << 30)
        var reference: [[UInt8]] = []
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            if Bool.random(using: &generator) || reference.isEmpty {
                let bytes = [UInt8](repeating: UInt8(step & 0xff), count: Int.random(in: 0..<4, using: &generator))
                if q.push(Payload(bytes)) { reference.append(bytes) } else { #expect(reference.count == 300) }
            } else {
                #expect(q.popFirst()?.bytes == reference.removeFirst())
            }
            #expect(q.count == reference.count && q.bytes == reference.reduce(0) { $0 + $1.count })
        }
    }
}
