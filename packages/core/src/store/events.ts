/**
 * Event log: every state change is written as an event item beside the object it is about (same
 * partition, sk `E#<time-sortable id>`), kept for `EventRetentionDays`, and logged as one readable line.
 */
import type { Event } from "../model/event"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { newId, seededFirstId } from "../util/ids"
import type { Logger } from "../util/logger"
import { Keys } from "./keys"
import { ItemExistsError, type Page, type StateStore } from "./port"

export const EventRetentionDays = 30
/** Lines logged for a batch of events before the rest are summed up in one line. */
const ShownPerBatch = 5

export type NewEvent = Omit<Event, "id" | "at">

/** One readable line, e.g. `job job-01k… PENDING → RUNNING (placed)`. */
export function formatEvent(project: string, e: NewEvent): string {
  const change = e.from && e.from !== e.to ? `${e.from} → ${e.to}` : e.to
  return `${project} ${e.entity.kind} ${e.entity.id} ${change} (${e.reason}${e.message ? `: ${e.message}` : ""})`
}

export function EventLog(store: StateStore, clock: Clock, logger: Logger) {
  const jobPk = (project: string, id: string) => Keys.job(project, id).pk
  const swarmPk = (project: string, name: string) => Keys.swarm(project, name).pk
  /** Events, each under its partition, in batches of 25 (their keys are fresh ids); logs the first few. */
  const writeMany = async (project: string, all: { pk: string; event: NewEvent }[]): Promise<void> => {
    if (!all.length) return
    const now = clock.now()
    const ttl = Math.floor(now / 1000) + EventRetentionDays * 86_400
    await store.createMany(
      all.map(({ pk, event }) => {
        const full: Event = { ...event, id: newId("ev", now), at: iso(now) }
        return { ...Keys.event(pk, full.id), type: "event", data: full, ttl }
      }),
    )
    for (const { event } of all.slice(0, ShownPerBatch)) logger.info(formatEvent(project, event))
    if (all.length > ShownPerBatch)
      logger.info(`${project} … and ${all.length - ShownPerBatch} more like these`)
  }
  return {
    /**
     * A job's change, kept in the job's partition. `once`: a change that is made at most once (a job's
     * creation, at its time): its event gets an id from the job and `once`, so a retry that records it
     * again writes nothing new.
     */
    job(
      project: string,
      id: string,
      change: Omit<NewEvent, "entity">,
      once?: { key: string; at: string },
    ): Promise<Event> {
      const fixed = once && {
        id: seededFirstId("ev", Date.parse(once.at), `${project}/${id}#${once.key}`),
        at: once.at,
      }
      return this.record(project, jobPk(project, id), { entity: { kind: "job", id }, ...change }, fixed)
    },

    /** Changes of a job's tasks (`entity.id` is `<job>/<index>`), kept in the job's partition. */
    tasks(project: string, jobId: string, changes: NewEvent[]): Promise<void> {
      return this.recordMany(project, jobPk(project, jobId), changes)
    },

    /** Changes of many jobs' tasks, each in its job's partition, written together (25 a batch). */
    tasksOfJobs(project: string, changes: { jobId: string; events: NewEvent[] }[]): Promise<void> {
      return writeMany(
        project,
        changes.flatMap(({ jobId, events }) => events.map((event) => ({ pk: jobPk(project, jobId), event }))),
      )
    },

    /** A swarm's change, kept in the swarm's partition. */
    swarm(project: string, name: string, change: Omit<NewEvent, "entity">): Promise<Event> {
      return this.record(project, swarmPk(project, name), { entity: { kind: "swarm", id: name }, ...change })
    },

    /** A job's events (its own and its tasks'), oldest first. */
    ofJob(project: string, id: string, options: { limit?: number; cursor?: string } = {}) {
      return this.list(jobPk(project, id), options)
    },

    /** A swarm's events, oldest first. */
    ofSwarm(project: string, name: string, options: { limit?: number; cursor?: string } = {}) {
      return this.list(swarmPk(project, name), options)
    },

    /**
     * Write an event under partition `pk` and log it. Tried up to 3 times: its id is made once, so a try
     * that finds it written (an earlier try landed, or `fixed` was recorded before) is done.
     */
    async record(
      project: string,
      pk: string,
      event: NewEvent,
      fixed?: { id: string; at: string },
    ): Promise<Event> {
      const now = clock.now()
      const full: Event = { ...event, id: fixed?.id ?? newId("ev", now), at: fixed?.at ?? iso(now) }
      const item = {
        ...Keys.event(pk, full.id),
        type: "event",
        data: full,
        ttl: Math.floor(now / 1000) + EventRetentionDays * 86_400,
      }
      for (let tries = 1; ; tries++) {
        try {
          await store.create(item)
          break
        } catch (error) {
          if (error instanceof ItemExistsError) return full // recorded (and logged) before
          if (tries >= 3) throw error
        }
      }
      logger.info(formatEvent(project, event), {
        project,
        entity: event.entity,
        to: event.to,
        reason: event.reason,
      })
      return full
    },

    /**
     * Write many events under one partition in batches of 25 (their keys are fresh ids), e.g. one per
     * task a cancel killed. Logs a line for each of the first few and one line for the rest.
     */
    async recordMany(project: string, pk: string, batch: NewEvent[]): Promise<void> {
      await writeMany(
        project,
        batch.map((event) => ({ pk, event })),
      )
    },

    /** Events of one partition, oldest first. */
    async list(
      pk: string,
      options: { limit?: number; cursor?: string } = {},
    ): Promise<{ items: Event[]; cursor?: string }> {
      const page: Page<Event> = await store.query<Event>(pk, { skPrefix: "E#", ...options })
      return { items: page.items.map((i) => i.data), cursor: page.cursor }
    },
  }
}
export type EventLog = ReturnType<typeof EventLog>
