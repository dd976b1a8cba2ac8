import Foundation
import FuzzEntryPoints

/// libFuzzer's entry: one input per call. A trap in the code under test is the crash libFuzzer
/// reports; a broken promise (`FuzzFinding`) is made one here so the input is saved too.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ bytes: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let data = bytes.map { Data(bytes: $0, count: size) } ?? Data()
    do {
        try FuzzEntryPoints.controlCommand(data)
    } catch {
        fatalError("control-command: \(error)")
    }
    return 0
}
