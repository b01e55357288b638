/**
 * Rate limits per key: a token bucket per key id, kept in this API process (per instance; on Lambda,
 * per concurrent instance), on the injected clock. Over the limit a request gets 429 `rate_limited`
 * with `Retry-After` before anything reads its body or writes.
 *
 * Heartbeats and leaves do not starve: one worker key is shared by all of a project's agents (the local
 * plane's agents share one), so once a worker's credential has been accepted (a 200), its reports draw
 * on a bucket of their own, one per credential, and no longer on the key's. A runaway agent is held to
 * its own bucket; a report with a credential that was never accepted draws on the key's, so made-up
 * credentials cannot get around the key's limit.
 */
import { createHash } from "node:crypto"
import type { MiddlewareHandler } from "hono"
import { WorkerCredentialHeader } from "../model/worker-credential"
import type { Clock } from "../util/clock"
import { type ApiDeps, type ApiEnv, DefaultRateLimit, type RateLimitOptions } from "./context"
import { errorBody } from "./errors"

interface Bucket {
  tokens: number
  at: number
}

/** Full buckets are the same as no bucket: sweep them away at most this often (clock time). */
const sweepEveryMs = 60_000

/** Token buckets by id. `take` spends one token or says how long until one is back. */
export function TokenBuckets(clock: Clock, options: RateLimitOptions) {
  const buckets = new Map<string, Bucket>()
  let swept = clock.now()

  const refill = (bucket: Bucket, now: number) =>
    Math.min(options.burst, bucket.tokens + ((now - bucket.at) / 1000) * options.perSecond)

  /**
   * Drop buckets that have refilled (lossless: a full bucket is what a new one would be), every minute,
   * or every second while over `maxBuckets`; then, while still over, the least recently used.
   */
  function evict(now: number): void {
    const over = buckets.size > options.maxBuckets
    if (now - swept >= sweepEveryMs || (over && now - swept >= 1000)) {
      swept = now
      for (const [id, bucket] of buckets) if (refill(bucket, now) >= options.burst) buckets.delete(id)
    }
    for (const id of buckets.keys()) {
      if (buckets.size <= options.maxBuckets) break
      buckets.delete(id)
    }
  }

  return {
    take(id: string): { ok: true } | { ok: false; retryAfterS: number } {
      const now = clock.now()
      const bucket = buckets.get(id) ?? { tokens: options.burst, at: now }
      const tokens = refill(bucket, now)
      // Re-inserted on every use, so the map's order is least recently used first.
      buckets.delete(id)
      if (tokens < 1) {
        buckets.set(id, { tokens, at: now })
        return { ok: false, retryAfterS: Math.max(1, Math.ceil((1 - tokens) / options.perSecond)) }
      }
      buckets.set(id, { tokens: tokens - 1, at: now })
      evict(now)
      return { ok: true }
    },
    has: (id: string) => buckets.has(id),
    /** Start a full bucket for `id` unless it has one. */
    open(id: string): void {
      if (buckets.has(id)) return
      buckets.set(id, { tokens: options.burst, at: clock.now() })
      evict(clock.now())
    },
    size: () => buckets.size,
  }
}
export type TokenBuckets = ReturnType<typeof TokenBuckets>

const workerReport = /^\/v1\/workers\/[^/]+\/(heartbeat|leave)\/?$/

/** The middleware; after authentication (it needs the caller's key id), before idempotency and routes. */
export function rateLimit(deps: ApiDeps): MiddlewareHandler<ApiEnv> {
  if (deps.rateLimit === false) return (_c, next) => next()
  const options = { ...DefaultRateLimit, ...deps.rateLimit }
  const buckets = TokenBuckets(deps.clock, options)
  return async (c, next) => {
    const credential =
      c.req.method === "POST" && workerReport.test(c.req.path)
        ? c.req.header(WorkerCredentialHeader)
        : undefined
    // Only a digest of the credential is kept, never the secret itself.
    const own = credential
      ? `worker:${createHash("sha256").update(credential).digest("base64url")}`
      : undefined
    const id = own && buckets.has(own) ? own : `key:${c.get("caller").keyId}`
    const taken = buckets.take(id)
    if (!taken.ok)
      return c.json(
        errorBody(
          "rate_limited",
          `too many requests with this ${id === own ? "worker credential" : "key"}: at most ${options.perSecond} a second (bursts of ${options.burst}); retry after ${taken.retryAfterS} s`,
          { retryAfterS: taken.retryAfterS },
        ),
        429,
        { "Retry-After": String(taken.retryAfterS) },
      )
    await next()
    if (own && id !== own && c.res.status === 200) buckets.open(own)
  }
}
