/// Numbers written as JSON digits straight into the output: `String(Int64)` and `String(Double)`
/// build a string first, and a double's shortest-digits search costs thousands of instructions
/// (audit details carry several numbers per connection).
extension JSONValue {
    /// Appends `value` in decimal, exactly as `String(value)` spells it.
    static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        appendDecimal(value.magnitude, to: &out)
    }

    /// Appends `value` in decimal, exactly as `String(value)` spells it.
    static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
        var rest = value
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Appends `value` as `String(value)` spells it (non-finite values as `null`). Values that
    /// are a whole number of thousandths — durations rounded to the millisecond — are written
    /// from their integer: `12.345`, `0.5`, `3.0` (String's shortest round-trip digits for them,
    /// held to it by JSONValueTests); anything else goes through `String`.
    static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else { return append("null", to: &out) }
        let thousandths = (value * 1000).rounded()
        guard value.sign == .plus, value < 1e12, Double(Int64(thousandths)) / 1000 == value else {
            return append(String(value), to: &out)
        }
        let whole = Int64(thousandths) / 1000
        var fraction = Int64(thousandths) % 1000
        appendDecimal(whole, to: &out)
        out.append(UInt8(ascii: "."))
        var width = 3
        while width > 1, fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        var divisor: Int64 = width == 3 ? 100 : width == 2 ? 10 : 1
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        }
    }
}
