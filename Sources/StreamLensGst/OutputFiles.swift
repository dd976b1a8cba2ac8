import CGStreamer
import CGstShim
import Foundation

/// The files a run writes through `filesink`, kept whole until there is something to write.
///
/// filesink opens (and truncates) its file when the pipeline goes to READY, before any source or
/// stage has started, so a run that fails to start — a model not installed, an input that is not
/// there, caps that do not meet — would destroy the user's existing file, or leave an empty new
/// one. Instead each such filesink writes to a hidden temporary name beside its target
/// (`.out.mp4.streamlens-PID.partial`), renamed onto the target when the first buffer reaches
/// the sink (CGstShim/outputs.c): a run that ends before any data leaves the old file exactly as
/// it was and no new file; once data flows the run behaves as before (after a mid-stream error the
/// output written so far is still finalized). Only filesinks the spec places itself (in the
/// pipeline or a plain `bin`), writing a regular file or a new one, and not appending.
final class OutputFiles {
    private struct Guarded {
        let element: UnsafeMutablePointer<GstElement>
        let target: String
        let temporary: String
    }
    private var files: [Guarded] = []

    init(elements: [UnsafeMutablePointer<GstElement>], pipeline: UnsafeMutablePointer<GstElement>) {
        for element in elements where sl_element_factory_name(element).map({ String(cString: $0) }) == "filesink" {
            guard Self.placedByTheSpec(element, pipeline: pipeline),
                  takeString(sl_object_get_as_string(element, "append")) != "true",
                  let location = takeString(sl_object_get_as_string(element, "location")), !location.isEmpty,
                  let target = Self.target(location) else { continue }
            let url = URL(fileURLWithPath: target)
            let temporary = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).streamlens-\(getpid()).partial").path
            gst_object_ref(element)
            guard sl_output_file_guard(element, temporary, target) != 0 else { gst_object_unref(element); continue }
            files.append(Guarded(element: element, target: target, temporary: temporary))
        }
    }

    deinit {
        for file in files { gst_object_unref(file.element) }
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

    /// After the pipeline stopped: removes the temporary files no data reached (the targets stay
    /// as they were); problems for the user (a rename that failed leaves the data where it is).
    func finish() -> [String] {
        var problems: [String] = []
        for file in files {
            let state = sl_output_file_state(file.element)
            if state == 0 {
                unlink(file.temporary)
            } else if state < 0 {
                problems.append("\(objectName(file.element)): could not move \(file.temporary) onto \(file.target): \(String(cString: strerror(-state))); the output is in \(file.temporary)")
            }
        }
        files.forEach { gst_object_unref($0.element) }
        files.removeAll()
        return problems
    }
}
