/** Workers of `workers` backends: registration, heartbeats (liveness) and listing. */
import { createHmac, timingSafeEqual } from "node:crypto"
import type { Worker } from "../model/worker"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { VisibleError } from "../util/errors"
import { newId, randomToken } from "../util/ids"
import type { EventLog } from "./events"
import { Keys, ListIndex } from "./keys"
import { mutate, queryAll, type StateStore, type StoredItem, VersionConflictError } from "./port"

export type NewWorker = Omit<Worker, "id" | "project" | "health" | "lastSeen" | "registeredAt">

/** What a worker's credential check came to. */
export type CredentialCheck = "ok" | "wrong" | "unknown"

export function Workers(store: StateStore, clock: Clock, events: EventLog, pepper: string) {
  const hash = (credential: string) =>
    createHmac("sha256", pepper).update(`worker\n${credential}`).digest("hex")
  return {
    /**
     * Register a worker and the credential that alone may act as it: only its hash is kept, apart
     * from the worker (which is listed), and the credential is returned once, to the caller.
     */
    async register(project: string, input: NewWorker): Promise<{ worker: Worker; credential: string }> {
      const now = clock.now()
      const worker: Worker = {
        ...input,
        id: newId("w", now),
        project,
        health: "healthy",
        lastSeen: iso(now),
        registeredAt: iso(now),
      }
      const credential = `swc_${randomToken()}`
      await store.create({
        ...Keys.workerCredential(project, worker.id),
        type: "credential",
        data: hash(credential),
      })
      await store.create({
        ...Keys.worker(project, worker.id),
        type: "worker",
        data: worker,
        list: ListIndex.worker(project, worker.backendId, worker.id),
      })
      await events.record(project, Keys.worker(project, worker.id).pk, {
        entity: { kind: "worker", id: worker.id },
        to: "healthy",
        reason: "registered",
        message: `${worker.backendId}${worker.scaleGroup ? `/${worker.scaleGroup}` : ""}${worker.name ? ` on ${worker.name}` : ""}`,
      })
      return { worker, credential }
    },

    /** Whether `credential` is the one worker `id` got at registration (`unknown`: it has none). */
    async checkCredential(
      project: string,
      id: string,
      credential: string | undefined,
    ): Promise<CredentialCheck> {
      const stored = await store.get<string>(Keys.workerCredential(project, id), { consistent: true })
      if (!stored) return "unknown"
      if (!credential || credential.length > 256) return "wrong"
      const digest = hash(credential)
      return timingSafeEqual(Buffer.from(stored.data), Buffer.from(digest)) ? "ok" : "wrong"
    },

    /**
     * Record a heartbeat. A worker already marked dead is told so (410): its attempts were requeued, and
     * it must register again rather than come back silently.
     */
    async heartbeat(project: string, id: string, busy = true): Promise<Worker | undefined> {
      let dead = false
      const updated = await mutate<Worker>(store, Keys.worker(project, id), (item) => {
        if (item.data.health === "dead") {
          dead = true
          return undefined
        }
        const now = iso(clock.now())
        const { idleSince, ...rest } = item.data
        const data: Worker = {
          ...rest,
          health: "healthy",
          lastSeen: now,
          ...(busy ? {} : { idleSince: idleSince ?? now }),
        }
        return { ...item, data }
      })
      if (dead)
        throw new VisibleError("worker.dead", `worker "${id}" was declared dead; register again`, 410, {
          workerId: id,
        })
      return updated?.data
    },

    /**
     * A worker that shuts down on purpose leaves: it is dead at once (no new work is placed on it, and
     * the next reconcile pass requeues whatever it still held), instead of after the heartbeat grace.
     * Leaving twice is the same as once.
     */
    async leave(project: string, id: string, reason = "left", message?: string): Promise<Worker | undefined> {
      let from: Worker["health"] | undefined
      const updated = await mutate<Worker>(store, Keys.worker(project, id), (item) => {
        if (item.data.health === "dead") return undefined
        from = item.data.health
        return { ...item, data: { ...item.data, health: "dead", lastSeen: iso(clock.now()) } }
      })
      if (from !== undefined)
        await events.record(project, Keys.worker(project, id).pk, {
          entity: { kind: "worker", id },
          from,
          to: "dead",
          reason,
          ...(message ? { message } : {}),
        })
      return updated?.data
    },

    async get(project: string, id: string): Promise<Worker | undefined> {
      return (await store.get<Worker>(Keys.worker(project, id)))?.data
    },

    /** Stored workers of a project or backend, with versions (for conditional health changes). */
    async items(project: string, backendId: string): Promise<StoredItem<Worker>[]> {
      return queryAll((cursor) =>
        store.queryIndex<Worker>("list", ListIndex.workersOf(project), { cursor, skPrefix: `${backendId}#` }),
      )
    },

    /** Set a worker's health (and, when seeding, its lastSeen) if it has not changed meanwhile. */
    async setHealth(
      item: StoredItem<Worker>,
      health: Worker["health"],
      options: { seedAt?: string; fence?: number } = {},
    ): Promise<boolean> {
      try {
        await store.update({
          ...item,
          data: { ...item.data, health, ...(options.seedAt ? { lastSeen: options.seedAt } : {}) },
          ...(options.fence !== undefined ? { fence: options.fence } : {}),
        })
      } catch (error) {
        if (error instanceof VersionConflictError) return false
        throw error
      }
      if (health !== item.data.health)
        await events.record(item.data.project, Keys.worker(item.data.project, item.data.id).pk, {
          entity: { kind: "worker", id: item.data.id },
          from: item.data.health,
          to: health,
          reason: health === "dead" ? "heartbeat_missed" : "heartbeat",
        })
      return true
    },

    async remove(item: StoredItem<Worker>): Promise<void> {
      await store.delete(item, item.version).catch((error) => {
        if (!(error instanceof VersionConflictError)) throw error
      })
      const credential = await store.get(Keys.workerCredential(item.data.project, item.data.id))
      if (credential) await store.delete(credential, credential.version).catch(() => undefined)
    },

    /** Workers of a project, or of one backend. */
    async list(project: string, backendId?: string): Promise<Worker[]> {
      const items = await queryAll((cursor) =>
        store.queryIndex<Worker>("list", ListIndex.workersOf(project), {
          cursor,
          ...(backendId ? { skPrefix: `${backendId}#` } : {}),
        }),
      )
      return items.map((i) => i.data)
    },
  }
}
export type Workers = ReturnType<typeof Workers>
