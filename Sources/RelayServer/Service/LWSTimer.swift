import CLibWebSockets

/// A repeating timer on the lws service thread (an `lws_sorted_usec_list_t`), calling back
/// into Swift. The C struct lives in memory this object owns, followed by a pointer back to
/// the object, so the C callback can find it without globals.
final class LWSTimer {
    private let block: UnsafeMutableRawPointer
    private let action: () -> Void
    private let repeats: Bool
    private var context: OpaquePointer?
    private var intervalMicroseconds: Int64 = 0

    /// `repeats: false` for a one-shot armed with `schedule(context:after:)`.
    init(repeats: Bool = true, action: @escaping () -> Void) {
        self.action = action
        self.repeats = repeats
        let offset = MemoryLayout<lws_sorted_usec_list_t>.stride
        block = .allocate(byteCount: offset + MemoryLayout<UnsafeMutableRawPointer>.size,
                          alignment: MemoryLayout<lws_sorted_usec_list_t>.alignment)
        block.initializeMemory(as: UInt8.self, repeating: 0, count: offset + MemoryLayout<UnsafeMutableRawPointer>.size)
        (block + offset).storeBytes(of: Unmanaged.passUnretained(self).toOpaque(), as: UnsafeMutableRawPointer.self)
    }

    deinit {
        if context != nil { lws_sul_cancel(block.assumingMemoryBound(to: lws_sorted_usec_list_t.self)) }
        block.deallocate()
    }

    /// Fires every `interval` microseconds until `cancel()`.
    func start(context: OpaquePointer, interval: Int64) {
        self.context = context
        intervalMicroseconds = interval
        arm()
    }

    /// A one-shot timer: fires once, `delay` microseconds from now (0: on the loop's next pass,
    /// outside any socket's callback). Scheduling again before it fired moves it.
    func schedule(context: OpaquePointer, after delay: Int64) {
        self.context = context
        intervalMicroseconds = delay
        arm()
    }

    func cancel() {
        guard context != nil else { return }
        lws_sul_cancel(block.assumingMemoryBound(to: lws_sorted_usec_list_t.self))
        context = nil
    }

    private func arm() {
        guard let context else { return }
        lws_sul_schedule(context, 0, block.assumingMemoryBound(to: lws_sorted_usec_list_t.self), { sul in
            guard let sul else { return }
            let owner = (UnsafeMutableRawPointer(sul) + MemoryLayout<lws_sorted_usec_list_t>.stride)
                .load(as: UnsafeMutableRawPointer.self)
            let timer = Unmanaged<LWSTimer>.fromOpaque(owner).takeUnretainedValue()
            if timer.repeats { timer.arm() }
            timer.action()
        }, intervalMicroseconds)
    }
}
