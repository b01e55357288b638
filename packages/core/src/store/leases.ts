/**
 * Leases of the control loop: one holder per (backend, name) at a time, taken with a conditional put
 * that carries an expiry, and a fencing token that grows with every new holder. Writes made under a
 * lease carry the token (`StoredItem.fence`), so a holder that stalled past its expiry and resumes can
 * no longer overwrite what the next holder wrote.
 */
import type { Clock } from "../util/clock"
import { Keys } from "./keys"
import { ItemExistsError, type StateStore, type StoredItem, VersionConflictError } from "./port"

interface LeaseData {
  owner: string
  token: number
  expiresAt: number
  /** When the previous holder last finished a pass: a long gap means the control loop was away. */
  lastPassAt?: number
}

export interface Lease {
  project: string
  backendId: string
  name: string
  owner: string
  /** The fencing token: larger than every earlier holder's. */
  token: number
  expiresAt: number
  /** When the previous holder last finished a pass (undefined on the first). */
  lastPassAt?: number
}

/** A holder acts under its lease only while this much of it is left (the expiry seen on another clock). */
export const LeaseMarginMs = 5_000

/** The last clock time at which `lease`'s holder may still act under it. */
export const actsUntil = (lease: Pick<Lease, "expiresAt">) => lease.expiresAt - LeaseMarginMs

export function Leases(store: StateStore, clock: Clock) {
  return {
    /** Take the lease if it is free or expired; undefined while anyone holds it. `owner` is for diagnosis only. */
    async acquire(
      project: string,
      backendId: string,
      name: string,
      owner: string,
      ttlMs: number,
    ): Promise<Lease | undefined> {
      const key = Keys.lease(project, backendId, name)
      const now = clock.now()
      const current = await store.get<LeaseData>(key, { consistent: true })
      // A live lease is nobody else's to take, not even a holder with the same name: every pass is its own holder.
      if (current && current.data.expiresAt > now) return undefined
      const data: LeaseData = {
        owner,
        token: (current?.data.token ?? 0) + 1,
        expiresAt: now + ttlMs,
        ...(current?.data.lastPassAt !== undefined ? { lastPassAt: current.data.lastPassAt } : {}),
      }
      try {
        if (current) await store.update({ ...current, data } satisfies StoredItem<LeaseData>)
        else await store.create({ ...key, type: "lease", data })
      } catch (error) {
        if (error instanceof VersionConflictError || error instanceof ItemExistsError) return undefined
        throw error
      }
      return {
        project,
        backendId,
        name,
        owner,
        token: data.token,
        expiresAt: data.expiresAt,
        lastPassAt: data.lastPassAt,
      }
    },

    /** Whether the lease is still ours to act under (with `marginMs` to spare). */
    valid(lease: Lease, marginMs = LeaseMarginMs): boolean {
      return clock.now() < lease.expiresAt - marginMs
    },

    /** Give the lease up (if still ours), recording when the pass finished. */
    async release(lease: Lease): Promise<void> {
      const key = Keys.lease(lease.project, lease.backendId, lease.name)
      const current = await store.get<LeaseData>(key, { consistent: true })
      if (!current || current.data.token !== lease.token) return
      try {
        await store.update({ ...current, data: { ...current.data, expiresAt: 0, lastPassAt: clock.now() } })
      } catch (error) {
        if (!(error instanceof VersionConflictError)) throw error
      }
    },
  }
}
export type Leases = ReturnType<typeof Leases>
