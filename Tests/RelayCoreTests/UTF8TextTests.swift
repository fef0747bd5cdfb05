import Testing
@testable import RelayCore

/// `UTF8Text` (the relay's own RFC 6455 text check) against the standard library's validator.
@Suite struct UTF8TextTests {
    private func standard(_ bytes: [UInt8]) -> Bool { String(validating: bytes, as: UTF8.self) != nil }

    @Test func knownCases() {
        let cases: [([UInt8], Bool)] = [
            ([], true), (Array("plain ascii, longer than one word".utf8), true), (Array("Grüße 🐕 ½ €".utf8), true),
            ([0xC0, 0xAF], false),              // overlong '/'
            ([0xE0, 0x80, 0xAF], false),        // overlong, three bytes
            ([0xED, 0xA0, 0x80], false),        // a surrogate half
            ([0xF4, 0x90, 0x80, 0x80], false),  // past U+10FFFF
            ([0xF4, 0x8F, 0xBF, 0xBF], true),   // U+10FFFF
            ([0xE2, 0x82], false),              // cut short
            ([0x80], false), ([0xFF], false),
            (Array("12345678".utf8) + [0xC3], false),                    // cut short after a whole word
            (Array("1234567".utf8) + [0xC3, 0xA9] + Array("abcdefgh".utf8), true),  // across a word boundary
        ]
        for (bytes, valid) in cases {
            #expect(UTF8Text.isValid(bytes) == valid, "\(bytes)")
            #expect(standard(bytes) == valid, "\(bytes)")
        }
    }

    /// Messages longer than a block: one bad byte, or one good two-byte character, anywhere —
    /// in a whole block, in the overlapping last 32 bytes, or at the very end.
    @Test func oneByteAnywhereInALongMessage() {
        for length in 32...100 {
            for position in 0..<length {
                var bad = [UInt8](repeating: 0x61, count: length)
                bad[position] = 0x80
                #expect(!UTF8Text.isValid(bad), "0x80 at \(position) of \(length)")
                guard position + 1 < length else { continue }
                var good = bad
                good[position] = 0xC3
                good[position + 1] = 0xA9
                #expect(UTF8Text.isValid(good), "é at \(position) of \(length)")
            }
        }
    }

    /// Random mixes of ASCII runs and bytes from every class, at every alignment.
    @Test func agreesWithTheStandardLibrary() {
        var generator = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = [Array("abcdefghij".utf8), [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x90, 0x95],
                                 [0x80], [0xC3], [0xED, 0xB0, 0x80], [0xF5], [0xE0, 0x9F, 0x80], [0x7F]]
        for _ in 0..<20_000 {
            var bytes: [UInt8] = Array(repeating: 0x61, count: Int.random(in: 0..<9, using: &generator))
            for _ in 0..<Int.random(in: 0..<6, using: &generator) {
                bytes += pieces.randomElement(using: &generator)!
            }
            #expect(UTF8Text.isValid(bytes) == standard(bytes), "\(bytes)")
        }
    }
}
