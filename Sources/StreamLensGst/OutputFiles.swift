import CGStreamer
import CGstShim
import Foundation

/// The files a run writes through `filesink`, kept whole until there is something to write.
///
/// filesink opens (and truncates) its file when the pipeline goes to READY, before any source or
/// stage has started, so a run that fails to start — a model not installed, an input that is not
/// there, caps that do not meet — would destroy the user's existing file, or leave an empty new
/// one. Instead each such filesink writes to a hidden temporary name beside its target
/// (`.out.mp4.streamlens-PID.partial`, CGstShim/outputs.c). A new file takes its name when the
/// first buffer reaches the sink (a run that ends before any data leaves no file; after a
/// mid-stream error the output written so far is still finalized). An existing file is replaced
/// only after the pipeline stopped, by an output that was finished (end-of-stream reached the
/// sink and no write failed): a full disk or an aborted run leaves it as it was.
///
/// A file the user could not open for writing is refused before the run, as filesink refuses
/// it (renaming over it would replace it anyway); in a sticky folder (/tmp) another user's file
/// cannot be renamed over, so there filesink writes it itself. Only filesinks the spec places
/// itself (in the pipeline or a plain `bin`), writing a regular file or a new one, not appending.
final class OutputFiles {
    private struct Guarded {
        let reference: ObjectReference<GstElement>
        var element: UnsafeMutablePointer<GstElement> { reference.pointer }
        let target: String
        let temporary: String
        let existed: Bool
    }
    private var files: [Guarded] = []
    private var failedElements = Set<UnsafeMutableRawPointer>()

    init(elements: [UnsafeMutablePointer<GstElement>], pipeline: UnsafeMutablePointer<GstElement>) throws {
        for element in elements where sl_element_factory_name(element).map({ String(cString: $0) }) == "filesink" {
            guard Self.placedByTheSpec(element, pipeline: pipeline),
                  takeString(sl_object_get_as_string(element, "append")) != "true",
                  let location = takeString(sl_object_get_as_string(element, "location")), !location.isEmpty,
                  let target = Self.target(location) else { continue }
            let existed = access(target, F_OK) == 0
            if existed {
                guard access(target, W_OK) == 0 else {
                    let reason = String(cString: strerror(errno))
                    finish(finished: false)
                    throw HostError(.runtime, "\(objectName(element)): could not open file \"\(location)\" for writing: \(reason) (the file is left as it is)")
                }
                guard Self.renameable(target) else { continue }
            }
            let url = URL(fileURLWithPath: target)
            let temporary = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).streamlens-\(getpid()).partial").path
            let reference = ObjectReference(retaining: element)
            guard sl_output_file_guard(element, temporary, target, existed ? 1 : 0) != 0 else { continue }
            files.append(Guarded(reference: reference, target: target, temporary: temporary, existed: existed))
        }
    }

    /// The file to replace: `location` itself, or what a symbolic link there points to (the link
    /// stays); nil for what is not a regular file (a device, a FIFO, /dev/stdout): left to filesink.
    private static func target(_ location: String) -> String? {
        var info = stat()
        let absolute = URL(fileURLWithPath: location).standardizedFileURL.path
        guard stat(absolute, &info) == 0 else { return errno == ENOENT ? absolute : nil }
        guard info.st_mode & S_IFMT == S_IFREG else { return nil }
        return URL(fileURLWithPath: absolute).resolvingSymlinksInPath().path
    }

    /// False where a rename onto the existing `target` is refused though writing it is not: a
    /// sticky folder where neither the file nor the folder is ours.
    private static func renameable(_ target: String) -> Bool {
        var file = stat(), folder = stat()
        let uid = geteuid()
        guard uid != 0, stat(target, &file) == 0,
              stat(URL(fileURLWithPath: target).deletingLastPathComponent().path, &folder) == 0,
              folder.st_mode & S_ISVTX != 0 else { return true }
        return file.st_uid == uid || folder.st_uid == uid
    }

    private static func placedByTheSpec(_ element: UnsafeMutablePointer<GstElement>, pipeline: UnsafeMutablePointer<GstElement>) -> Bool {
        guard let parent = gst_object_get_parent(UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstObject.self)) else { return false }
        defer { gst_object_unref(parent) }
        let bin = UnsafeMutableRawPointer(parent).assumingMemoryBound(to: GstElement.self)
        return bin == pipeline || sl_element_factory_name(bin).map({ String(cString: $0) }) == "bin"
    }

    /// Messages name the file the user gave, not the temporary one.
    func userNames(in text: String) -> String {
        files.reduce(text) { $0.replacingOccurrences(of: $1.temporary, with: $1.target) }
    }

    /// An error message came from `element`: if it is one of ours, its file did not get
    /// written whole (a full disk) and must not replace an existing one.
    func noteError(from element: UnsafeMutableRawPointer?) {
        if let element { failedElements.insert(element) }
    }

    /// After the pipeline stopped: existing targets replaced by the outputs that were finished,
    /// temporary files no data reached removed; what went wrong, for the user. `failures` are
    /// the problems that leave the output elsewhere than the user asked (exit non-zero);
    /// `notes` the ones where the earlier file was kept. `pipelineStopped` false: the pipeline
    /// was left to a stuck state change (Pipeline+StateChange) and may yet move: its filesinks
    /// are told to write and move nothing more, and keep their records. `discard`: the outputs
    /// hold nothing of the run's (interrupted before any frame): unfinished ones are removed.
    @discardableResult
    func finish(finished runFinished: Bool = true, discard: Bool = false, pipelineStopped: Bool = true) -> (failures: [String], notes: [String]) {
        var failures: [String] = [], notes: [String] = []
        for file in files {
            if !pipelineStopped { sl_output_file_abandon(file.element) }
            let name = objectName(file.element)
            let state = sl_output_file_state(file.element)
            let failed = failedElements.contains(UnsafeMutableRawPointer(file.element))
            switch state {
            case Int32(SL_OUTPUT_NOTHING):
                unlink(file.temporary)
            case Int32(SL_OUTPUT_WRITING) where failed:
                unlink(file.temporary)
                notes.append("\(name): writing the new \(file.target) failed; the earlier file is kept as it was")
            case Int32(SL_OUTPUT_WRITING) where discard:
                unlink(file.temporary)
                notes.append("\(name): the earlier \(file.target) is kept as it was")
            case Int32(SL_OUTPUT_WRITING) where !runFinished || sl_output_file_ended(file.element) == 0:
                notes.append("\(name): the run ended before its output was finished; the earlier \(file.target) is kept as it was, the unfinished output is in \(file.temporary)")
            case Int32(SL_OUTPUT_WRITING):
                let error = sl_output_file_replace(file.element)
                if error != 0 {
                    failures.append("\(name): could not move \(file.temporary) onto \(file.target): \(String(cString: strerror(error))); the output is in \(file.temporary)")
                }
            case Int32(SL_OUTPUT_MOVED):
                break
            default:
                failures.append("\(name): could not move \(file.temporary) onto \(file.target): \(String(cString: strerror(-state))); the output is in \(file.temporary)")
            }
            if pipelineStopped { sl_output_file_release(file.element) }
        }
        files.removeAll() // their references go with them
        return (failures, notes)
    }
}
