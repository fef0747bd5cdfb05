/// Why the sealed layer refused something that is not a frame (frames have `FrameRejection`).
public enum SealedError: Error, Sendable, Equatable {
    /// Not the contract's shape (a field missing or of the wrong type, a key of the wrong size).
    case malformed(String)
    /// A roster this end does not accept, and why.
    case rosterRejected(String)
    /// An epoch package that is not this end's or does not open.
    case packageRejected(String)
    /// The robot's acceptance of a roster does not verify.
    case notAcceptedByRobot
}
