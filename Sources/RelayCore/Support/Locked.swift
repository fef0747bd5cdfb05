import Foundation

/// A value shared between threads behind a lock. NSLock (a pthread mutex) rather than the
/// standard library's `Synchronization.Mutex`: ThreadSanitizer sees pthread locking, but not
/// the futex inside `Mutex`, so every `Mutex`-guarded value showed up as a data race there.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The value as it is now, read under the lock and not written back. Read a closure this way,
    /// never as `withLock { $0 }`: a function-typed value passed `inout` through this generic
    /// class is wrapped in a reabstraction thunk on the way in and another on the way back, and
    /// the wrapped closure is what is stored again — it grows two thunks per read, and calling
    /// it walks them all (the token lookups' wake-up did that: 75 % of a cold storm's service
    /// thread, and in time a stack overflow).
    public var current: Value {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
