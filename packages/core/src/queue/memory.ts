/**
 * In-memory ScheduleQueue with SQS semantics, for unit tests and the single-process local control
 * plane: visibility timeouts measured on an injected clock, receive counts, a dead-letter list a
 * message moves to once it has been received `maxReceiveCount` times without being deleted, and long
 * polls (`waitS`) that return as soon as a message is sent or becomes visible again.
 */
import { randomUUID } from "node:crypto"
import { type Clock, systemClock } from "../util/clock"
import {
  checkDelays,
  type ReceivedMessage,
  type ReceiveOptions,
  type ScheduleQueue,
  type ScheduleRequest,
} from "./port"

export interface MemoryQueueOptions {
  /** Receives before a message is dead-lettered. Default 5. */
  maxReceiveCount?: number
  /** Visibility timeout when `receive` does not pass one, seconds. Default 30 (SQS's default). */
  visibilityS?: number
  clock?: Clock
}

/** A message as the queue holds it, for inspection by tests. */
export interface QueuedMessage {
  id: string
  body: string
  receiveCount: number
  /** Clock time (ms) from which the message can be received; at or before now means visible. */
  visibleAt: number
}

export interface MemoryQueue extends ScheduleQueue {
  /** Messages still in the queue, visible or in flight, in send order. */
  pending(): QueuedMessage[]
  /** Messages moved to the dead-letter list, in the order they were moved. */
  deadLetters(): QueuedMessage[]
}

interface Entry extends QueuedMessage {
  /** Receipt of the latest receive; older receipts no longer act on the message, as in SQS. */
  receipt?: string
}

export function MemoryQueue(opts: MemoryQueueOptions = {}): MemoryQueue {
  const maxReceiveCount = opts.maxReceiveCount ?? 5
  const defaultVisibilityS = opts.visibilityS ?? 30
  const clock = opts.clock ?? systemClock
  // Map keeps insertion order, so delivery follows send order, which keeps tests readable.
  const messages = new Map<string, Entry>()
  const byReceipt = new Map<string, string>()
  const dead: QueuedMessage[] = []
  /** Wake-ups of the receives long-polling now: a send or a release calls them all. */
  const waiting = new Set<() => void>()
  const wakeAll = () => {
    for (const wake of waiting) wake()
    waiting.clear()
  }

  const snapshot = ({ id, body, receiveCount, visibleAt }: Entry): QueuedMessage => ({
    id,
    body,
    receiveCount,
    visibleAt,
  })

  /** The entry a receipt currently controls, if it still is the message's latest receipt. */
  function held(receipt: string): Entry | undefined {
    const id = byReceipt.get(receipt)
    const entry = id === undefined ? undefined : messages.get(id)
    return entry?.receipt === receipt ? entry : undefined
  }

  function forget(entry: Entry): void {
    if (entry.receipt !== undefined) byReceipt.delete(entry.receipt)
    messages.delete(entry.id)
  }

  /**
   * Dead-letter visible messages that used up their receives. SQS does this when it would deliver
   * the message again; doing it on every observation gives the same answers without timers.
   */
  function sweep(now: number): void {
    for (const entry of [...messages.values()]) {
      if (entry.visibleAt <= now && entry.receiveCount >= maxReceiveCount) {
        forget(entry)
        dead.push(snapshot(entry))
      }
    }
  }

  /** Receive up to `max` of the messages visible at `now`. */
  function take(now: number, options: ReceiveOptions): ReceivedMessage[] {
    sweep(now)
    const visibleAt = now + (options.visibilityS ?? defaultVisibilityS) * 1000
    const out: ReceivedMessage[] = []
    for (const entry of messages.values()) {
      if (out.length >= (options.max ?? 10)) break
      if (entry.visibleAt > now) continue
      if (entry.receipt !== undefined) byReceipt.delete(entry.receipt)
      entry.receipt = randomUUID()
      entry.receiveCount += 1
      entry.visibleAt = visibleAt
      byReceipt.set(entry.receipt, entry.id)
      out.push({ id: entry.id, receipt: entry.receipt, body: entry.body, receiveCount: entry.receiveCount })
    }
    return out
  }

  return {
    async send(requests: ScheduleRequest[], delaysS: readonly number[] = []): Promise<void> {
      checkDelays(delaysS)
      const now = clock.now()
      for (const [i, request] of requests.entries()) {
        const id = randomUUID()
        const visibleAt = now + (delaysS[i] ?? 0) * 1000
        messages.set(id, { id, body: JSON.stringify(request), receiveCount: 0, visibleAt })
      }
      if (requests.length) wakeAll()
    },

    async receive(options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
      const deadline = clock.now() + (options.waitS ?? 0) * 1000
      for (;;) {
        const now = clock.now()
        const out = take(now, options)
        if (out.length || now >= deadline) return out
        // Wait for a send or a release, or until the next in-flight message is visible again.
        let nextVisible = deadline
        for (const entry of messages.values()) nextVisible = Math.min(nextVisible, entry.visibleAt)
        let wake: () => void = () => undefined
        const woken = new Promise<void>((resolve) => {
          wake = resolve
          waiting.add(resolve)
        })
        await Promise.race([woken, clock.sleep(Math.max(1, nextVisible - now))])
        waiting.delete(wake)
      }
    },

    async delete(receipts: string[]): Promise<void> {
      for (const receipt of receipts) {
        const entry = held(receipt)
        if (entry) forget(entry)
        else byReceipt.delete(receipt)
      }
    },

    // A receipt that no longer holds the message (deleted, or received again since) is left alone.
    async release(receipt: string): Promise<void> {
      const entry = held(receipt)
      if (!entry) return
      entry.visibleAt = Math.min(entry.visibleAt, clock.now())
      wakeAll()
    },

    pending(): QueuedMessage[] {
      sweep(clock.now())
      return [...messages.values()].map(snapshot)
    },

    deadLetters(): QueuedMessage[] {
      sweep(clock.now())
      return dead.map((m) => ({ ...m }))
    },
  }
}
