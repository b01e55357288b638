/**
 * Counts the commands a DynamoDB client sends, by command name, so tests can pin the cost of an
 * operation (e.g. a 100-task job is 4 BatchWriteItem calls, not 100 PutItem calls). Counting happens
 * once per `send`, before the SDK's own retries, so a throttled and retried call still counts as one.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb"

export interface CallCounter {
  /** Commands sent so far, e.g. `{ PutItemCommand: 3, BatchWriteItemCommand: 4 }`. */
  readonly counts: Record<string, number>
  /** Forget the counts so far (the same `counts` object is cleared). */
  reset(): void
  /** All commands sent so far. */
  total(): number
  /** Stop counting: remove the middleware from the client. */
  stop(): void
}

let counters = 0

export function countDynamoCalls(client: DynamoDBClient): CallCounter {
  const counts: Record<string, number> = {}
  // A unique name per counter, so two counters on one client do not replace each other.
  const name = `swarmplaneCountCalls${++counters}`
  // The stack is shared with every DynamoDBDocumentClient built from this client, so document
  // commands count too, under the name of the low-level command they send (PutCommand → PutItemCommand).
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? "UnknownCommand"
      counts[command] = (counts[command] ?? 0) + 1
      return next(args)
    },
    { step: "initialize", name },
  )
  return {
    counts,
    reset() {
      for (const key of Object.keys(counts)) delete counts[key]
    },
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
    stop: () => void client.middlewareStack.remove(name),
  }
}

/**
 * A StateStore that counts the calls made through it, by method (`get`, `query`, `update`, ...), over
 * any adapter: what a step costs in store round trips, whatever the store.
 */
export function countingStore<S extends object>(
  store: S,
): { store: S; counts: Record<string, number>; reset(): void; total(): number } {
  const counts: Record<string, number> = {}
  const wrapped = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== "function") return value
      return (...args: unknown[]) => {
        counts[String(name)] = (counts[String(name)] ?? 0) + 1
        return (value as (...a: unknown[]) => unknown).apply(target, args)
      }
    },
  })
  return {
    store: wrapped,
    counts,
    reset() {
      for (const key of Object.keys(counts)) delete counts[key]
    },
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
  }
}
