// libFuzzer entry point for the FuzzChecks targets (built by scripts/fuzz.sh together with the
// RelayCore and RelayFuzzChecks sources; not part of the package). The target is chosen by
// WIMZ_FUZZ_TARGET; a broken invariant crashes, and libFuzzer keeps the input.
import Foundation

private let target: @Sendable ([UInt8]) -> String? = {
    let name = ProcessInfo.processInfo.environment["WIMZ_FUZZ_TARGET"] ?? ""
    guard let check = FuzzChecks.targets[name] else {
        fatalError("WIMZ_FUZZ_TARGET must be one of \(FuzzChecks.targets.keys.sorted())")
    }
    return check
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let failure = target(Array(UnsafeBufferPointer(start: data, count: size))) { fatalError(failure) }
    return 0
}
