import { describe, expect, it } from "vitest"
import { FakeClock, systemClock } from "../util/clock"
import { queueContract, scheduleRequest } from "./contract"
import { MemoryQueue } from "./memory"

queueContract("MemoryQueue", async () => {
  const queue = MemoryQueue({ maxReceiveCount: 3, clock: new FakeClock() })
  return { queue, maxReceiveCount: 3, dlqCount: async () => queue.deadLetters().length }
})

describe("MemoryQueue", () => {
  it("hides a received message for the visibility timeout, measured on the clock", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ visibilityS: 30, clock })
    await queue.send([scheduleRequest(1)])
    const [first] = await queue.receive()

    clock.advance(30_000 - 1)
    expect(await queue.receive()).toEqual([])
    clock.advance(1)
    const again = await queue.receive()

    expect(again.map((m) => [m.id, m.receiveCount])).toEqual([[first!.id, 2]])
  })

  it("uses the receive's visibilityS over the queue's", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ visibilityS: 30, clock })
    await queue.send([scheduleRequest(1)])
    await queue.receive({ visibilityS: 5 })

    clock.advance(5_000)

    expect(await queue.receive()).toHaveLength(1)
  })

  it("moves a message that used up its receives to deadLetters, body and count intact", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ maxReceiveCount: 2, visibilityS: 10, clock })
    await queue.send([scheduleRequest(1), scheduleRequest(2)])
    const body = JSON.stringify(scheduleRequest(1))

    for (let i = 0; i < 2; i++) {
      const got = await queue.receive()
      await queue.delete(got.filter((m) => m.body !== body).map((m) => m.receipt))
      clock.advance(10_000)
    }

    expect(queue.deadLetters()).toMatchObject([{ body, receiveCount: 2 }])
    expect(queue.pending()).toEqual([])
    expect(await queue.receive()).toEqual([])
  })

  it("ignores a receipt from an earlier receive once the message was received again", async () => {
    const queue = MemoryQueue({ clock: new FakeClock() })
    await queue.send([scheduleRequest(1)])
    const [first] = await queue.receive({ visibilityS: 0 })
    const [second] = await queue.receive()

    await queue.release(first!.receipt)
    await queue.delete([first!.receipt])

    expect(queue.pending()).toMatchObject([{ id: second!.id, receiveCount: 2 }])
    expect(await queue.receive()).toEqual([])
    await queue.delete([second!.receipt])
    expect(queue.pending()).toEqual([])
  })

  it("lists pending messages, visible and in flight, in send order", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ visibilityS: 30, clock })
    await queue.send([scheduleRequest(1), scheduleRequest(2)])
    await queue.receive({ max: 1 })

    expect(
      queue.pending().map((m) => [JSON.parse(m.body).id, m.receiveCount, m.visibleAt > clock.now()]),
    ).toEqual([
      ["obj-001", 1, true],
      ["obj-002", 0, false],
    ])
  })

  it("long-polls: a receive waiting with nothing visible returns the message sent meanwhile", async () => {
    // The real clock and a 20 s wait: without the wake-up on send this outlasts the test's timeout.
    const queue = MemoryQueue({ clock: systemClock })
    const waiting = queue.receive({ waitS: 20 })
    await new Promise((resolve) => setImmediate(resolve))
    await queue.send([scheduleRequest(1)])

    const got = await waiting

    expect(got.map((m) => JSON.parse(m.body).id)).toEqual(["obj-001"])
  })

  it("long-polls: a released message wakes a waiting receive", async () => {
    const queue = MemoryQueue({ clock: systemClock, visibilityS: 600 })
    await queue.send([scheduleRequest(1)])
    const [first] = await queue.receive()
    const waiting = queue.receive({ waitS: 20 })
    await new Promise((resolve) => setImmediate(resolve))
    await queue.release(first!.receipt)

    expect((await waiting).map((m) => [m.id, m.receiveCount])).toEqual([[first!.id, 2]])
  })

  it("long-polls on its clock: nothing arrives, and the receive returns empty once waitS has passed", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ clock, visibilityS: 30 })
    const start = clock.now()

    expect(await queue.receive({ waitS: 5 })).toEqual([])
    expect(clock.now() - start).toBe(5_000)
  })

  it("long-polls until an in-flight message is visible again, within waitS", async () => {
    const clock = new FakeClock()
    const queue = MemoryQueue({ clock, visibilityS: 2 })
    await queue.send([scheduleRequest(1)])
    await queue.receive()

    const again = await queue.receive({ waitS: 10 })

    expect(again.map((m) => m.receiveCount)).toEqual([2])
  })
})
