/// RFC 6455 frame headers (§5.2), written and read in one place for every end that frames by
/// hand: the relay's writer (server frames, unmasked, many per write), the benchmark's load
/// generator (client frames, masked) and the tests' client.
///
///     0               1               2               3
///     |F|   |opcode | |M| length(7) | length(16/64, if 126/127) | masking key (if M) |
public enum WebSocketFrame {
    public static let text: UInt8 = 0x1
    public static let binary: UInt8 = 0x2
    public static let close: UInt8 = 0x8
    public static let ping: UInt8 = 0x9
    public static let pong: UInt8 = 0xA

    /// The largest header: 2 bytes, a 64-bit length and a masking key.
    public static let maxHeaderSize = 14

    /// The size of the header of a `payloadLength`-byte frame.
    @inlinable
    public static func headerSize(payloadLength: Int, masked: Bool = false) -> Int {
        (payloadLength < 126 ? 2 : payloadLength < 65536 ? 4 : 10) + (masked ? 4 : 0)
    }

    /// Writes a frame's header at `out` (room for `headerSize` bytes) and returns its size: FIN
    /// unless `fin` is false, `opcode`, the length, and `mask` as the masking key when given (the
    /// caller masks the payload with it).
    @inlinable
    public static func writeHeader(opcode: UInt8, payloadLength: Int, fin: Bool = true, mask: [UInt8]? = nil,
                                   to out: UnsafeMutablePointer<UInt8>) -> Int {
        out[0] = (fin ? 0x80 : 0) | opcode
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        var size: Int
        if payloadLength < 126 {
            out[1] = maskBit | UInt8(payloadLength)
            size = 2
        } else if payloadLength < 65536 {
            out[1] = maskBit | 126
            out[2] = UInt8(payloadLength >> 8)
            out[3] = UInt8(payloadLength & 0xff)
            size = 4
        } else {
            out[1] = maskBit | 127
            for k in 0..<8 { out[2 + k] = UInt8((UInt64(payloadLength) >> (56 - 8 * UInt64(k))) & 0xff) }
            size = 10
        }
        if let mask {
            for k in 0..<4 { out[size + k] = mask[k] }
            size += 4
        }
        return size
    }

    /// A frame's header as bytes (for callers that build frames in arrays).
    public static func header(opcode: UInt8, payloadLength: Int, fin: Bool = true, mask: [UInt8]? = nil) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: maxHeaderSize) { buffer, count in
            count = writeHeader(opcode: opcode, payloadLength: payloadLength, fin: fin, mask: mask, to: buffer.baseAddress!)
        }
    }

    /// A header as read from the wire.
    public struct Header: Sendable, Equatable {
        public var fin: Bool
        public var opcode: UInt8
        public var masked: Bool
        public var payloadLength: Int
        /// Bytes of the header, the masking key included.
        public var size: Int

        @inlinable
        public init(fin: Bool, opcode: UInt8, masked: Bool, payloadLength: Int, size: Int) {
            self.fin = fin
            self.opcode = opcode
            self.masked = masked
            self.payloadLength = payloadLength
            self.size = size
        }
    }

    /// Reads the header at the start of `bytes`; nil while it is incomplete.
    @inlinable
    public static func readHeader(_ bytes: UnsafeBufferPointer<UInt8>) -> Header? {
        guard bytes.count >= 2 else { return nil }
        let masked = bytes[1] & 0x80 != 0
        var length = Int(bytes[1] & 0x7f)
        var size = 2
        if length == 126 {
            guard bytes.count >= 4 else { return nil }
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            size = 4
        } else if length == 127 {
            guard bytes.count >= 10 else { return nil }
            length = 0
            for k in 0..<8 { length = length << 8 | Int(bytes[2 + k]) }
            size = 10
        }
        if masked { size += 4 }
        guard bytes.count >= size else { return nil }
        return Header(fin: bytes[0] & 0x80 != 0, opcode: bytes[0] & 0x0f, masked: masked, payloadLength: length, size: size)
    }
}
