/**
 * SqsQueue against fauxqs in this process: the ScheduleQueue contract, the number of SQS calls a
 * batch costs, how partial batch failures and transport errors surface, and `ensureQueues`.
 */
import {
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type SendMessageBatchCommandInput,
  type SendMessageBatchCommandOutput,
  type SQSClient,
} from "@aws-sdk/client-sqs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queueContract, receiveAll, scheduleRequest } from "../packages/core/src/queue/contract"
import { ensureQueues, SqsQueue } from "../packages/core/src/queue/sqs"
import { BackendError } from "../packages/core/src/util/errors"
import { type Fauxqs, sqsClient, startFauxqs } from "./support/fauxqs"

let faux: Fauxqs
let client: SQSClient

beforeAll(async () => {
  faux = await startFauxqs()
  client = sqsClient(faux.endpoint)
})
afterAll(async () => {
  client?.destroy()
  await faux?.stop()
})

let serial = 0
/** A new queue and DLQ per test, so no test sees another's messages. */
async function freshQueues(maxReceiveCount = 3) {
  serial += 1
  return ensureQueues(client, { name: `schedule-${serial}`, maxReceiveCount, visibilityS: 30 })
}

/**
 * Visible plus in-flight messages. fauxqs refreshes these counters lazily (only on a receive from
 * that queue), but a DLQ is only ever written to by redrive, which updates them at once.
 */
async function messageCount(queueUrl: string): Promise<number> {
  const out = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  )
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  )
}

/** Count the HTTP requests per command; the deserialize step runs once per attempt, retries included. */
function countRequests(target: SQSClient): Map<string, number> {
  const counts = new Map<string, number>()
  target.middlewareStack.add(
    (next, context) => async (args) => {
      const name = (context.commandName ?? "unknown").replace(/Command$/, "")
      counts.set(name, (counts.get(name) ?? 0) + 1)
      return next(args)
    },
    { step: "deserialize", name: "countRequests" },
  )
  return counts
}

/**
 * Make the next `times` SendMessageBatch calls leave out their last entry and report it as failed on
 * SQS's side, as SQS does for a transient internal error. A call left with no entries is answered
 * here, since SQS refuses an empty batch.
 */
function failLastEntry(target: SQSClient, times: number): void {
  let left = times
  target.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== "SendMessageBatchCommand" || left === 0) return next(args)
      left -= 1
      const input = args.input as SendMessageBatchCommandInput
      const entries = input.Entries ?? []
      const failed = {
        Id: entries.at(-1)?.Id,
        SenderFault: false,
        Code: "InternalError",
        Message: "injected",
      }
      if (entries.length <= 1) {
        const output: SendMessageBatchCommandOutput = { $metadata: {}, Successful: [], Failed: [failed] }
        return { output, response: undefined }
      }
      const result = await next({ ...args, input: { ...input, Entries: entries.slice(0, -1) } })
      const output = result.output as SendMessageBatchCommandOutput
      output.Failed = [...(output.Failed ?? []), failed]
      return result
    },
    { step: "initialize", name: "failLastEntry" },
  )
}

queueContract("SqsQueue on fauxqs", async () => {
  const { queueUrl, dlqUrl } = await freshQueues(3)
  return {
    queue: SqsQueue({ client, queueUrl }),
    maxReceiveCount: 3,
    dlqCount: () => messageCount(dlqUrl),
    cleanup: async () => {
      await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }))
      await client.send(new DeleteQueueCommand({ QueueUrl: dlqUrl }))
    },
  }
})

describe("SqsQueue on fauxqs", () => {
  const requests = (n: number) => Array.from({ length: n }, (_, i) => scheduleRequest(i))

  it("sends 25 with 3 SendMessageBatch calls and deletes 25 with 3 DeleteMessageBatch calls", async () => {
    const counted = sqsClient(faux.endpoint)
    const calls = countRequests(counted)
    const queue = SqsQueue({ client: counted, queueUrl: (await freshQueues()).queueUrl })

    await queue.send(requests(25))
    expect(Object.fromEntries(calls)).toEqual({ SendMessageBatch: 3 })

    const got = await receiveAll(queue, 25)
    expect(got).toHaveLength(25)
    calls.clear()
    await queue.delete(got.map((m) => m.receipt))
    expect(Object.fromEntries(calls)).toEqual({ DeleteMessageBatch: 3 })

    calls.clear()
    await queue.send(requests(10))
    expect(Object.fromEntries(calls)).toEqual({ SendMessageBatch: 1 })

    calls.clear()
    await queue.send([])
    await queue.delete([])
    expect(calls.size).toBe(0)
    counted.destroy()
  })

  it("retries an entry SQS failed on its side once, so each request arrives once", async () => {
    const flaky = sqsClient(faux.endpoint)
    failLastEntry(flaky, 1)
    const calls = countRequests(flaky)
    const queue = SqsQueue({ client: flaky, queueUrl: (await freshQueues()).queueUrl })

    await queue.send(requests(5))

    expect(calls.get("SendMessageBatch")).toBe(2)
    const got = await receiveAll(queue, 5)
    expect(got.map((m) => m.body).sort()).toEqual(
      requests(5)
        .map((r) => JSON.stringify(r))
        .sort(),
    )
    expect(await queue.receive()).toEqual([])
    flaky.destroy()
  })

  it("throws a retryable BackendError naming the entry when the retry fails too", async () => {
    const flaky = sqsClient(faux.endpoint)
    failLastEntry(flaky, 2)
    const queue = SqsQueue({ client: flaky, queueUrl: (await freshQueues()).queueUrl })

    const error = await queue.send(requests(5)).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(BackendError)
    expect(error).toMatchObject({ retryable: true })
    expect((error as Error).message).toContain("entry 4: InternalError")
    flaky.destroy()
  })

  it("refuses a body SQS rejects with a non-retryable BackendError, without a retry, sending the rest", async () => {
    const counted = sqsClient(faux.endpoint)
    const calls = countRequests(counted)
    const queue = SqsQueue({ client: counted, queueUrl: (await freshQueues()).queueUrl })
    // U+FFFF is outside the characters SQS accepts, and JSON.stringify leaves it unescaped.
    const batch = [...requests(4), scheduleRequest(4, { reason: "bad \uffff" })]

    const error = await queue.send(batch).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(BackendError)
    expect(error).toMatchObject({ retryable: false })
    expect((error as Error).message).toContain("entry 4: InvalidMessageContents")
    expect(calls.get("SendMessageBatch")).toBe(1)
    expect(await receiveAll(queue, 4)).toHaveLength(4)
    expect(await queue.receive()).toEqual([])
    counted.destroy()
  })

  it("wraps a missing queue as a non-retryable BackendError", async () => {
    const { queueUrl } = await freshQueues()
    const queue = SqsQueue({ client, queueUrl: `${queueUrl}-missing` })

    const error = await queue.receive().catch((e: unknown) => e)

    expect(error).toBeInstanceOf(BackendError)
    expect(error).toMatchObject({ retryable: false })
    expect((error as Error).message).toContain("QueueDoesNotExist")
  })

  it("wraps a refused connection as a retryable BackendError", async () => {
    const gone = await startFauxqs()
    await gone.stop()
    const offline = sqsClient(gone.endpoint, { maxAttempts: 1 })
    const queue = SqsQueue({ client: offline, queueUrl: `${gone.endpoint}/000000000000/nowhere` })

    const error = await queue.receive().catch((e: unknown) => e)

    expect(error).toBeInstanceOf(BackendError)
    expect(error).toMatchObject({ retryable: true })
    expect((error as Error).message).toContain("ECONNREFUSED")
    offline.destroy()
  })
})

describe("ensureQueues", () => {
  it("returns the same queues when run again, and converges changed settings", async () => {
    const first = await ensureQueues(client, { name: "ensure", maxReceiveCount: 3, visibilityS: 30 })
    const again = await ensureQueues(client, { name: "ensure", maxReceiveCount: 3, visibilityS: 30 })
    const changed = await ensureQueues(client, { name: "ensure", maxReceiveCount: 5, visibilityS: 60 })

    expect(again).toEqual(first)
    expect(changed).toEqual(first)
    const dlq = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: first.dlqUrl, AttributeNames: ["QueueArn"] }),
    )
    const main = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: first.queueUrl,
        AttributeNames: ["VisibilityTimeout", "RedrivePolicy"],
      }),
    )
    expect(main.Attributes?.VisibilityTimeout).toBe("60")
    expect(JSON.parse(main.Attributes?.RedrivePolicy ?? "{}")).toEqual({
      deadLetterTargetArn: dlq.Attributes?.QueueArn,
      maxReceiveCount: 5,
    })
  })
})
