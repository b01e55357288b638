/**
 * Idempotency records for `Idempotency-Key` on POSTs: the first request with a key reserves it (a
 * conditional create) and stores its response when done; a repeat with the same request gets the same
 * response; the same key with a different request is refused. Records expire after `TtlHours`.
 *
 * Each record carries a `seed` that handlers use to derive object ids (`seededId`), so a retry of a
 * request that crashed half-way addresses the same objects instead of making new ones.
 */
import type { Clock } from "../util/clock"
import { randomToken } from "../util/ids"
import { Keys } from "./keys"
import { ItemExistsError, type StateStore, type StoredItem, VersionConflictError } from "./port"

export const TtlHours = 24
/** A reservation older than this with no response is taken over (its request died). */
export const StaleAfterMs = 60_000

interface IdempotencyRecord {
  fingerprint: string
  seed: string
  /** When the key was first reserved; ids derived from the seed use this time, on every retry. */
  createdAt: number
  /** When the current reservation began. */
  reservedAt: number
  response?: StoredResponse
}

/** A kept response. `body` is absent when it was too large to keep (the request still succeeded). */
export interface StoredResponse {
  status: number
  body?: string
  headers?: Record<string, string>
}

/** Which request: project, the API key that sent it, and the Idempotency-Key header. */
export interface Scope {
  project: string
  apiKeyId: string
  key: string
}

export type Reservation =
  | { kind: "new"; seed: string; createdAt: number }
  | ({ kind: "replay" } & StoredResponse)
  | { kind: "mismatch" }
  | { kind: "in_progress" }

export function Idempotency(store: StateStore, clock: Clock) {
  return {
    async reserve(scope: Scope, fingerprint: string): Promise<Reservation> {
      const itemKey = Keys.idempotency(scope.project, scope.apiKeyId, scope.key)
      for (let attempt = 0; attempt < 5; attempt++) {
        const now = clock.now()
        const fresh: IdempotencyRecord = {
          fingerprint,
          seed: randomToken(16),
          createdAt: now,
          reservedAt: now,
        }
        const existing = await store.get<IdempotencyRecord>(itemKey, { consistent: true })
        if (!existing) {
          try {
            await store.create({
              ...itemKey,
              type: "idempotency",
              data: fresh,
              ttl: Math.floor(now / 1000) + TtlHours * 3600,
            })
            return { kind: "new", seed: fresh.seed, createdAt: now }
          } catch (error) {
            if (error instanceof ItemExistsError) continue
            throw error
          }
        }
        const record = existing.data
        if (record.fingerprint !== fingerprint) return { kind: "mismatch" }
        if (record.response) return { kind: "replay", ...record.response }
        if (now - record.reservedAt < StaleAfterMs) return { kind: "in_progress" }
        // Take over a dead reservation, keeping its seed so the retry finds what the first try made.
        try {
          await store.update({
            ...existing,
            data: { ...record, reservedAt: now },
          } satisfies StoredItem<IdempotencyRecord>)
          return { kind: "new", seed: record.seed, createdAt: record.createdAt }
        } catch (error) {
          if (error instanceof VersionConflictError) continue
          throw error
        }
      }
      return { kind: "in_progress" }
    },

    /** Store the response of a reserved request. */
    async complete(scope: Scope, response: StoredResponse): Promise<void> {
      const itemKey = Keys.idempotency(scope.project, scope.apiKeyId, scope.key)
      const existing = await store.get<IdempotencyRecord>(itemKey, { consistent: true })
      if (!existing) return
      await store.update({ ...existing, data: { ...existing.data, response } })
    },

    /**
     * The request died on a server error: keep the record (and its seed) but end the reservation, so an
     * immediate retry takes it over and finishes the same objects.
     */
    async abandon(scope: Scope): Promise<void> {
      const itemKey = Keys.idempotency(scope.project, scope.apiKeyId, scope.key)
      const existing = await store.get<IdempotencyRecord>(itemKey, { consistent: true })
      if (!existing || existing.data.response) return
      await store.update({ ...existing, data: { ...existing.data, reservedAt: 0 } })
    },

    /** Forget a reservation whose request was refused (4xx), so the client may send a corrected one. */
    async release(scope: Scope): Promise<void> {
      await store.delete(Keys.idempotency(scope.project, scope.apiKeyId, scope.key))
    },
  }
}
export type Idempotency = ReturnType<typeof Idempotency>
