/**
 * A clock for the worker loop's tests: time moves only when a sleep ends, and every sleep asked for
 * is recorded, so a test checks what the worker asked to wait instead of timing it.
 */
import type { WorkerClock } from "../worker"

export interface AskedSleep {
  /** What was asked for. */
  ms: number
  /** The clock when it was asked. */
  at: number
  /** Still waiting, ended by time, or cut short by its signal (a kick, a shutdown). */
  state: "waiting" | "slept" | "cut"
}

/**
 * Sleeps of at most `autoMs` end on their own (on the next turn of the event loop, the clock moving
 * by what they asked); longer ones wait for `advance`, or for their signal. With `autoMs` 0 (the
 * default) the test moves time itself.
 */
export class TestClock implements WorkerClock {
  /** Every sleep asked for, in order. */
  readonly sleeps: AskedSleep[] = []
  private current = Date.parse("2026-01-01T00:00:00Z")
  private readonly waiting = new Set<{ until: number; end: () => void }>()

  constructor(private readonly autoMs = 0) {}

  now(): number {
    return this.current
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const asked: AskedSleep = { ms, at: this.current, state: "waiting" }
    this.sleeps.push(asked)
    return new Promise<void>((resolve, reject) => {
      const sleeper = {
        until: this.current + ms,
        end: () => {
          this.waiting.delete(sleeper)
          signal?.removeEventListener("abort", cut)
          asked.state = "slept"
          resolve()
        },
      }
      const cut = () => {
        this.waiting.delete(sleeper)
        asked.state = "cut"
        reject(signal?.reason)
      }
      if (signal?.aborted) return cut()
      signal?.addEventListener("abort", cut, { once: true })
      this.waiting.add(sleeper)
      if (ms <= this.autoMs)
        setImmediate(() => {
          if (asked.state === "waiting") this.advance(sleeper.until - this.current)
        })
    })
  }

  /** Move time on by `ms`, ending the sleeps that are then due. */
  advance(ms: number): void {
    this.current += Math.max(0, ms)
    for (const s of [...this.waiting]) if (s.until <= this.current) s.end()
  }

  /** The sleep the worker is in now, if any. */
  get asleep(): AskedSleep | undefined {
    return this.sleeps.findLast((s) => s.state === "waiting")
  }
}
