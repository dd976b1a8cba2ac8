import FuzzEntryPoints

/// libFuzzer's entry, one per executable (the symbol cannot be shared); the work is
/// FuzzEntryPoints.runLibFuzzerInput's.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ bytes: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzEntryPoints.runLibFuzzerInput("remote-tensors", bytes, size)
}
