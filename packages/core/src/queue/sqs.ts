/**
 * ScheduleQueue on Amazon SQS (fauxqs locally): sends and deletes in batches of 10, receives with
 * the receive count, releases with ChangeMessageVisibility 0. Every SDK failure leaves as a
 * `BackendError`. `ensureQueues` creates a queue and its DLQ for the local control plane and tests;
 * production queues come from SST.
 */
import {
  type BatchResultErrorEntry,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SetQueueAttributesCommand,
  type SQSClient,
  SQSServiceException,
} from "@aws-sdk/client-sqs"
import { BackendError } from "../util/errors"
import {
  checkDelays,
  type ReceivedMessage,
  type ReceiveOptions,
  type ScheduleQueue,
  type ScheduleRequest,
} from "./port"

export interface SqsQueueOptions {
  /** Give it an explicit `endpoint` when talking to an emulator: queue URLs are not resolvable hosts. */
  client: SQSClient
  queueUrl: string
}

/** SQS's limit on entries per batch call. */
const batchSize = 10

/** Codes meaning the message a receipt pointed at is gone or back in the queue: nothing left to do. */
const goneCodes = new Set(["ReceiptHandleIsInvalid", "MessageNotInflight"])

export function SqsQueue(opts: SqsQueueOptions): ScheduleQueue {
  const { client, queueUrl } = opts

  return {
    async send(requests: ScheduleRequest[], delaysS: readonly number[] = []): Promise<void> {
      checkDelays(delaysS)
      const delayed = requests.map((request, i) => ({ request, delay: delaysS[i] ?? 0 }))
      for (const chunk of chunks(delayed, batchSize)) {
        const entries = chunk.map(({ request, delay }, i) => ({
          Id: String(i),
          MessageBody: JSON.stringify(request),
          ...(delay > 0 ? { DelaySeconds: delay } : {}),
        }))
        await batch("SendMessageBatch", entries, async (part) => {
          const out = await call("SendMessageBatch", () =>
            client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: part })),
          )
          return out.Failed ?? []
        })
      }
    },

    async receive(options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
      const out = await call("ReceiveMessage", () =>
        client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: Math.min(10, options.max ?? 10),
            WaitTimeSeconds: options.waitS ?? 0,
            VisibilityTimeout: options.visibilityS,
            MessageSystemAttributeNames: ["ApproximateReceiveCount"],
          }),
        ),
      )
      return (out.Messages ?? []).flatMap((m) =>
        m.MessageId && m.ReceiptHandle
          ? [
              {
                id: m.MessageId,
                receipt: m.ReceiptHandle,
                body: m.Body ?? "",
                receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1),
              },
            ]
          : [],
      )
    },

    async delete(receipts: string[]): Promise<void> {
      for (const chunk of chunks(receipts, batchSize)) {
        const entries = chunk.map((receipt, i) => ({ Id: String(i), ReceiptHandle: receipt }))
        await batch("DeleteMessageBatch", entries, async (part) => {
          const out = await call("DeleteMessageBatch", () =>
            client.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: part })),
          )
          // Already deleted counts as deleted: delete is idempotent.
          return (out.Failed ?? []).filter((f) => !goneCodes.has(shortCode(f.Code)))
        })
      }
    },

    async release(receipt: string): Promise<void> {
      try {
        await client.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: queueUrl,
            ReceiptHandle: receipt,
            VisibilityTimeout: 0,
          }),
        )
      } catch (error) {
        // Deleted, or already visible again: the message needs no release.
        if (goneCodes.has(shortCode(errorName(error)))) return
        throw wrap(error, "ChangeMessageVisibility")
      }
    },
  }
}

/**
 * Run one batch call, retry the entries that failed for a reason other than their own content once,
 * then throw for what is left. Entries sent before the throw stay sent; consumers are at-least-once.
 */
async function batch<E extends { Id: string }>(
  what: string,
  entries: E[],
  run: (entries: E[]) => Promise<BatchResultErrorEntry[]>,
): Promise<void> {
  let failed = await run(entries)
  // A sender fault (e.g. invalid characters in a body) fails the same way every time.
  const retry = new Set(failed.filter((f) => !f.SenderFault).map((f) => f.Id))
  if (retry.size > 0) {
    const again = await run(entries.filter((e) => retry.has(e.Id)))
    failed = [...failed.filter((f) => f.SenderFault), ...again]
  }
  if (failed.length === 0) return
  const list = failed.map((f) => `entry ${f.Id}: ${f.Code ?? "unknown"} ${f.Message ?? ""}`.trim()).join("; ")
  throw new BackendError(
    `sqs ${what}: ${failed.length} of ${entries.length} entries failed (${list})`,
    failed.every((f) => !f.SenderFault),
  )
}

/** Create `${name}-dlq` and `${name}` with a redrive policy to it; converges queues that already exist. */
export async function ensureQueues(
  client: SQSClient,
  opts: { name: string; maxReceiveCount: number; visibilityS: number },
): Promise<{ queueUrl: string; dlqUrl: string }> {
  // 1. The DLQ first: the main queue's redrive policy names it by ARN. It keeps messages for the
  //    maximum 14 days so a poison message outlives the source queue's retention.
  const dlqName = `${opts.name}-dlq`
  const dlqUrl = await ensureQueue(client, dlqName, { MessageRetentionPeriod: String(14 * 24 * 3600) })
  const attributes = await call("GetQueueAttributes", () =>
    client.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ["QueueArn"] })),
  )
  const dlqArn = attributes.Attributes?.QueueArn
  if (!dlqArn) throw new BackendError(`sqs queue ${dlqName} has no QueueArn`, false)

  // 2. The main queue, redriving to the DLQ after `maxReceiveCount` receives.
  const queueUrl = await ensureQueue(client, opts.name, {
    VisibilityTimeout: String(opts.visibilityS),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: opts.maxReceiveCount }),
  })
  return { queueUrl, dlqUrl }
}

/** CreateQueue refuses an existing name with other attributes; then look it up and set them. */
async function ensureQueue(
  client: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  try {
    const created = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))
    if (created.QueueUrl) return created.QueueUrl
    throw new BackendError(`sqs CreateQueue ${name} returned no QueueUrl`, false)
  } catch (error) {
    if (shortCode(errorName(error)) !== "QueueNameExists") throw wrap(error, `CreateQueue ${name}`)
  }
  const found = await call("GetQueueUrl", () => client.send(new GetQueueUrlCommand({ QueueName: name })))
  const queueUrl = found.QueueUrl
  if (!queueUrl) throw new BackendError(`sqs GetQueueUrl ${name} returned no QueueUrl`, false)
  await call("SetQueueAttributes", () =>
    client.send(new SetQueueAttributesCommand({ QueueUrl: queueUrl, Attributes: attributes })),
  )
  return queueUrl
}

async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    throw wrap(error, what)
  }
}

/**
 * A client fault (bad request, missing queue, denied) fails again on retry; a server fault,
 * throttling or a transport error (no response at all) may not.
 */
function wrap(error: unknown, what: string): BackendError {
  if (error instanceof BackendError) return error
  const retryable =
    !(error instanceof SQSServiceException) || error.$fault === "server" || error.$retryable !== undefined
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  return new BackendError(`sqs ${what} failed: ${detail}`, retryable, { cause: error })
}

function errorName(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined
}

/** Error code without the query-protocol prefix, which some responses (and fauxqs) carry. */
function shortCode(code: string | undefined): string {
  return (code ?? "").replace(/^AWS\.SimpleQueueService\./, "")
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
