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
}
