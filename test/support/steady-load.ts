/**
 * A steady request rate against a swarm's URL, for the serving load tests: a streamed chat completion
 * is started every `1000 / ratePerS` ms whatever the earlier ones do (an open loop, so a stall shows as
 * latency and failures, not as a lower rate), each read to its end. Results are kept per phase
 * (`mark("update 1")`), so the latencies during an update can be set beside those before it.
 */
/** The value at fraction `q` of sorted `ms` (nearest rank); 0 for none. */
function percentile(ms: number[], q: number): number {
  if (!ms.length) return 0
  return ms[Math.min(ms.length - 1, Math.max(0, Math.ceil(q * ms.length) - 1))]!
}

export interface PhaseFigures {
  phase: string
  requests: number
  failed: number
  p50Ms: number
  p99Ms: number
  maxMs: number
}

export interface SteadyLoad {
  /** From now on, requests count under `phase`. */
  mark(phase: string): void
  /** Stop starting requests, wait for those in flight, and return the figures per phase, in order. */
  stop(): Promise<{ phases: PhaseFigures[]; failures: string[] }>
}

export function steadyLoad(url: string, o: { ratePerS: number; stream?: boolean }): SteadyLoad {
  const stream = o.stream ?? true
  let phase = "before"
  const order = [phase]
  const results = new Map<string, { ms: number[]; failed: number }>([[phase, { ms: [], failed: 0 }]])
  const failures: string[] = []
  const inFlight = new Set<Promise<void>>()
  let n = 0

  const one = async (at: string) => {
    const started = performance.now()
    const i = n++
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ stream, messages: [{ role: "user", content: `request ${i}` }] }),
      })
      const text = await res.text()
      // A streamed answer is whole once its last event came; an unstreamed one names the prompt.
      const whole = stream ? text.includes("data: [DONE]") : text.includes(`request ${i}`)
      if (res.status !== 200 || !whole) throw new Error(`${res.status}: ${text.slice(0, 200)}`)
      results.get(at)!.ms.push(performance.now() - started)
    } catch (error) {
      results.get(at)!.failed++
      failures.push(`[${at}] request ${i}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const timer = setInterval(() => {
    const p = one(phase)
    inFlight.add(p)
    void p.finally(() => inFlight.delete(p))
  }, 1000 / o.ratePerS)

  return {
    mark(next) {
      phase = next
      if (!results.has(next)) {
        results.set(next, { ms: [], failed: 0 })
        order.push(next)
      }
    },
    async stop() {
      clearInterval(timer)
      await Promise.all([...inFlight])
      const phases = order.map((name) => {
        const r = results.get(name)!
        const ms = [...r.ms].sort((a, b) => a - b)
        return {
          phase: name,
          requests: ms.length + r.failed,
          failed: r.failed,
          p50Ms: percentile(ms, 0.5),
          p99Ms: percentile(ms, 0.99),
          maxMs: ms.at(-1) ?? 0,
        }
      })
      return { phases, failures }
    },
  }
}

/** The figures as a small table, for the test's output. */
export function phaseTable(phases: PhaseFigures[]): string {
  const rows = phases.map(
    (p) =>
      `${p.phase.padEnd(22)} ${String(p.requests).padStart(6)} ${String(p.failed).padStart(6)} ${p.p50Ms.toFixed(1).padStart(8)} ${p.p99Ms.toFixed(1).padStart(8)} ${p.maxMs.toFixed(1).padStart(8)}`,
  )
  return [
    `${"phase".padEnd(22)} ${"reqs".padStart(6)} ${"failed".padStart(6)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)} ${"max ms".padStart(8)}`,
    ...rows,
  ].join("\n")
}
