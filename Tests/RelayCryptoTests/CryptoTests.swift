import Testing
import RelayCore
@testable import RelayCrypto

@Suite struct HMACTests {
    /// RFC 2202 §3 test cases for HMAC-SHA1.
    static let rfc2202: [(key: [UInt8], data: [UInt8], digest: String)] = [
        ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8), "b617318655057264e28bc0b6fb378c8ef146be00"),
        (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50), "125d7342b9ac11cd91a39af48aa17b4f63f175d3"),
        (Array(1...25), [UInt8](repeating: 0xcd, count: 50), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"),
        ([UInt8](repeating: 0x0c, count: 20), Array("Test With Truncation".utf8), "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"),
        ([UInt8](repeating: 0xaa, count: 80), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
         "aa4ae5e15272d00e95705637ce8a3b55ed402112"),
        ([UInt8](repeating: 0xaa, count: 80),
         Array("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data".utf8),
         "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"),
    ]

    @Test(arguments: 0..<7)
    func rfc2202Vector(_ index: Int) {
        let vector = HMACTests.rfc2202[index]
        #expect(Hex.encode(Crypto.hmacSHA1(key: vector.key, message: vector.data)) == vector.digest)
    }

    /// The kept key gives the same MACs, message after message (re-initialised, not re-keyed).
    @Test(arguments: 0..<7)
    func keptKeyMatchesVector(_ index: Int) {
        let vector = HMACTests.rfc2202[index]
        let key = HMACSHA1Key(vector.key)
        for _ in 0..<3 { #expect(Hex.encode(key.mac(vector.data)) == vector.digest) }
        #expect(Hex.encode(key.mac([])) == Hex.encode(Crypto.hmacSHA1(key: vector.key, message: [])))
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA1("", "") is a well-known constant.
        #expect(Hex.encode(Crypto.hmacSHA1(key: [], message: [])) == "fbdb1d1b18aa6c08324b7d64b71fb76370690e1d")
    }
}

@Suite struct DigestAndEncodingTests {
    @Test func sha256Vectors() {
        #expect(Hex.encode(Crypto.sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hex.encode(Crypto.sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// RFC 4648 §10.
    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
                      ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")])
    func base64Vectors(_ plain: String, _ encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    @Test func base64URLSafeHasNoPaddingOrUnsafeCharacters() {
        let bytes: [UInt8] = [0xfb, 0xff, 0xbf, 0xfe]
        #expect(Base64.encode(bytes) == "+/+//g==")
        #expect(Base64.encodeURLSafe(bytes) == "-_-__g")
        #expect(Base64.decode("+/+//g==") == bytes)
    }

    /// One alphabet, padding only at the end, one encoding per value: what the robot library's
    /// `b64decode(validate=True)` refuses, and the non-canonical forms it would let through.
    @Test(arguments: ["-_-__g==", "+/+//g", "Zg", "Zg=", "Z===", "Zm=9v", "=Zm9", "Zm9v\n", "Zm 9v", "Zh==", "Zm9=",
                      "not base64!", "Zm9vYg==Zg=="])
    func base64RefusesAnythingButTheOneEncoding(_ text: String) {
        #expect(Base64.decode(text) == nil, "\(text)")
    }

    /// base64url without padding (the sealed household's B64), as strict as the standard decoder.
    @Test func base64URLSafeDecodesOnlyItsOneEncoding() {
        #expect(Base64.decodeURLSafe("-_-__g") == [0xfb, 0xff, 0xbf, 0xfe])
        #expect(Base64.decodeURLSafe("") == [])
        #expect(Base64.decodeURLSafe("Zm9vYmFy") == Array("foobar".utf8))
        for text in ["-_-__g==", "+/+//g", "Zh", "Z", "Zm9vY", "Zm 9v", "Zm9v\n"] {
            #expect(Base64.decodeURLSafe(text) == nil, "\(text)")
        }
    }

    @Test func hexRoundTrip() {
        #expect(Hex.encode([0, 1, 0xab, 0xff]) == "0001abff")
        #expect(Hex.decode("0001ABff") == [0, 1, 0xab, 0xff])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }

    @Test func constantTimeEquality() {
        #expect(Crypto.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!Crypto.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!Crypto.constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(Crypto.constantTimeEquals([], []))
    }
}

@Suite struct TokenGenerationTests {
    @Test func tokensCarryPrefixAndAtLeast256RandomBits() throws {
        let token = try BearerToken.generate(prefix: "wimz_r_")
        #expect(token.hasPrefix("wimz_r_"))
        let body = String(token.dropFirst("wimz_r_".count))
        #expect(body.count == 43)  // 32 bytes, base64url without padding
        let standard = String(body.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }) + "="
        #expect(Base64.decode(standard)?.count == 32)
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        #expect(body.allSatisfy { allowed.contains($0) })
    }

    @Test func tokensAreUnique() throws {
        var seen = Set<String>()
        for _ in 0..<1000 { seen.insert(try BearerToken.generate(prefix: "wimz_a_")) }
        #expect(seen.count == 1000)
    }

    @Test func digestIsSHA256OfTheToken() {
        #expect(BearerToken.digest("abc") == Crypto.sha256("abc"))
        #expect(BearerToken.digest("abc").count == 32)
    }

    @Test func uuidV4Format() throws {
        let id = try Crypto.uuidV4()
        let parts = id.split(separator: "-").map(\.count)
        #expect(parts == [8, 4, 4, 4, 12])
        #expect(Array(id)[14] == "4")
        #expect("89ab".contains(Array(id)[19]))
    }

    /// Version 7: the time in the first 48 bits, so ids of later milliseconds sort later as text
    /// (what keeps the audit log's unique index appending at its right edge).
    @Test func uuidV7CarriesItsMillisecondAndSortsByIt() throws {
        let ms: UInt64 = 0x0192_3456_789a
        let id = try Crypto.uuidV7(unixMilliseconds: ms).description
        #expect(id.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
        #expect(id.hasPrefix("01923456-789a-7"))
        #expect("89ab".contains(Array(id)[19]))
        let later = try (1...300).map { try Crypto.uuidV7(unixMilliseconds: ms + UInt64($0)).description }
        #expect(later == later.sorted())
        #expect(later.allSatisfy { $0 > id })
        #expect(Set(try (0..<300).map { _ in try Crypto.uuidV7(unixMilliseconds: ms) }).count == 300)
    }

    /// UUIDs drawn from the buffered randomness stay distinct across its refills (4 KiB: 256 a
    /// buffer) and from several threads at once.
    @Test func uuidsAreDistinctAcrossRefillsAndThreads() async throws {
        let ids = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { try (0..<600).map { _ in try Crypto.uuidV4() } } }
            return try await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(Set(ids).count == 2400)
        #expect(ids.allSatisfy { Array($0)[14] == "4" && "89ab".contains(Array($0)[19]) })
    }
}
