/**
 * What the swarm router measures of each replica it routes to: requests in flight (what least-outstanding
 * routing picks by), answers by status class, failures to reach it, request duration, time to first
 * byte of the answer (for a streamed completion, the first token) and completion tokens: the
 * `usage.completion_tokens` an answer reports (a JSON answer's, or a stream's last chunk with
 * `stream_options.include_usage`), else a stream's chunks that carry text (OpenAI-compatible servers send
 * a token or a few per chunk). Of the router as a whole, also how long requests waited in it before a
 * replica took them (held while a swarm scaled to zero wakes). Served in Prometheus' text format at
 * `/_swarmplane/metrics`, and as counters (`totals`, each replica's among them) that the agent or the
 * counters file reports to the control plane.
 *
 * Hand-written rather than prom-client: six metric families over one label, and the agent ships as one
 * bundled file where a registry library (and its global default registry) is weight for nothing else.
 */

import { StringDecoder } from "node:string_decoder"

/** Histogram bounds in seconds: LLM answers run from milliseconds to minutes. */
export const DurationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

class Histogram {
  readonly counts = DurationBuckets.map(() => 0)
  count = 0
  sum = 0
  observe(seconds: number): void {
    this.count++
    this.sum += seconds
    const i = DurationBuckets.findIndex((b) => seconds <= b)
    if (i >= 0) this.counts[i]!++
  }
  /** The p-th percentile (0..1) as the upper bound of its bucket; undefined with no samples. */
  quantile(p: number): number | undefined {
    if (!this.count) return undefined
    const rank = Math.ceil(p * this.count)
    let seen = 0
    for (let i = 0; i < DurationBuckets.length; i++) {
      seen += this.counts[i]!
      if (seen >= rank) return DurationBuckets[i]
    }
    return Number.POSITIVE_INFINITY
  }
}

/** Requests in flight, and their area over time (in-flight × ms) since it was made. */
class InFlight {
  count = 0
  private areaMs = 0
  private since: number
  constructor(private readonly now: () => number) {
    this.since = now()
  }
  move(by: 1 | -1): void {
    const t = this.now()
    this.areaMs += this.count * (t - this.since)
    this.since = t
    this.count += by
  }
  /** The area up to now, in-flight × seconds. */
  busySeconds(): number {
    return (this.areaMs + this.count * (this.now() - this.since)) / 1000
  }
}

export interface UpstreamStats {
  /** Its requests in flight, and their area over time. */
  flight: InFlight
  /** Answers by status class (`2xx`, `4xx`, `5xx`, ...). */
  answers: Record<string, number>
  /** Requests that got no answer from it (unreachable, or it failed mid-request). */
  failures: number
  tokens: number
  duration: Histogram
  firstByte: Histogram
}

/** One request's passage through one replica. */
export interface Passage {
  /** The answer's head arrived. */
  answered(status: number, contentType: string | undefined): void
  /** A chunk of the answer's body went by (counted for first byte and tokens; never held). */
  chunk(data: Buffer): void
  /** The answer ended, whole or not. */
  done(): void
  /** No answer came (the request may go to another replica). */
  failed(): void
}

/** Bytes of a JSON answer kept to read its `usage`; a larger answer's tokens go uncounted. */
const MaxUsageBytes = 256 * 1024

/**
 * The router's counters since it started, over every replica it ever routed to (a replica's own series
 * ends with it; these never go down): what the agent reports for the swarm's metrics. The control plane
 * turns two of them into rates and percentiles over the time between.
 */
export interface RouterTotals {
  /** Requests answered to the end, and those that got no answer. */
  requests: number
  failures: number
  /** Answers by status class (`2xx`, `4xx`, `5xx`, ...). */
  answers: Record<string, number>
  /** Completion tokens (from usage, else counted in streamed text). */
  tokens: number
  /** Requests in flight now, over all replicas. */
  inFlight: number
  /**
   * Requests in flight integrated over time, seconds (two of these over the time between give the mean
   * number in flight then: what the control plane's autoscaler scales on).
   */
  busySeconds: number
  /** Requests held for want of a replica (a swarm scaled to zero, waking). */
  waiting: number
  /** Per-bucket counts of request duration and time to first byte (`DurationBuckets`, then above). */
  durationBuckets: number[]
  firstByteBuckets: number[]
  /** Per-bucket counts of the time requests waited in the router before a replica took them. */
  queueWaitBuckets: number[]
  /** Per replica routed to (the busiest `MaxReportedReplicas`), its counters. */
  replicas: ReplicaTotals[]
}

export interface ReplicaTotals {
  url: string
  inFlight: number
  requests: number
  failures: number
  answers5xx: number
  tokens: number
  busySeconds: number
  firstByteBuckets: number[]
}

/** Replicas reported at most (the control plane's bound). */
export const MaxReportedReplicas = 64

export function routerMetrics(now: () => number = () => performance.now()) {
  const stats = new Map<string, UpstreamStats>()
  const all = { failures: 0, tokens: 0, answers: {} as Record<string, number> }
  const allDuration = new Histogram()
  const allFirstByte = new Histogram()
  const queueWait = new Histogram()
  // Requests in flight over every replica, and their area since the start.
  const flight = new InFlight(now)
  const of = (upstream: string): UpstreamStats => {
    let s = stats.get(upstream)
    if (!s) {
      s = {
        flight: new InFlight(now),
        answers: {},
        failures: 0,
        tokens: 0,
        duration: new Histogram(),
        firstByte: new Histogram(),
      }
      stats.set(upstream, s)
    }
    return s
  }

  return {
    inFlight: (upstream: string) => stats.get(upstream)?.flight.count ?? 0,

    /** Start a request on `upstream`; every passage ends exactly once (`done` or `failed`). */
    begin(upstream: string): Passage {
      const s = of(upstream)
      s.flight.move(1)
      flight.move(1)
      const started = now()
      let ended = false
      let firstByteSeen = false
      let kind: "sse" | "json" | "other" = "other"
      const events = sseTokens()
      const held: Buffer[] = []
      let heldBytes = 0
      const end = () => {
        if (ended) return false
        ended = true
        s.flight.move(-1)
        flight.move(-1)
        return true
      }
      return {
        answered(status, contentType) {
          const cls = `${Math.floor(status / 100)}xx`
          s.answers[cls] = (s.answers[cls] ?? 0) + 1
          all.answers[cls] = (all.answers[cls] ?? 0) + 1
          kind = contentType?.startsWith("text/event-stream")
            ? "sse"
            : contentType?.startsWith("application/json")
              ? "json"
              : "other"
        },
        chunk(data) {
          if (!firstByteSeen) {
            firstByteSeen = true
            const seconds = (now() - started) / 1000
            s.firstByte.observe(seconds)
            allFirstByte.observe(seconds)
          }
          if (kind === "sse") events.push(data)
          else if (kind === "json" && heldBytes + data.length <= MaxUsageBytes) {
            held.push(data)
            heldBytes += data.length
          } else if (kind === "json") {
            kind = "other"
            held.length = 0
          }
        },
        done() {
          if (!end()) return
          const seconds = (now() - started) / 1000
          s.duration.observe(seconds)
          allDuration.observe(seconds)
          const tokens =
            kind === "json" && held.length
              ? completionTokens(Buffer.concat(held))
              : kind === "sse"
                ? events.tokens()
                : 0
          s.tokens += tokens
          all.tokens += tokens
        },
        failed() {
          if (!end()) return
          s.failures++
          all.failures++
        },
      }
    },

    /** A request waited this long in the router before a replica took it (or it gave up waiting). */
    queued(seconds: number): void {
      queueWait.observe(seconds)
    },

    /** Per replica, for the agent's report: in flight, answers, failures, tokens, p50/p99 seconds. */
    snapshot() {
      return [...stats].map(([upstream, s]) => ({
        upstream,
        inFlight: s.flight.count,
        answers: { ...s.answers },
        failures: s.failures,
        tokens: s.tokens,
        requests: s.duration.count,
        durationP50: s.duration.quantile(0.5),
        durationP99: s.duration.quantile(0.99),
        firstByteP50: s.firstByte.quantile(0.5),
        firstByteP99: s.firstByte.quantile(0.99),
      }))
    },

    /** The router's counters since it started (see `RouterTotals`). */
    totals(waiting = 0): RouterTotals {
      const buckets = (h: Histogram) => [...h.counts, h.count - h.counts.reduce((a, b) => a + b, 0)]
      return {
        requests: allDuration.count,
        failures: all.failures,
        answers: { ...all.answers },
        tokens: all.tokens,
        inFlight: flight.count,
        busySeconds: flight.busySeconds(),
        waiting,
        durationBuckets: buckets(allDuration),
        firstByteBuckets: buckets(allFirstByte),
        queueWaitBuckets: buckets(queueWait),
        replicas: [...stats]
          .sort(([, a], [, b]) => b.flight.count - a.flight.count || b.duration.count - a.duration.count)
          .slice(0, MaxReportedReplicas)
          .map(([url, st]) => ({
            url,
            inFlight: st.flight.count,
            requests: st.duration.count,
            failures: st.failures,
            answers5xx: st.answers["5xx"] ?? 0,
            tokens: st.tokens,
            busySeconds: st.flight.busySeconds(),
            firstByteBuckets: buckets(st.firstByte),
          })),
      }
    },

    /**
     * The replicas routed to now: each has its series from now on (zero until it answers), and those
     * no longer routed to (none in flight) are forgotten: their series stop.
     */
    retain(upstreams: readonly string[]): void {
      for (const [u, s] of stats) if (!upstreams.includes(u) && s.flight.count === 0) stats.delete(u)
      for (const u of upstreams) of(u)
    },

    /** The Prometheus text exposition (format 0.0.4). */
    prometheus(): string {
      const lines: string[] = []
      const family = (name: string, type: string, help: string) =>
        lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
      const label = (u: string) => `upstream="${u.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`
      family("swarmplane_router_in_flight", "gauge", "Requests being answered by the replica now.")
      for (const [u, s] of stats) lines.push(`swarmplane_router_in_flight{${label(u)}} ${s.flight.count}`)
      family("swarmplane_router_answers_total", "counter", "Answers from the replica, by status class.")
      for (const [u, s] of stats)
        for (const [code, n] of Object.entries(s.answers))
          lines.push(`swarmplane_router_answers_total{${label(u)},code="${code}"} ${n}`)
      family("swarmplane_router_failures_total", "counter", "Requests the replica did not answer.")
      for (const [u, s] of stats) lines.push(`swarmplane_router_failures_total{${label(u)}} ${s.failures}`)
      family("swarmplane_router_completion_tokens_total", "counter", "Completion tokens the replica sent.")
      for (const [u, s] of stats)
        lines.push(`swarmplane_router_completion_tokens_total{${label(u)}} ${s.tokens}`)
      const histogram = (name: string, help: string, pick: (s: UpstreamStats) => Histogram) => {
        family(name, "histogram", help)
        for (const [u, s] of stats) {
          const h = pick(s)
          let cumulative = 0
          DurationBuckets.forEach((b, i) => {
            cumulative += h.counts[i]!
            lines.push(`${name}_bucket{${label(u)},le="${b}"} ${cumulative}`)
          })
          lines.push(`${name}_bucket{${label(u)},le="+Inf"} ${h.count}`)
          lines.push(`${name}_sum{${label(u)}} ${h.sum}`, `${name}_count{${label(u)}} ${h.count}`)
        }
      }
      histogram(
        "swarmplane_router_request_duration_seconds",
        "Time to the end of the answer.",
        (s) => s.duration,
      )
      histogram(
        "swarmplane_router_first_byte_seconds",
        "Time to the first byte of the answer's body (a stream's first token).",
        (s) => s.firstByte,
      )
      family(
        "swarmplane_router_queue_wait_seconds",
        "histogram",
        "Time a request waited in the router before a replica took it (held while one wakes).",
      )
      {
        let cumulative = 0
        DurationBuckets.forEach((b, i) => {
          cumulative += queueWait.counts[i]!
          lines.push(`swarmplane_router_queue_wait_seconds_bucket{le="${b}"} ${cumulative}`)
        })
        lines.push(`swarmplane_router_queue_wait_seconds_bucket{le="+Inf"} ${queueWait.count}`)
        lines.push(
          `swarmplane_router_queue_wait_seconds_sum ${queueWait.sum}`,
          `swarmplane_router_queue_wait_seconds_count ${queueWait.count}`,
        )
      }
      return `${lines.join("\n")}\n`
    },
  }
}

export type RouterMetrics = ReturnType<typeof routerMetrics>

/**
 * A stream's completion tokens, read event by event as its chunks go by (an event may be cut between
 * chunks, a character between bytes): the usage it reports, else its chunks that carry text.
 */
function sseTokens() {
  const decoder = new StringDecoder("utf8")
  let partial = ""
  let chunks = 0
  let reported: number | undefined
  return {
    push(data: Buffer): void {
      const lines = (partial + decoder.write(data)).split("\n")
      partial = lines.pop() ?? ""
      for (const line of lines) {
        if (!line.startsWith("data:")) continue
        const payload = line.slice(5).trim()
        if (!payload || payload === "[DONE]") continue
        try {
          const event = JSON.parse(payload)
          const usage = event?.usage?.completion_tokens
          if (typeof usage === "number" && Number.isFinite(usage) && usage >= 0) reported = usage
          else if (carriesText(event)) chunks++
        } catch {
          // Not JSON: not an OpenAI-style event; nothing to count.
        }
      }
    },
    tokens: () => reported ?? chunks,
  }
}

const carriesText = (event: { choices?: { text?: unknown; delta?: { content?: unknown } }[] }) =>
  Array.isArray(event?.choices) &&
  event.choices.some((c) => {
    const text = c?.delta?.content ?? c?.text
    return typeof text === "string" && text !== ""
  })

/** `usage.completion_tokens` of a JSON answer, or 0. */
function completionTokens(body: Buffer): number {
  try {
    const n = JSON.parse(body.toString("utf8"))?.usage?.completion_tokens
    return typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : 0
  } catch {
    return 0
  }
}
