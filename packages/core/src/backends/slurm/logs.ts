/**
 * Output tails of many tasks in one command: each file's tail after a marker line, split again here.
 * Pure; the backend runs the command.
 */
import type { LogTail } from "../protocol"
import { sh } from "./script"

const LogMarker = "@@swarmplane:log@@"

/** One command that prints the last `tail` (+1, to tell truncation) lines of each file, each after its marker. */
export function logsCommand(paths: string[], tail: number): string {
  return paths
    .map((path, i) => `echo ${LogMarker}${i}; tail -n ${tail + 1} ${sh(path)} 2>/dev/null || true`)
    .join("\n")
}

/** `count` output tails from one command's stdout, split at the markers it printed before each. */
export function splitLogs(stdout: string, count: number): string[][] {
  const out: string[][] = Array.from({ length: count }, () => [])
  let current = -1
  for (const line of stdout.replace(/\n$/, "").split("\n")) {
    if (line.startsWith(LogMarker)) current = Number(line.slice(LogMarker.length))
    else if (current >= 0 && current < count) out[current]!.push(line)
  }
  return out
}

/** The tails of `files` (an attempt with no output file yet gets none) from the command's stdout. */
export function tailsOf(
  files: { attemptUid: string; path?: string }[],
  stdout: string,
  tail: number,
  updatedAt: string,
): LogTail[] {
  const texts = splitLogs(stdout, files.filter((f) => f.path).length)
  let next = 0
  return files.map((f) => {
    if (!f.path) return { attemptUid: f.attemptUid, lines: [], truncated: false }
    const lines = texts[next++]!
    return { attemptUid: f.attemptUid, lines: lines.slice(-tail), truncated: lines.length > tail, updatedAt }
  })
}
