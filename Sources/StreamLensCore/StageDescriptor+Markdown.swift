/// A stage's reference page in Markdown (`streamlens stages --markdown`, docs/stages/*.md), made
/// from the descriptor alone so the pages cannot say anything the code does not.
extension StageDescriptor {
    /// Title, summary, the runnable example, caps, the property tables and the keys.
    ///
    /// The bridge's properties (`BridgeSettings`) get a table of their own after the stage's:
    /// they are the same on every page and mean the same thing everywhere, so a reader looking
    /// for what this stage can do finds its own table without them, and a change to the bridge
    /// changes every page in the same place.
    public var markdown: String {
        var lines = ["# \(name)", "", summary, "", "```", "streamlens run '\(example)'", "```", ""]
        let output = isSink ? "none: a sink, it ends the pipeline" : capsPassthrough ? "the same as its input" : "its own"
        lines.append("Input caps: `\(sinkCaps)`; output caps: \(output)."
                     + (takesEncodedVideo ? " Encoded video: every frame is kept and passed on, whatever `mode` says (a dropped frame would spoil the ones after it until the next keyframe)." : ""))
        lines.append("")
        switch placement {
        case .inLine:
            lines.append("Runs in-line: on upstream's streaming thread, as each frame arrives (as a GStreamer transform does); its work is short and never waits, so nothing is queued or dropped. `thread=own` puts it on a thread of its own; `mode=live` does too.")
        case .ownThread:
            lines.append("Runs on a thread of its own, behind a bounded queue (lossless: 4 frames, upstream waits when it is full; live: the newest frame wins): its work can take long or wait. `thread=in-line` runs it on upstream's streaming thread instead.")
        }
        if let audioCaps {
            lines.append("")
            lines.append("Audio input: a second sink pad, `audio` (`… ! aacparse ! NAME.audio`, NAME the stage's `name`), caps `\(audioCaps)`; optional. The audio ends at the stage.")
        }
        lines.append("")
        lines.append("## Properties")
        lines.append("")
        lines += ownProperties.isEmpty ? ["Only those every stage has (below)."] : Self.markdownTable(ownProperties)
        lines.append("")
        lines.append("## Properties every stage has (the bridge)")
        lines.append("")
        lines += Self.markdownTable(BridgeSettings.table)
        if !keys.isEmpty {
            lines.append("")
            lines.append("## Keys in a preview window")
            lines.append("")
            lines.append("Each key is a `set` of a live property, as a `--control` command would do it.")
            lines.append("")
            lines.append("| key | action |")
            lines.append("|---|---|")
            var shown = Set<String>()
            for key in keys where shown.insert(key.label).inserted {
                lines.append("| \(Self.cell("`\(key.label)`")) | \(Self.cell(key.help)) |")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func markdownTable(_ properties: [PropertySpec]) -> [String] {
        var rows = ["| property | type / range | default | live | description |", "|---|---|---|---|---|"]
        for p in properties {
            let columns: [String]
            if p.readOnly {
                columns = ["`\(p.name)`", "reading (`get \(p.name)`)", "—", "—", p.help]
            } else {
                columns = ["`\(p.name)`", p.markdownType, "`\(p.defaultValue)`", p.live ? "yes" : "no", p.help]
            }
            rows.append("| " + columns.map(cell).joined(separator: " | ") + " |")
        }
        return rows
    }

    /// One table cell: a `|` would end the cell and a line break the row.
    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
    }
}

extension PropertySpec {
    /// The type column of a Markdown property table.
    var markdownType: String {
        switch kind {
        case .bool: return "bool"
        case .int(let r): return "int \(r.lowerBound)…\(r.upperBound)"
        case .double(let r): return "double \(r.lowerBound)…\(r.upperBound)"
        case .string: return "string"
        case .choice(let c): return "one of " + c.map { "`\($0)`" }.joined(separator: ", ")
        }
    }
}
