/**
 * The ScheduleQueue contract: one vitest suite, run against every adapter (`MemoryQueue`, `SqsQueue`
 * on fauxqs). It states what the schedule consumer relies on: every request arrives as sent, delete
 * is final and idempotent, release brings a message back counted again, and a message received
 * `maxReceiveCount` times without a delete ends in the dead-letter queue. No test sleeps: visibility
 * is ended with `release` or `visibilityS: 0`.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { parseScheduleRequest, type ReceivedMessage, type ScheduleQueue, type ScheduleRequest } from "./port"

export interface QueueFixture {
  queue: ScheduleQueue
  /** Messages now in the queue's dead-letter queue. */
  dlqCount(): Promise<number>
  /** The queue's redrive setting: receives before a message is dead-lettered. */
  maxReceiveCount: number
  cleanup?(): Promise<void>
}

/** A distinct, valid request; `i` picks the id and cycles through the kinds. */
export function scheduleRequest(i: number, over: Partial<ScheduleRequest> = {}): ScheduleRequest {
  const kinds = ["job", "swarm", "backend"] as const
  return {
    kind: kinds[i % kinds.length] ?? "job",
    project: "demo",
    id: `obj-${String(i).padStart(3, "0")}`,
    reason: `test.request-${i}`,
    ...over,
  }
}

/**
 * Receive until `count` messages arrived, or a receive (long-polling 1 s, which returns at once when
 * messages are visible) comes back empty.
 */
export async function receiveAll(queue: ScheduleQueue, count: number): Promise<ReceivedMessage[]> {
  const got: ReceivedMessage[] = []
  while (got.length < count) {
    const batch = await queue.receive({ max: 10, waitS: 1 })
    if (batch.length === 0) break
    got.push(...batch)
  }
  return got
}

const byId = (a: ScheduleRequest, b: ScheduleRequest) => a.id.localeCompare(b.id)

export function queueContract(name: string, make: () => Promise<QueueFixture>): void {
  describe(`ScheduleQueue contract: ${name}`, () => {
    describe("delivery", () => {
      let fx: QueueFixture | undefined
      const fixture = (): QueueFixture => {
        if (!fx) throw new Error("queue fixture was not created")
        return fx
      }

      beforeEach(async () => {
        fx = await make()
      })
      afterEach(async () => {
        await fx?.cleanup?.()
        fx = undefined
      })

      it("delivers 25 requests exactly as sent, each once, then nothing while they are in flight", async () => {
        const { queue } = fixture()
        const sent = Array.from({ length: 25 }, (_, i) => scheduleRequest(i))
        await queue.send(sent)

        const got = await receiveAll(queue, 25)

        expect(got).toHaveLength(25)
        const parsed = got.map((m) => parseScheduleRequest(m.body))
        expect(parsed).not.toContain(undefined)
        expect(parsed.filter((r) => r !== undefined).sort(byId)).toEqual(sent)
        expect(got.every((m) => m.receiveCount === 1)).toBe(true)
        expect(new Set(got.map((m) => m.id)).size).toBe(25)
        expect(new Set(got.map((m) => m.receipt)).size).toBe(25)
        expect(await queue.receive()).toEqual([])
      })

      it("returns at most `max` messages per receive", async () => {
        const { queue } = fixture()
        await queue.send([scheduleRequest(1), scheduleRequest(2), scheduleRequest(3)])

        const got = await queue.receive({ max: 2 })

        expect(got.length).toBeGreaterThan(0)
        expect(got.length).toBeLessThanOrEqual(2)
      })

      it("deletes for good: deleted messages never come back, and deleting again is harmless", async () => {
        const { queue, dlqCount } = fixture()
        await queue.send(Array.from({ length: 25 }, (_, i) => scheduleRequest(i)))
        const receipts = (await receiveAll(queue, 25)).map((m) => m.receipt)
        expect(receipts).toHaveLength(25)

        await queue.delete(receipts)
        await queue.delete(receipts)
        // Release would make any surviving message visible at once, so an empty receive proves the delete.
        for (const receipt of receipts) await queue.release(receipt)

        expect(await queue.receive({ max: 10 })).toEqual([])
        expect(await dlqCount()).toBe(0)
      })

      it("brings back a released message, same id and body, with receiveCount 2", async () => {
        const { queue } = fixture()
        await queue.send([scheduleRequest(7)])
        const [first] = await queue.receive()
        expect(first?.receiveCount).toBe(1)
        expect(await queue.receive()).toEqual([])

        await queue.release(first!.receipt)
        const again = await queue.receive()

        expect(again).toHaveLength(1)
        expect(again[0]).toMatchObject({ id: first!.id, body: first!.body, receiveCount: 2 })
      })

      it("leaves a message visible when received with visibilityS 0", async () => {
        const { queue } = fixture()
        await queue.send([scheduleRequest(8)])

        const first = await queue.receive({ visibilityS: 0 })
        const second = await queue.receive()

        expect(first.map((m) => m.receiveCount)).toEqual([1])
        expect(second.map((m) => [m.id, m.receiveCount])).toEqual([[first[0]!.id, 2]])
      })

      it("dead-letters a message after maxReceiveCount receives without a delete", async () => {
        const { queue, dlqCount, maxReceiveCount } = fixture()
        await queue.send([scheduleRequest(9, { reason: "poison" })])

        const counts: number[] = []
        for (let i = 0; i < maxReceiveCount; i++) {
          const [m] = await queue.receive()
          expect(m).toBeDefined()
          counts.push(m!.receiveCount)
          await queue.release(m!.receipt)
        }

        expect(counts).toEqual(Array.from({ length: maxReceiveCount }, (_, i) => i + 1))
        expect(await queue.receive()).toEqual([])
        expect(await dlqCount()).toBe(1)
        expect(await queue.receive()).toEqual([])
      })

      it("holds a delayed request back until its delay, while the others of its send arrive at once", async () => {
        const { queue } = fixture()
        const [now, later] = [scheduleRequest(1), scheduleRequest(2)]
        await queue.send([now, later], [0, 600])
        const got = await queue.receive({ max: 10, waitS: 1 })
        expect(got.map((m) => parseScheduleRequest(m.body))).toEqual([now])
        expect(await queue.receive({ max: 10 })).toEqual([])
      })

      it("refuses a delay SQS would not take, sending nothing", async () => {
        const { queue } = fixture()
        for (const bad of [-1, 1.5, 901])
          await expect(queue.send([scheduleRequest(1)], [bad])).rejects.toThrow(
            /whole number of seconds from 0 to 900/,
          )
        expect(await queue.receive({ max: 10 })).toEqual([])
      })

      it("treats empty sends and deletes as no-ops", async () => {
        const { queue } = fixture()
        await queue.send([])
        await queue.delete([])

        expect(await queue.receive()).toEqual([])
      })
    })

    describe("parseScheduleRequest", () => {
      const valid = scheduleRequest(1)
      const rejected: Record<string, string> = {
        "not JSON": "{kind: job",
        "JSON null": "null",
        "an array": JSON.stringify([valid]),
        "missing id": JSON.stringify({ ...valid, id: undefined }),
        "unknown kind": JSON.stringify({ ...valid, kind: "pod" }),
        "empty project": JSON.stringify({ ...valid, project: "" }),
        "id not a string": JSON.stringify({ ...valid, id: 42 }),
        "reason too long": JSON.stringify({ ...valid, reason: "x".repeat(201) }),
        "an extra key": JSON.stringify({ ...valid, priority: 1 }),
      }

      for (const [caseName, body] of Object.entries(rejected)) {
        it(`rejects ${caseName}`, () => {
          expect(parseScheduleRequest(body)).toBeUndefined()
        })
      }

      it("accepts a request as the queue carries it", () => {
        expect(parseScheduleRequest(JSON.stringify(valid))).toEqual(valid)
      })
    })
  })
}
