/**
 * Readiness of a replica: poll its health path on loopback until it answers 200 (ready), give up after
 * a start timeout (the replica is then FAILED), and after it was ready, report it unready when it stops
 * answering for a while, and ready again when it comes back.
 */
import { setTimeout as sleep } from "node:timers/promises"

export interface HealthWatchOptions {
  /** The URL to probe, e.g. `http://127.0.0.1:8000/health`. */
  url: string
  /** Probe period before the first success. */
  startIntervalMs?: number
  /** Probe period once it has been ready: cheaper, since only long outages matter then. */
  readyIntervalMs?: number
  /** How long a replica may take to answer its first 200 (loading a model takes minutes). */
  startTimeoutMs?: number
  /** How long a ready replica may go without a 200 before it counts as unready. */
  unreadyAfterMs?: number
  probeTimeoutMs?: number
}

export type HealthEvent = "ready" | "unready" | "timeout"

export class HealthWatch {
  private readonly abort = new AbortController()
  ready = false

  constructor(
    private readonly options: HealthWatchOptions,
    private readonly onEvent: (event: HealthEvent) => void,
  ) {
    void this.run()
  }

  stop(): void {
    this.abort.abort()
  }

  private async run(): Promise<void> {
    const o = this.options
    const signal = this.abort.signal
    const started = Date.now()
    let everReady = false
    let lastOk = 0
    while (!signal.aborted) {
      const ok = await probe(o.url, o.probeTimeoutMs ?? 2000, signal)
      if (signal.aborted) return
      const now = Date.now()
      if (ok) {
        lastOk = now
        everReady = true
        if (!this.ready) this.change(true, "ready")
      } else if (!everReady && now - started >= (o.startTimeoutMs ?? 300_000)) {
        this.onEvent("timeout")
        return
      } else if (this.ready && now - lastOk >= (o.unreadyAfterMs ?? 10_000)) this.change(false, "unready")
      const wait = everReady ? (o.readyIntervalMs ?? 1000) : (o.startIntervalMs ?? 250)
      try {
        await sleep(wait, undefined, { signal })
      } catch {
        return
      }
    }
  }

  private change(ready: boolean, event: HealthEvent): void {
    this.ready = ready
    this.onEvent(event)
  }
}

/** One health probe: true on a 200, false on anything else (refused, timeout, other status). */
export async function probe(url: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  const timeout = AbortSignal.timeout(timeoutMs)
  try {
    const res = await fetch(url, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout })
    await res.body?.cancel()
    return res.status === 200
  } catch {
    return false
  }
}
