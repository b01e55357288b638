/** Test helpers: poll a condition with a deadline (never a fixed sleep), and find processes by marker. */
import { commandLine, livingProcesses } from "../process-group"

/** Resolve with the first truthy value of `check`, polled every `everyMs`; reject at the deadline. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  { timeoutMs = 20_000, everyMs = 25 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

/** Pids of living (not zombie) `sleep <marker>` processes. */
export function livingSleeps(marker: string): number[] {
  return livingProcesses((stat) => commandLine(stat.pid) === `sleep ${marker}`).map((s) => s.pid)
}

/** A marker unique to one test, usable as a `sleep` duration: `sleep 1000.123456` sleeps ~17 min. */
export function sleepMarker(): string {
  return `1000.${Math.floor(Math.random() * 1e6)
    .toString()
    .padStart(6, "0")}`
}
