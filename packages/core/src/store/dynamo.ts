/**
 * StateStore on DynamoDB (also DynamoDB Local and dynalite): the single-table layout of DESIGN §5,
 * single-item conditional writes only, batch writes and reads with bounded retries of unprocessed
 * work, and cursors that are refused outside the partition they were issued for. Also owns the
 * table's definition (`tableDefinition`, shared with infra) and `ensureTable` for local runs and tests.
 */
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  type TableDescription,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb"
import {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandInput,
} from "@aws-sdk/lib-dynamodb"
import { type Clock, systemClock } from "../util/clock"
import { BackendError } from "../util/errors"
import { compareUtf8, decodeCursor, encodeCursor } from "./cursor"
import {
  FencedError,
  type IndexName,
  ItemExistsError,
  type Key,
  type NewItem,
  type Page,
  type QueryOptions,
  type StateStore,
  type StoredItem,
  VersionConflictError,
} from "./port"
import { Indexes, KeyAttributes, TableKey, TTL_ATTRIBUTE } from "./table-layout"

export { Indexes, TTL_ATTRIBUTE } from "./table-layout"

// The layout has an index for every index of the port.
Indexes satisfies Record<IndexName, { name: string; pk: string; sk: string }>

export interface DynamoStoreOptions {
  client: DynamoDBClient
  tableName: string
  /** Tries of a batch call while items or keys come back unprocessed (default 8), first backoff (50 ms). */
  batchRetry?: { attempts?: number; baseDelayMs?: number }
  /** Used for batch backoff; a `FakeClock` makes retry tests instant. */
  clock?: Clock
}

/** How many batch calls run at once in `createMany`/`getMany`: enough to overlap latency, not to self-throttle. */
const BATCH_CONCURRENCY = 4

export function DynamoStore(opts: DynamoStoreOptions): StateStore {
  const table = opts.tableName
  const clock = opts.clock ?? systemClock
  const attempts = opts.batchRetry?.attempts ?? 8
  const baseDelayMs = opts.batchRetry?.baseDelayMs ?? 50
  // removeUndefinedValues: optional fields of domain objects are routinely undefined.
  const doc = DynamoDBDocumentClient.from(opts.client, { marshallOptions: { removeUndefinedValues: true } })

  async function send<O>(
    operation: string,
    run: () => Promise<O>,
    onConditionFailed?: () => Error,
  ): Promise<O> {
    try {
      return await run()
    } catch (error) {
      if (onConditionFailed && errorName(error) === "ConditionalCheckFailedException") {
        throw onConditionFailed()
      }
      throw toBackendError(error, operation, table)
    }
  }

  /** Re-send what a batch call left unprocessed, with jittered exponential backoff, a bounded number of times. */
  async function untilProcessed<W>(operation: string, work: W[], call: (pending: W[]) => Promise<W[]>) {
    let pending = work
    for (let attempt = 1; ; attempt++) {
      pending = await call(pending)
      if (pending.length === 0) return
      if (attempt >= attempts) {
        throw new BackendError(
          `DynamoDB ${operation} on table "${table}": ${pending.length} requests still unprocessed after ${attempts} attempts (throttled)`,
          true,
        )
      }
      const delay = Math.min(2_000, baseDelayMs * 2 ** (attempt - 1))
      await clock.sleep(delay / 2 + (Math.random() * delay) / 2)
    }
  }

  async function page<T>(index: IndexName | undefined, pk: string, options: QueryOptions): Promise<Page<T>> {
    const attrs = index ? Indexes[index] : { pk: "pk", sk: "sk" }
    const { skPrefix, skBetween, filter, cursor } = options
    if (skPrefix && skBetween) {
      throw new BackendError("query: skPrefix and skBetween cannot be combined", false)
    }
    const names: Record<string, string> = { "#pk": attrs.pk }
    const values: Record<string, unknown> = { ":pk": pk }
    let condition = "#pk = :pk"
    if (skPrefix) {
      condition += " AND begins_with(#sk, :prefix)"
      names["#sk"] = attrs.sk
      values[":prefix"] = skPrefix
    } else if (skBetween) {
      condition += " AND #sk BETWEEN :from AND :to"
      names["#sk"] = attrs.sk
      values[":from"] = skBetween[0]
      values[":to"] = skBetween[1]
    }
    // Field names go through expression attribute names: domain fields may be reserved words.
    const filters = Object.entries(filter ?? {})
    if (filters.length > 0) names["#data"] = "data"
    // A dotted field (`spec.swarm`) is a path into nested maps: one name placeholder per part.
    const paths = filters.map(([field, value], i) => {
      values[`:f${i}`] = value
      return field
        .split(".")
        .map((part, j) => {
          names[`#f${i}_${j}`] = part
          return `#f${i}_${j}`
        })
        .join(".")
    })
    const cursorKeys = index ? ["pk", "sk", attrs.pk, attrs.sk] : ["pk", "sk"]
    const inRange = (sk: string) =>
      skPrefix
        ? sk.startsWith(skPrefix)
        : skBetween
          ? compareUtf8(sk, skBetween[0]) >= 0 && compareUtf8(sk, skBetween[1]) <= 0
          : true
    const input: QueryCommandInput = {
      TableName: table,
      IndexName: index && Indexes[index].name,
      KeyConditionExpression: condition,
      FilterExpression:
        filters.length > 0 ? paths.map((path, i) => `#data.${path} = :f${i}`).join(" AND ") : undefined,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ScanIndexForward: !options.reverse,
      Limit: options.limit,
      ExclusiveStartKey:
        cursor === undefined ? undefined : decodeCursor(cursor, cursorKeys, attrs, pk, inRange),
      // GSIs cannot be read consistently; DynamoDB would reject the flag.
      ConsistentRead: index ? undefined : options.consistent,
    }
    const out = await send("Query", () => doc.send(new QueryCommand(input)))
    return {
      items: (out.Items ?? []).map((row) => fromRow<T>(row)),
      ...(out.LastEvaluatedKey ? { cursor: encodeCursor(out.LastEvaluatedKey) } : {}),
    }
  }

  const store: StateStore = {
    async get<T>(key: Key, options: { consistent?: boolean } = {}) {
      const out = await send("GetItem", () =>
        doc.send(
          new GetCommand({
            TableName: table,
            Key: { pk: key.pk, sk: key.sk },
            ConsistentRead: options.consistent,
          }),
        ),
      )
      return out.Item && fromRow<T>(out.Item)
    },

    async create<T>(item: NewItem<T>) {
      const row = toRow({ ...item, version: 1 })
      await send(
        "PutItem",
        () =>
          doc.send(
            new PutCommand({
              TableName: table,
              Item: row,
              ConditionExpression: "attribute_not_exists(#pk)",
              ExpressionAttributeNames: { "#pk": "pk" },
            }),
          ),
        () => new ItemExistsError({ pk: item.pk, sk: item.sk }),
      )
      return fromRow<T>(structuredClone(row))
    },

    async createMany(items: NewItem[]) {
      // Check first: DynamoDB refuses a batch with duplicate keys, and half a write helps nobody.
      const seen = new Set<string>()
      for (const item of items) {
        const id = JSON.stringify([item.pk, item.sk])
        if (seen.has(id))
          throw new BackendError(`createMany: duplicate key ${item.pk} / ${item.sk} in one call`, false)
        seen.add(id)
      }
      const requests = items.map((item) => ({ PutRequest: { Item: toRow({ ...item, version: 1 }) } }))
      await inParallel(chunk(requests, 25), BATCH_CONCURRENCY, (batch) =>
        untilProcessed("BatchWriteItem", batch, async (pending) => {
          const out = await send("BatchWriteItem", () =>
            doc.send(new BatchWriteCommand({ RequestItems: { [table]: pending } })),
          )
          return (out.UnprocessedItems?.[table] ?? []) as typeof pending
        }),
      )
    },

    async update<T>(item: StoredItem<T>) {
      const row = toRow({ ...item, version: item.version + 1 })
      const fenced = item.fence !== undefined
      // A full replace: attributes the new item lacks (e.g. the gsi1 keys of a finished item) go away.
      try {
        await send(
          "PutItem",
          () =>
            doc.send(
              new PutCommand({
                TableName: table,
                Item: row,
                ConditionExpression: fenced
                  ? "#v = :expected AND (attribute_not_exists(#fence) OR #fence <= :fence)"
                  : "#v = :expected",
                ExpressionAttributeNames: { "#v": "version", ...(fenced ? { "#fence": "fence" } : {}) },
                ExpressionAttributeValues: {
                  ":expected": item.version,
                  ...(fenced ? { ":fence": item.fence } : {}),
                },
              }),
            ),
          () => new VersionConflictError({ pk: item.pk, sk: item.sk }),
        )
      } catch (error) {
        // Which condition failed? (dynalite ignores ReturnValuesOnConditionCheckFailure, so read.)
        if (fenced && error instanceof VersionConflictError) {
          const current = await store.get({ pk: item.pk, sk: item.sk }, { consistent: true })
          if (current?.version === item.version)
            throw new FencedError({ pk: item.pk, sk: item.sk }, item.fence!)
        }
        throw error
      }
      return fromRow<T>(structuredClone(row))
    },

    async delete(key: Key, expectedVersion?: number) {
      const condition =
        expectedVersion === undefined
          ? {}
          : {
              ConditionExpression: "#v = :expected",
              ExpressionAttributeNames: { "#v": "version" },
              ExpressionAttributeValues: { ":expected": expectedVersion },
            }
      await send(
        "DeleteItem",
        () =>
          doc.send(new DeleteCommand({ TableName: table, Key: { pk: key.pk, sk: key.sk }, ...condition })),
        () => new VersionConflictError({ pk: key.pk, sk: key.sk }),
      )
    },

    async getMany<T>(keys: Key[]) {
      // BatchGetItem refuses duplicate keys in one call; the port allows them.
      const unique = new Map(keys.map((k) => [JSON.stringify([k.pk, k.sk]), { pk: k.pk, sk: k.sk }]))
      const found: StoredItem<T>[] = []
      await inParallel(chunk([...unique.values()], 100), BATCH_CONCURRENCY, (batch) =>
        untilProcessed("BatchGetItem", batch, async (pending) => {
          const out = await send("BatchGetItem", () =>
            doc.send(new BatchGetCommand({ RequestItems: { [table]: { Keys: pending } } })),
          )
          for (const row of out.Responses?.[table] ?? []) found.push(fromRow<T>(row))
          return (out.UnprocessedKeys?.[table]?.Keys ?? []) as Key[]
        }),
      )
      return found
    },

    query: <T>(pk: string, options: QueryOptions = {}) => page<T>(undefined, pk, options),
    queryIndex: <T>(index: IndexName, pk: string, options: QueryOptions = {}) => page<T>(index, pk, options),
  }
  return store
}

/** The stored row: the port's item with the index keys flattened into the GSI key attributes. */
interface Row {
  pk: string
  sk: string
  type: string
  version: number
  data?: unknown
  gsi1pk?: string
  gsi1sk?: string
  gsi2pk?: string
  gsi2sk?: string
  ttl?: number
  fence?: number
  wid?: string
}

function toRow(item: StoredItem): Row {
  return {
    pk: item.pk,
    sk: item.sk,
    type: item.type,
    version: item.version,
    data: item.data,
    gsi1pk: item.active?.pk,
    gsi1sk: item.active?.sk,
    gsi2pk: item.list?.pk,
    gsi2sk: item.list?.sk,
    ttl: item.ttl,
    fence: item.fence,
    wid: item.writeId,
  }
}

function fromRow<T>(value: object): StoredItem<T> {
  const row = value as unknown as Row
  const item: StoredItem<T> = {
    pk: row.pk,
    sk: row.sk,
    type: row.type,
    version: row.version,
    data: row.data as T,
  }
  if (row.gsi1pk !== undefined && row.gsi1sk !== undefined) item.active = { pk: row.gsi1pk, sk: row.gsi1sk }
  if (row.gsi2pk !== undefined && row.gsi2sk !== undefined) item.list = { pk: row.gsi2pk, sk: row.gsi2sk }
  if (row.ttl !== undefined) item.ttl = row.ttl
  if (row.fence !== undefined) item.fence = row.fence
  if (row.wid !== undefined) item.writeId = row.wid
  return item
}

function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Run `fn` over `work` with at most `limit` in flight; after the first failure starts nothing new, and rejects with it. */
async function inParallel<T>(work: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  let failed = false
  const worker = async () => {
    while (next < work.length && !failed) {
      try {
        await fn(work[next++]!)
      } catch (error) {
        failed = true
        throw error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, work.length) }, worker))
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Error names that mean "try again later": throttling and DynamoDB-side failures. */
const retryableNames = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "LimitExceededException",
  "InternalServerError",
  "ServiceUnavailable",
  "TimeoutError",
  "RequestTimeout",
  "RequestTimeoutException",
])

/** Node socket error codes: the network, not the request, failed. */
const networkCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
])

interface SdkErrorShape {
  name?: string
  message?: string
  code?: string
  $fault?: string
  $retryable?: unknown
  $metadata?: { httpStatusCode?: number }
}

function errorName(error: unknown): string | undefined {
  return (error as SdkErrorShape | undefined)?.name
}

/** Wrap an SDK or network failure as a `BackendError` whose `retryable` says whether waiting can help. */
export function toBackendError(error: unknown, operation: string, table: string): BackendError {
  if (error instanceof BackendError) return error
  const e = (error ?? {}) as SdkErrorShape
  const name = e.name ?? "Error"
  const where = `DynamoDB ${operation} on table "${table}"`
  if (name === "ValidationException") {
    return new BackendError(
      `${where} was rejected as invalid (retrying will not help): ${e.message}`,
      false,
      {
        cause: error,
      },
    )
  }
  if (name === "ResourceNotFoundException") {
    return new BackendError(
      `${where} failed: the table or an index does not exist; create it with ensureTable() or deploy the stack`,
      false,
      { cause: error },
    )
  }
  const status = e.$metadata?.httpStatusCode
  const retryable =
    retryableNames.has(name) ||
    (e.code !== undefined && networkCodes.has(e.code)) ||
    e.$retryable !== undefined ||
    e.$fault === "server" ||
    (status !== undefined && status >= 500)
  return new BackendError(`${where} failed: ${name}: ${e.message}`, retryable, { cause: error })
}

// ---------------------------------------------------------------------------------------------
// The table

/** The one table: `pk`/`sk`, the sparse active index `gsi1` and the listing index `gsi2`, on demand. */
export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: KeyAttributes.map((AttributeName) => ({
      AttributeName,
      AttributeType: "S",
    })),
    KeySchema: [
      { AttributeName: TableKey.pk, KeyType: "HASH" },
      { AttributeName: TableKey.sk, KeyType: "RANGE" },
    ],
    GlobalSecondaryIndexes: Object.values(Indexes).map((index) => ({
      IndexName: index.name,
      KeySchema: [
        { AttributeName: index.pk, KeyType: "HASH" },
        { AttributeName: index.sk, KeyType: "RANGE" },
      ],
      Projection: { ProjectionType: "ALL" },
    })),
  }
}

/**
 * Create the table unless it exists, wait until it and its indexes are ACTIVE, check its layout and
 * turn TTL on. Safe to run concurrently and repeatedly. dynalite has no UpdateTimeToLive; that is
 * ignored (nothing expires locally anyway).
 */
export async function ensureTable(
  client: DynamoDBClient,
  tableName: string,
  opts: { clock?: Clock; timeoutMs?: number } = {},
): Promise<void> {
  const clock = opts.clock ?? systemClock
  const deadline = clock.now() + (opts.timeoutMs ?? 120_000)
  const describe = async (): Promise<TableDescription | undefined> => {
    try {
      return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table
    } catch (error) {
      if (errorName(error) === "ResourceNotFoundException") return undefined
      throw toBackendError(error, "DescribeTable", tableName)
    }
  }

  // 1. Create when absent; another process creating it at the same time is fine.
  if (!(await describe())) {
    try {
      await client.send(new CreateTableCommand(tableDefinition(tableName)))
    } catch (error) {
      if (errorName(error) !== "ResourceInUseException") throw toBackendError(error, "CreateTable", tableName)
    }
  }

  // 2. Wait for the table and every index to be ACTIVE.
  let table = await describe()
  for (let delay = 50; !isActive(table); delay = Math.min(delay * 2, 1_000)) {
    if (clock.now() > deadline) {
      throw new BackendError(`table "${tableName}" is not ACTIVE (${table?.TableStatus ?? "absent"})`, true)
    }
    await clock.sleep(delay)
    table = await describe()
  }

  // 3. A table of the same name with another layout would fail later on every query; say so now.
  const problem = layoutProblem(table!)
  if (problem) {
    throw new BackendError(
      `table "${tableName}" exists but ${problem}; it was not created from tableDefinition(). Delete it or use another table name`,
      false,
    )
  }

  // 4. TTL for idempotency records and old events.
  await enableTtl(client, tableName)
}

function isActive(table: TableDescription | undefined): boolean {
  return (
    table?.TableStatus === "ACTIVE" &&
    (table.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === "ACTIVE")
  )
}

function layoutProblem(table: TableDescription): string | undefined {
  const want = tableDefinition(table.TableName ?? "")
  const keys = (schema: { AttributeName?: string; KeyType?: string }[] | undefined) =>
    JSON.stringify((schema ?? []).map((k) => [k.AttributeName, k.KeyType]))
  if (keys(table.KeySchema) !== keys(want.KeySchema)) return `has key schema ${keys(table.KeySchema)}`
  for (const index of want.GlobalSecondaryIndexes ?? []) {
    const found = table.GlobalSecondaryIndexes?.find((i) => i.IndexName === index.IndexName)
    if (!found) return `lacks index ${index.IndexName}`
    if (keys(found.KeySchema) !== keys(index.KeySchema))
      return `has index ${index.IndexName} on ${keys(found.KeySchema)}`
    if (found.Projection?.ProjectionType !== "ALL") return `index ${index.IndexName} does not project ALL`
  }
  return undefined
}

async function enableTtl(client: DynamoDBClient, tableName: string): Promise<void> {
  try {
    const current = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }))
    const status = current.TimeToLiveDescription?.TimeToLiveStatus
    if (status === "ENABLED" || status === "ENABLING") return
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: TTL_ATTRIBUTE, Enabled: true },
      }),
    )
  } catch (error) {
    if (errorName(error) === "UnknownOperationException") return
    // A concurrent ensureTable enabled it first.
    const message = (error as SdkErrorShape).message ?? ""
    if (errorName(error) === "ValidationException" && /already enabled|multiple times/i.test(message)) return
    throw toBackendError(error, "UpdateTimeToLive", tableName)
  }
}
