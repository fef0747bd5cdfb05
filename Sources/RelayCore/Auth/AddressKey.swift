#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key a per-address limit counts a client under: an IPv4 address as it is, an IPv6
/// address by its /64 (one subscriber's whole prefix: a client that walks through its /64 is
/// still one client), an IPv4-mapped IPv6 address as the IPv4 address it carries. Anything
/// else (a Unix socket's empty peer) counts as itself.
public enum AddressKey {
    public static func of(_ address: String) -> String {
        var v6 = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &v6) == 1 else { return address }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
        }
        var groups: [String] = []
        for k in stride(from: 0, to: 8, by: 2) { groups.append(String(UInt16(bytes[k]) << 8 | UInt16(bytes[k + 1]), radix: 16)) }
        return groups.joined(separator: ":") + "::/64"
    }
}
