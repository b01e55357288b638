/**
 * A swarm's metrics from its router's counters: the samples kept (one every `SampleEveryMs` at most,
 * the last `KeepMs`), and what they say over recent windows: requests per second, the share that
 * failed, latency and time-to-first-token percentiles, tokens per second. Pure.
 *
 * A router's counters only grow while its process lives; a new process (`startedAt` changes) starts
 * from zero, so the change across a restart is what the new process counted.
 */
import { type ReplicaCounters, RouterBuckets, type RouterCounters, type RouterSample } from "../model/worker"

/** At most one sample this often: a heartbeat every second locally must not write every second. */
export const SampleEveryMs = 10_000
/** How far back samples are kept: the longest window, and a sample before it. */
export const KeepMs = 16 * 60_000

/** The windows reported, by name. */
export const Windows = { "1m": 60_000, "5m": 5 * 60_000, "15m": 15 * 60_000 } as const

/** `samples` with `sample` added, or undefined when the last is too recent for another. */
export function withSample(
  samples: readonly RouterSample[],
  sample: RouterSample,
): RouterSample[] | undefined {
  const last = samples.at(-1)
  // Requests that start to wait for a replica (a swarm scaled to zero) are news at once: they wake it.
  const wakes = (sample.waiting ?? 0) > 0 && (last?.waiting ?? 0) === 0
  if (last && !wakes && sample.at - last.at < SampleEveryMs && last.startedAt === sample.startedAt)
    return undefined
  const kept = [...samples.filter((s) => s.at >= sample.at - KeepMs && s.at < sample.at), sample]
  // Per-replica counters only on the last two samples (what the per-replica figures read): the rest
  // of the history keeps the swarm's totals, so its size does not grow with the replicas.
  return kept.map((s, i) => {
    if (i >= kept.length - 2 || !s.replicas) return s
    const { replicas: _, ...rest } = s
    return rest
  })
}

export interface WindowFigures {
  /** The time the figures cover, seconds (shorter than the window while samples are few). */
  seconds: number
  requests: number
  requestsPerS: number
  /** Failed requests and 5xx answers over all requests; undefined with none. */
  errorRate?: number
  /** Percentiles as the upper bound of their bucket, seconds; undefined with no requests. */
  latencyP50S?: number
  latencyP99S?: number
  ttftP50S?: number
  ttftP99S?: number
  queueWaitP50S?: number
  queueWaitP99S?: number
  tokensPerS: number
}

/** A counter's growth (never below 0). */
const minus = (a: number, b: number | undefined) => Math.max(0, a - (b ?? 0))

/** What happened between two samples (a restart in between: what the new process counted). */
export function delta(from: RouterSample, to: RouterSample): RouterCounters {
  if (to.startedAt !== from.startedAt) return to
  const classes = new Set([...Object.keys(from.answers), ...Object.keys(to.answers)])
  return {
    startedAt: to.startedAt,
    requests: minus(to.requests, from.requests),
    failures: minus(to.failures, from.failures),
    answers: Object.fromEntries(
      [...classes].map((c) => [c, minus(to.answers[c] ?? 0, from.answers[c] ?? 0)]),
    ),
    tokens: minus(to.tokens, from.tokens),
    inFlight: to.inFlight,
    ...(to.busySeconds !== undefined ? { busySeconds: minus(to.busySeconds, from.busySeconds ?? 0) } : {}),
    durationBuckets: to.durationBuckets.map((n, i) => minus(n, from.durationBuckets[i] ?? 0)),
    firstByteBuckets: to.firstByteBuckets.map((n, i) => minus(n, from.firstByteBuckets[i] ?? 0)),
    ...(to.queueWaitBuckets
      ? { queueWaitBuckets: to.queueWaitBuckets.map((n, i) => minus(n, from.queueWaitBuckets?.[i] ?? 0)) }
      : {}),
  }
}

/** The p-th percentile (0..1) of bucket counts, as its bucket's upper bound (the last: above the top). */
export function quantile(counts: readonly number[], p: number): number | undefined {
  const total = counts.reduce((a, b) => a + b, 0)
  if (!total) return undefined
  const rank = Math.ceil(p * total)
  let seen = 0
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0
    if (seen >= rank) return RouterBuckets[i] ?? Number.POSITIVE_INFINITY
  }
  return Number.POSITIVE_INFINITY
}

/** The figures of each window ending at the last sample; none without two samples in it. */
export function windowFigures(
  samples: readonly RouterSample[],
): Partial<Record<keyof typeof Windows, WindowFigures>> {
  const last = samples.at(-1)
  if (!last) return {}
  const out: Partial<Record<keyof typeof Windows, WindowFigures>> = {}
  for (const [name, ms] of Object.entries(Windows) as [keyof typeof Windows, number][]) {
    // From the sample nearest the window's start: the oldest inside it, or the one just before it.
    const start: number = last.at - ms
    const inside: RouterSample | undefined = samples.find((s) => s.at >= start)
    const before: RouterSample | undefined = samples.filter((s) => s.at < start).at(-1)
    const first: RouterSample | undefined =
      before && (!inside || start - before.at < inside.at - start) ? before : inside
    if (!first || first === last) continue
    const sum: RouterCounters = {
      startedAt: last.startedAt,
      requests: 0,
      failures: 0,
      answers: {},
      tokens: 0,
      inFlight: last.inFlight,
      durationBuckets: last.durationBuckets.map(() => 0),
      firstByteBuckets: last.firstByteBuckets.map(() => 0),
      queueWaitBuckets: last.firstByteBuckets.map(() => 0),
    }
    const span = samples.slice(samples.indexOf(first))
    for (let i = 1; i < span.length; i++) {
      const d = delta(span[i - 1]!, span[i]!)
      sum.requests += d.requests
      sum.failures += d.failures
      sum.tokens += d.tokens
      for (const [c, n] of Object.entries(d.answers)) sum.answers[c] = (sum.answers[c] ?? 0) + n
      d.durationBuckets.forEach((n, j) => {
        sum.durationBuckets[j] = (sum.durationBuckets[j] ?? 0) + n
      })
      d.firstByteBuckets.forEach((n, j) => {
        sum.firstByteBuckets[j] = (sum.firstByteBuckets[j] ?? 0) + n
      })
      d.queueWaitBuckets?.forEach((n, j) => {
        sum.queueWaitBuckets![j] = (sum.queueWaitBuckets![j] ?? 0) + n
      })
    }
    const seconds = (last.at - first.at) / 1000
    const attempted = sum.requests + sum.failures
    const errors = sum.failures + (sum.answers["5xx"] ?? 0)
    out[name] = {
      seconds,
      requests: sum.requests,
      requestsPerS: sum.requests / seconds,
      ...(attempted ? { errorRate: errors / attempted } : {}),
      ...optional("latencyP50S", quantile(sum.durationBuckets, 0.5)),
      ...optional("latencyP99S", quantile(sum.durationBuckets, 0.99)),
      ...optional("ttftP50S", quantile(sum.firstByteBuckets, 0.5)),
      ...optional("ttftP99S", quantile(sum.firstByteBuckets, 0.99)),
      ...optional("queueWaitP50S", quantile(sum.queueWaitBuckets ?? [], 0.5)),
      ...optional("queueWaitP99S", quantile(sum.queueWaitBuckets ?? [], 0.99)),
      tokensPerS: sum.tokens / seconds,
    }
  }
  return out
}

const optional = <K extends string>(key: K, value: number | undefined) =>
  (value === undefined ? {} : { [key]: value }) as Partial<Record<K, number>>

/** One step of the series: what happened between two consecutive samples, at the later one's time. */
export interface SeriesPoint {
  at: number
  requestsPerS: number
  errorRate?: number
  latencyP99S?: number
  tokensPerS: number
}

/** The samples as a series of steps (oldest first), for a chart of the last 15 minutes. */
export function series(samples: readonly RouterSample[]): SeriesPoint[] {
  const out: SeriesPoint[] = []
  for (let i = 1; i < samples.length; i++) {
    const from = samples[i - 1]!
    const to = samples[i]!
    const seconds = (to.at - from.at) / 1000
    if (seconds <= 0) continue
    const d = delta(from, to)
    const attempted = d.requests + d.failures
    const p99 = quantile(d.durationBuckets, 0.99)
    out.push({
      at: to.at,
      requestsPerS: d.requests / seconds,
      ...(attempted ? { errorRate: (d.failures + (d.answers["5xx"] ?? 0)) / attempted } : {}),
      ...(p99 !== undefined ? { latencyP99S: p99 } : {}),
      tokensPerS: d.tokens / seconds,
    })
  }
  return out
}

/** One replica's figures between the router's last two samples. */
export interface ReplicaFigures {
  url: string
  /** The time the figures cover, seconds. */
  seconds: number
  /** Requests in flight at the last sample, and on average between the two. */
  inFlight: number
  meanInFlight?: number
  requestsPerS: number
  errorRate?: number
  ttftP50S?: number
  ttftP99S?: number
  tokensPerS: number
}

/**
 * Per replica, what happened between the last two samples (a replica new since the first counts from
 * zero; a router restarted in between, from its start). Empty without two samples.
 */
export function replicaFigures(samples: readonly RouterSample[]): ReplicaFigures[] {
  const last = samples.at(-1)
  const before = samples.at(-2)
  if (!last?.replicas || !before) return []
  const seconds = (last.at - before.at) / 1000
  if (seconds <= 0) return []
  const restarted = last.startedAt !== before.startedAt
  const earlier = new Map((restarted ? [] : (before.replicas ?? [])).map((r) => [r.url, r]))
  return last.replicas.map((r: ReplicaCounters) => {
    const e = earlier.get(r.url)
    const requests = minus(r.requests, e?.requests)
    const failures = minus(r.failures, e?.failures)
    const attempted = requests + failures
    const errors = failures + minus(r.answers5xx ?? 0, e?.answers5xx)
    const firstByte = r.firstByteBuckets.map((n, i) => minus(n, e?.firstByteBuckets[i]))
    return {
      url: r.url,
      seconds,
      inFlight: r.inFlight,
      ...(r.busySeconds !== undefined
        ? { meanInFlight: minus(r.busySeconds, e?.busySeconds) / seconds }
        : {}),
      requestsPerS: requests / seconds,
      ...(attempted ? { errorRate: errors / attempted } : {}),
      ...optional("ttftP50S", quantile(firstByte, 0.5)),
      ...optional("ttftP99S", quantile(firstByte, 0.99)),
      tokensPerS: minus(r.tokens, e?.tokens) / seconds,
    }
  })
}
