/**
 * A bounded tail of a process's output: the last `maxLines` lines and at most `maxBytes` characters,
 * so a chatty task never grows the agent's memory and a heartbeat carries only what is useful.
 */

export interface LogRingOptions {
  maxLines?: number
  maxBytes?: number
}

export class LogRing {
  private readonly maxLines: number
  private readonly maxBytes: number
  private lines: string[] = []
  private bytes = 0
  /** The unfinished last line; kept apart so a line split across chunks is counted once. */
  private partial = ""
  /** Bumped on every append, so a reader can tell whether anything changed since it last looked. */
  version = 0

  constructor(options: LogRingOptions = {}) {
    this.maxLines = options.maxLines ?? 200
    this.maxBytes = options.maxBytes ?? 64 * 1024
  }

  /**
   * Append decoded output (stdout and stderr interleave in arrival order; the caller decodes each
   * stream with its own decoder so a character split across chunks stays whole).
   */
  write(text: string): void {
    if (text.length === 0) return
    this.version++
    const parts = (this.partial + text).split("\n")
    this.partial = parts.pop() ?? ""
    for (const line of parts) this.push(line)
    // A line with no newline in sight must not grow without bound either.
    if (this.partial.length > this.maxBytes) this.partial = this.partial.slice(-this.maxBytes)
    this.trim()
  }

  /** Append a line written by the agent itself (e.g. why it stopped the process). */
  note(line: string): void {
    this.write(`${this.partial ? "\n" : ""}[swarmplane-agent] ${line}\n`)
  }

  /** The tail as text, at most `maxChars` characters, cut at a line start when it has to be cut. */
  text(maxChars = this.maxBytes): string {
    const all = this.lines.join("\n") + (this.lines.length ? "\n" : "") + this.partial
    if (all.length <= maxChars) return all
    const cut = all.slice(-maxChars)
    const newline = cut.indexOf("\n")
    return newline >= 0 && newline < cut.length - 1 ? cut.slice(newline + 1) : cut
  }

  private push(line: string): void {
    this.lines.push(line)
    this.bytes += line.length + 1
  }

  private trim(): void {
    while (
      this.lines.length > 0 &&
      (this.lines.length + (this.partial ? 1 : 0) > this.maxLines ||
        this.bytes + this.partial.length > this.maxBytes)
    ) {
      const dropped = this.lines.shift() ?? ""
      this.bytes -= dropped.length + 1
    }
  }
}
