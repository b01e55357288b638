/**
 * Counts what store work costs: the commands a DynamoDB client sends, by command name, so tests can pin
 * the cost of an operation (e.g. a 100-task job is 4 BatchWriteItem calls, not 100 PutItem calls); the
 * capacity units DynamoDB says they consumed; and the calls and items through any StateStore.
 * Counting happens once per `send`, before the SDK's own retries, so a throttled and retried call still
 * counts as one.
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
 * What DynamoDB says the commands sent through a client consumed (`ReturnConsumedCapacity: TOTAL` is
 * asked of every command that can report it), split into reads and writes: request units, which is
 * what on-demand capacity bills and what a partition's throughput limit counts.
 */
export interface CapacityCounter {
  /** Read capacity units consumed so far (GetItem, BatchGetItem, Query, Scan). */
  readonly read: number
  /** Write capacity units consumed so far (PutItem, UpdateItem, DeleteItem, BatchWriteItem), indexes included. */
  readonly write: number
  reset(): void
  stop(): void
}

const ReadCommands = new Set(["GetItemCommand", "BatchGetItemCommand", "QueryCommand", "ScanCommand"])
const WriteCommands = new Set([
  "PutItemCommand",
  "UpdateItemCommand",
  "DeleteItemCommand",
  "BatchWriteItemCommand",
])

export function countDynamoCapacity(client: DynamoDBClient): CapacityCounter {
  const totals = { read: 0, write: 0 }
  const name = `swarmplaneCountCapacity${++counters}`
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? ""
      const kind = ReadCommands.has(command) ? "read" : WriteCommands.has(command) ? "write" : undefined
      if (!kind) return next(args)
      const input = args.input as { ReturnConsumedCapacity?: string }
      // Only when the caller did not ask for it itself: its own setting (and answer) stay its own.
      input.ReturnConsumedCapacity ??= "TOTAL"
      const result = await next(args)
      const consumed = (result.output as { ConsumedCapacity?: Consumed | Consumed[] }).ConsumedCapacity
      for (const c of [consumed ?? []].flat()) totals[kind] += c.CapacityUnits ?? 0
      return result
    },
    { step: "initialize", name },
  )
  return {
    get read() {
      return totals.read
    },
    get write() {
      return totals.write
    },
    reset() {
      totals.read = 0
      totals.write = 0
    },
    stop: () => void client.middlewareStack.remove(name),
  }
}

type Consumed = { CapacityUnits?: number }

const ReadMethods = new Set(["get", "getMany", "query", "queryIndex"])

/** Items a store call returned (reads) or wrote (writes). */
function itemsOf(method: string, args: unknown[], result: unknown): number {
  if (method === "get") return result ? 1 : 0
  if (method === "getMany") return (result as unknown[]).length
  if (method === "query" || method === "queryIndex") return (result as { items: unknown[] }).items.length
  if (method === "createMany") return (args[0] as unknown[]).length
  return 1
}

/**
 * A StateStore that counts the calls made through it, by method (`get`, `query`, `update`, ...), over
 * any adapter, and the items those calls read or wrote: what a step costs in store round trips and in
 * items, whatever the store. A call that fails counts as a call and moves no items.
 */
export function countingStore<S extends object>(
  store: S,
): {
  store: S
  counts: Record<string, number>
  /** Items by method: returned by reads, written by writes (`createMany` counts each of its items). */
  items: Record<string, number>
  reset(): void
  total(): number
  /** Read calls and the items they returned. */
  reads(): { calls: number; items: number }
  /** Write calls and the items they wrote. */
  writes(): { calls: number; items: number }
} {
  const counts: Record<string, number> = {}
  const items: Record<string, number> = {}
  const wrapped = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== "function") return value
      const method = String(name)
      return (...args: unknown[]) => {
        counts[method] = (counts[method] ?? 0) + 1
        const result = (value as (...a: unknown[]) => unknown).apply(target, args)
        if (!(result instanceof Promise)) return result
        return result.then((out) => {
          items[method] = (items[method] ?? 0) + itemsOf(method, args, out)
          return out
        })
      }
    },
  })
  const sum = (of: Record<string, number>, read: boolean) =>
    Object.entries(of).reduce((n, [method, c]) => (ReadMethods.has(method) === read ? n + c : n), 0)
  return {
    store: wrapped,
    counts,
    items,
    reset() {
      for (const key of Object.keys(counts)) delete counts[key]
      for (const key of Object.keys(items)) delete items[key]
    },
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
    reads: () => ({ calls: sum(counts, true), items: sum(items, true) }),
    writes: () => ({ calls: sum(counts, false), items: sum(items, false) }),
  }
}
