import Foundation

extension Pipeline {
    /// The control channel the options ask for (commands from stdin or a Unix socket), started;
    /// nil when they ask for none. An error starting it is logged and thrown.
    func startControl(_ options: Options) throws -> ControlChannel? {
        guard let source = options.control else { return nil }
        let channel = ControlChannel(pipeline: pipeline, echo: !options.quiet, access: options.controlAccess)
        do {
            try channel.start(source)
        } catch {
            log("error: \(error)")
            throw error
        }
        return channel
    }
}
