/**
 * Live progress while waiting, on stderr (stdout stays for results): on a terminal, one line redrawn
 * in place with a spinner and the elapsed time; elsewhere (CI logs, pipes), one line per change.
 */
import { stripVTControlCharacters } from "node:util"
import type { Stream } from "./context"
import { duration, type Paint } from "./output"

export interface Progress {
  /** The current state in words; shown when it changed (or redrawn, on a terminal). */
  update(text: string): void
  /** Stop: clear the live line. */
  done(): void
}

const Frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

export function progress(stream: Stream, p: Paint, now: () => number = Date.now): Progress {
  const started = now()
  let text = ""
  if (!stream.isTTY) {
    return {
      update(next) {
        if (next !== text) stream.write(`${next}\n`)
        text = next
      },
      done() {},
    }
  }
  let frame = 0
  const draw = () => {
    const elapsed = duration(now() - started)
    const width = Math.max(20, (stream.columns || 80) - elapsed.length - 4)
    // Too long for one line: cut the plain text (a cut colour code would garble the terminal).
    const plain = stripVTControlCharacters(text)
    const shown = plain.length > width ? `${plain.slice(0, width - 1)}…` : text
    stream.write(`\r\x1b[2K${p.cyan(Frames[frame++ % Frames.length] ?? "")} ${shown} ${p.dim(elapsed)}`)
  }
  const timer = setInterval(draw, 120)
  return {
    update(next) {
      text = next
      draw()
    },
    done() {
      clearInterval(timer)
      stream.write("\r\x1b[2K")
    },
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
