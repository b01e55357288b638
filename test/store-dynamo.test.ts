/**
 * DynamoStore against dynalite (in this process) and the real DynamoDB Local (Java): the StateStore
 * contract, what a batch costs in calls, retries of unprocessed batch work, how failures surface as
 * BackendError, and `ensureTable`.
 */
import { randomUUID } from "node:crypto"
import {
  type BatchGetItemCommandInput,
  type BatchGetItemCommandOutput,
  type BatchWriteItemCommandInput,
  type BatchWriteItemCommandOutput,
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { storeContract } from "../packages/core/src/store/contract"
import { countDynamoCalls, countDynamoCapacity } from "../packages/core/src/store/counting"
import { DynamoStore, ensureTable, tableDefinition, toBackendError } from "../packages/core/src/store/dynamo"
import type { Key, NewItem } from "../packages/core/src/store/port"
import { FakeClock } from "../packages/core/src/util/clock"
import { BackendError } from "../packages/core/src/util/errors"
import {
  type DynamoServer,
  dynamoClient,
  javaAvailable,
  startDynalite,
  startDynamoLocal,
} from "./support/dynamo"

const servers: Record<string, () => Promise<DynamoServer>> = {
  dynalite: () => startDynalite(),
  ...(javaAvailable() ? { "DynamoDB Local": () => startDynamoLocal() } : {}),
}

const tasks = (pk: string, n: number): NewItem[] =>
  Array.from({ length: n }, (_, i) => ({
    pk,
    sk: `task#${String(i).padStart(3, "0")}`,
    type: "task",
    data: { i },
  }))
const keysOf = (items: NewItem[]): Key[] => items.map(({ pk, sk }) => ({ pk, sk }))

for (const [label, start] of Object.entries(servers)) {
  describe(`DynamoStore on ${label}`, () => {
    let server: DynamoServer
    let client: DynamoDBClient
    const tableName = `swarmplane-test-${randomUUID().slice(0, 8)}`
    const clients: DynamoDBClient[] = []
    /** A client of its own, so middleware added by a test sees only that test's calls. */
    const ownClient = (config: Parameters<typeof dynamoClient>[1] = {}) => {
      const c = dynamoClient(server.endpoint, config)
      clients.push(c)
      return c
    }

    beforeAll(async () => {
      server = await start()
      client = dynamoClient(server.endpoint)
      await ensureTable(client, tableName)
    })
    afterAll(async () => {
      for (const c of [client, ...clients]) c?.destroy()
      await server?.stop()
    })

    storeContract(label, async () => ({ store: DynamoStore({ client, tableName }) }))

    it("creates 100 items in 4 BatchWriteItem calls and reads them back in 1 BatchGetItem call", async () => {
      const counted = ownClient()
      const calls = countDynamoCalls(counted)
      const store = DynamoStore({ client: counted, tableName })
      const items = tasks(`count#${randomUUID()}`, 100)

      await store.createMany(items)
      expect(calls.counts).toEqual({ BatchWriteItemCommand: 4 })
      calls.reset()
      expect(await store.getMany(keysOf(items))).toHaveLength(100)
      expect(calls.counts).toEqual({ BatchGetItemCommand: 1 })
      calls.reset()
      await store.create({ pk: items[0]!.pk, sk: "job", type: "job", data: {} })
      await store.query(items[0]!.pk, { limit: 10 })
      expect(calls.counts).toEqual({ PutItemCommand: 1, QueryCommand: 1 })
      expect(calls.total()).toBe(2)
    })

    it("counts the capacity units DynamoDB says a call consumed: a partition read as one query costs far less than its items read by key", async () => {
      const counted = ownClient()
      const capacity = countDynamoCapacity(counted)
      const store = DynamoStore({ client: counted, tableName })
      const items = tasks(`capacity#${randomUUID()}`, 100)

      await store.createMany(items)
      // A write unit per item under 1 KB; reads none.
      expect({ read: capacity.read, write: capacity.write }).toEqual({ read: 0, write: 100 })
      capacity.reset()
      await store.query(items[0]!.pk)
      const query = capacity.read
      capacity.reset()
      expect(await store.getMany(keysOf(items))).toHaveLength(100)
      // Half a unit per item read by key (eventually consistent, under 4 KB); the query reads them as
      // one run of bytes, half a unit per 4 KB of it.
      expect(capacity.read).toBe(50)
      expect(query).toBeGreaterThan(0)
      expect(query).toBeLessThanOrEqual(2)
      expect(capacity.write).toBe(0)
      capacity.stop()
    })

    it("re-sends unprocessed batch items and keys until done", async () => {
      const flaky = ownClient()
      const injected = unprocessedOnFirstCalls(flaky, tableName, 2)
      const calls = countDynamoCalls(flaky)
      const store = DynamoStore({ client: flaky, tableName, clock: new FakeClock() })
      const items = tasks(`unprocessed#${randomUUID()}`, 30)

      await store.createMany(items)
      expect(calls.counts).toEqual({ BatchWriteItemCommand: 4 }) // 2 chunks + 2 re-sends
      expect(await DynamoStore({ client, tableName }).getMany(keysOf(items))).toHaveLength(30)
      injected.reset()
      calls.reset()
      const got = await store.getMany(keysOf(items))
      expect(got.map((item) => item.sk).sort()).toEqual(items.map((item) => item.sk))
      expect(calls.counts).toEqual({ BatchGetItemCommand: 3 }) // 1 chunk, unprocessed twice
    })

    it("gives up on unprocessed batch items after the configured attempts, as a retryable BackendError", async () => {
      const throttled = ownClient()
      unprocessedOnFirstCalls(throttled, tableName, Number.POSITIVE_INFINITY)
      const calls = countDynamoCalls(throttled)
      const store = DynamoStore({
        client: throttled,
        tableName,
        clock: new FakeClock(),
        batchRetry: { attempts: 3 },
      })
      const error = await store.createMany(tasks(`throttled#${randomUUID()}`, 10)).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(BackendError)
      expect((error as BackendError).retryable).toBe(true)
      expect(calls.counts).toEqual({ BatchWriteItemCommand: 3 })
    })

    it("maps failures to BackendError: network retryable, missing table and invalid request not", async () => {
      const gone = await startDynalite()
      await gone.stop()
      const offline = DynamoStore({
        client: ownClient({ endpoint: gone.endpoint, maxAttempts: 1 }),
        tableName,
      })
      const network = await offline.get({ pk: "a", sk: "b" }).catch((e: unknown) => e)
      expect(network).toBeInstanceOf(BackendError)
      expect((network as BackendError).retryable).toBe(true)

      const noTable = await DynamoStore({ client, tableName: "swarmplane-absent" })
        .get({ pk: "a", sk: "b" })
        .catch((e: unknown) => e)
      expect(noTable).toBeInstanceOf(BackendError)
      expect((noTable as BackendError).retryable).toBe(false)
      expect((noTable as Error).message).toMatch(/ensureTable/)

      const store = DynamoStore({ client, tableName })
      const invalid = await store.create({ pk: "a", sk: "", type: "t", data: {} }).catch((e: unknown) => e)
      expect(invalid).toBeInstanceOf(BackendError)
      expect((invalid as BackendError).retryable).toBe(false)
      expect((invalid as Error).message).toMatch(/ValidationException|invalid/)
    })

    it("ensureTable is idempotent and safe concurrently, and builds exactly tableDefinition()", async () => {
      const name = `swarmplane-ensure-${randomUUID().slice(0, 8)}`
      await Promise.all([ensureTable(client, name), ensureTable(client, name), ensureTable(client, name)])
      await ensureTable(client, name)

      const { Table } = await client.send(new DescribeTableCommand({ TableName: name }))
      const want = tableDefinition(name)
      const byName = <T extends { AttributeName?: string }>(list: T[] = []) =>
        [...list].sort((a, b) => (a.AttributeName ?? "").localeCompare(b.AttributeName ?? ""))
      expect(Table?.TableStatus).toBe("ACTIVE")
      expect(Table?.KeySchema).toEqual(want.KeySchema)
      expect(byName(Table?.AttributeDefinitions)).toEqual(byName(want.AttributeDefinitions))
      const indexes = (Table?.GlobalSecondaryIndexes ?? []).map((i) => ({
        IndexName: i.IndexName,
        KeySchema: i.KeySchema,
        Projection: i.Projection,
      }))
      expect(indexes.sort((a, b) => (a.IndexName ?? "").localeCompare(b.IndexName ?? ""))).toEqual(
        want.GlobalSecondaryIndexes,
      )
      const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: name }))
      // dynalite cannot turn TTL on (no UpdateTimeToLive); DynamoDB Local can.
      if (label === "DynamoDB Local") {
        expect(ttl.TimeToLiveDescription).toMatchObject({ TimeToLiveStatus: "ENABLED", AttributeName: "ttl" })
      }
    })

    it("ensureTable refuses a same-named table with another layout, saying how to fix it", async () => {
      const name = `swarmplane-other-${randomUUID().slice(0, 8)}`
      await client.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: "PAY_PER_REQUEST",
          AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
          KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
        }),
      )
      await expect(ensureTable(client, name)).rejects.toThrow(/not created from tableDefinition/)
    })
  })
}

describe("toBackendError", () => {
  const cases: Record<string, { error: unknown; retryable: boolean }> = {
    throughput: {
      error: { name: "ProvisionedThroughputExceededException", $metadata: { httpStatusCode: 400 } },
      retryable: true,
    },
    throttling: {
      error: { name: "ThrottlingException", $metadata: { httpStatusCode: 400 } },
      retryable: true,
    },
    "server fault": {
      error: { name: "InternalServerError", $fault: "server", $metadata: { httpStatusCode: 500 } },
      retryable: true,
    },
    "any 5xx": { error: { name: "Weird", $metadata: { httpStatusCode: 503 } }, retryable: true },
    "connection reset": {
      error: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }),
      retryable: true,
    },
    timeout: { error: Object.assign(new Error("timed out"), { name: "TimeoutError" }), retryable: true },
    validation: {
      error: { name: "ValidationException", message: "bad", $metadata: { httpStatusCode: 400 } },
      retryable: false,
    },
    "access denied": {
      error: { name: "AccessDeniedException", $metadata: { httpStatusCode: 400 } },
      retryable: false,
    },
    "marshalling bug": { error: new Error("Unsupported type passed: [object Object]"), retryable: false },
  }
  for (const [name, tc] of Object.entries(cases)) {
    it(name, () => {
      const wrapped = toBackendError(tc.error, "PutItem", "t")
      expect(wrapped).toBeInstanceOf(BackendError)
      expect(wrapped.retryable).toBe(tc.retryable)
      expect(wrapped.message).toContain('DynamoDB PutItem on table "t"')
      expect(wrapped.cause).toBe(tc.error)
    })
  }
})

/**
 * Make the first `times` batch calls on `client` report part of their work as unprocessed (as
 * DynamoDB does when throttled). Runs before the document client's (un)marshalling, so it sees and
 * returns plain JavaScript items. Unprocessed writes were in fact written; writing them twice is
 * harmless. Unprocessed keys are removed from the responses, so nothing comes back twice.
 */
function unprocessedOnFirstCalls(client: DynamoDBClient, table: string, times: number) {
  let calls = 0
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args)
      if (calls >= times) return result
      if (context.commandName === "BatchWriteItemCommand") {
        calls++
        const input = args.input as BatchWriteItemCommandInput
        const output = result.output as BatchWriteItemCommandOutput
        output.UnprocessedItems = { [table]: input.RequestItems?.[table]?.slice(0, 3) ?? [] }
      } else if (context.commandName === "BatchGetItemCommand") {
        calls++
        const input = args.input as BatchGetItemCommandInput
        const output = result.output as BatchGetItemCommandOutput
        const withheld = input.RequestItems?.[table]?.Keys?.slice(0, 3) ?? []
        const ids = new Set(withheld.map((key) => JSON.stringify([key.pk, key.sk])))
        const responses = output.Responses?.[table] ?? []
        output.Responses = { [table]: responses.filter((row) => !ids.has(JSON.stringify([row.pk, row.sk]))) }
        output.UnprocessedKeys = { [table]: { Keys: withheld } }
      }
      return result
    },
    { step: "initialize", name: "injectUnprocessed" },
  )
  return {
    reset: () => {
      calls = 0
    },
  }
}
