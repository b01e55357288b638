/**
 * The Lambda entry points, called with literal Lambda events, wired by the real `deps.ts` (SST links
 * from `SST_RESOURCE_*`, endpoints overridden to dynalite and fauxqs).
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { ReceiveMessageCommand } from "@aws-sdk/client-sqs"
import { ensureQueues, SqsQueue } from "@swarmplane/core/queue/sqs"
import { createRuntime } from "@swarmplane/core/runtime"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { silentLogger } from "@swarmplane/core/util/logger"
import type { Context, ScheduledEvent, SQSEvent } from "aws-lambda"
import type { LambdaContext, LambdaEvent } from "hono/aws-lambda"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { dynamoClient, startDynalite } from "../test/support/dynamo"
import { sqsClient, startFauxqs } from "../test/support/fauxqs"

const servers: { stop(): Promise<void> }[] = []
let adminKey = ""
let queueUrl = ""
let fauxqsEndpoint = ""

beforeAll(async () => {
  const dynalite = await startDynalite()
  const fauxqs = await startFauxqs()
  servers.push(dynalite, fauxqs)
  fauxqsEndpoint = fauxqs.endpoint
  await ensureTable(dynamoClient(dynalite.endpoint), "handlers-test")
  queueUrl = (
    await ensureQueues(sqsClient(fauxqs.endpoint), {
      name: "handlers-test",
      maxReceiveCount: 3,
      visibilityS: 30,
    })
  ).queueUrl
  Object.assign(process.env, {
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    SST_RESOURCE_State: JSON.stringify({ name: "handlers-test", type: "sst.aws.Dynamo" }),
    SST_RESOURCE_ScheduleQueue: JSON.stringify({ url: queueUrl, type: "sst.aws.Queue" }),
    SST_RESOURCE_ApiPepper: JSON.stringify({ value: "pepper-for-tests", type: "sst.sst.Secret" }),
    SWARMPLANE_DYNAMODB_ENDPOINT: dynalite.endpoint,
    SWARMPLANE_SQS_ENDPOINT: fauxqs.endpoint,
    SWARMPLANE_LOG_LEVEL: "silent",
  })
  // Bootstrap the operator project as `npm start` would, through the same table and pepper.
  const rt = createRuntime({
    store: DynamoStore({ client: dynamoClient(dynalite.endpoint), tableName: "handlers-test" }),
    queue: SqsQueue({ client: sqsClient(fauxqs.endpoint), queueUrl }),
    logger: silentLogger,
    pepper: "pepper-for-tests",
    secrets: { get: async () => "" },
  })
  await rt.repos.projects.create("default")
  adminKey = (await rt.repos.projects.createKey("default", "admin")).key
})

afterAll(async () => {
  for (const s of servers) await s.stop()
})

const lambdaContext = {
  functionName: "swarmplane-test",
  awsRequestId: "req-1",
  getRemainingTimeInMillis: () => 60_000,
} as unknown as Context

/** An HTTP API / Function URL (payload v2.0) event, as Lambda delivers it. */
function httpEvent(
  method: string,
  path: string,
  opts: { body?: unknown; key?: string; query?: string } = {},
): LambdaEvent {
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: opts.query ?? "",
    headers: {
      host: "abc123.lambda-url.us-east-1.on.aws",
      "x-forwarded-proto": "https",
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
      ...(opts.body !== undefined ? { "content-type": "application/json" } : {}),
    },
    requestContext: {
      accountId: "anonymous",
      apiId: "abc123",
      domainName: "abc123.lambda-url.us-east-1.on.aws",
      domainPrefix: "abc123",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.9", userAgent: "curl/8.5.0" },
      requestId: "6f1c1c1e-0000-4000-8000-000000000001",
      routeKey: "$default",
      stage: "$default",
      time: "29/Nov/2026:12:00:00 +0000",
      timeEpoch: 1_795_953_600_000,
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    isBase64Encoded: false,
  } as unknown as LambdaEvent
}

describe("api handler", () => {
  test("GET /health through a Function URL event", async () => {
    const { handler } = await import("./api")
    const res = await handler(httpEvent("GET", "/health"), lambdaContext as unknown as LambdaContext)
    expect(res.statusCode).toBe(200)
    expect(JSON.parse(res.body)).toMatchObject({ status: "ok" })
  })

  test("an unauthenticated write is 401 and an authenticated one lands in DynamoDB and the queue", async () => {
    const { handler } = await import("./api")
    const ctx = lambdaContext as unknown as LambdaContext
    const refused = await handler(httpEvent("POST", "/v1/backends", { body: {} }), ctx)
    expect(refused.statusCode).toBe(401)
    const backend = { id: "local", config: { type: "workers", scaleGroups: [] } }
    expect(
      (await handler(httpEvent("POST", "/v1/backends", { body: backend, key: adminKey }), ctx)).statusCode,
    ).toBe(201)
    const job = await handler(
      httpEvent("POST", "/v1/jobs", { body: { command: ["true"], tasks: 3 }, key: adminKey }),
      ctx,
    )
    expect(job.statusCode).toBe(202)
    const id = JSON.parse(job.body).id
    const got = await handler(httpEvent("GET", `/v1/jobs/${id}`, { key: adminKey }), ctx)
    expect(JSON.parse(got.body).tasks).toHaveLength(3)
    const messages = await sqsClient(fauxqsEndpoint).send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
    )
    expect(messages.Messages?.map((m) => JSON.parse(m.Body ?? "{}").reason)).toEqual([
      "backend.created",
      "job.created",
    ])
  })
})

describe("schedule handler", () => {
  test("reports only the retryable failures as batch item failures", async () => {
    const { handler } = await import("./schedule")
    const record = sqsRecord
    const ok = JSON.stringify({ kind: "job", project: "default", id: "job-gone", reason: "job.created" })
    const poison = "not json"
    const event: SQSEvent = { Records: [record("m-ok", ok), record("m-poison", poison)] }
    expect(await handler(event)).toEqual({ batchItemFailures: [] })
  })
})

/** A literal SQS record as Lambda delivers it. */
function sqsRecord(messageId: string, body: string) {
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: "2",
      SentTimestamp: "1795953600000",
      SenderId: "AIDAEXAMPLE",
      ApproximateFirstReceiveTimestamp: "1795953600001",
    },
    messageAttributes: {},
    md5OfBody: "",
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:000000000000:handlers-test",
    awsRegion: "us-east-1",
  }
}

describe("tick handlers", () => {
  const scheduled: ScheduledEvent = {
    version: "0",
    id: "c1",
    "detail-type": "Scheduled Event",
    source: "aws.scheduler",
    account: "000000000000",
    time: "2026-11-29T12:00:00Z",
    region: "us-east-1",
    resources: ["arn:aws:scheduler:us-east-1:000000000000:schedule/default/Reconcile"],
    detail: {},
  }

  test("autoscale visits the registered backend (which has no scale groups to act on)", async () => {
    const autoscale = await import("./autoscale")
    expect(await autoscale.handler(scheduled)).toEqual({ busy: 0, backends: 1 })
  })

  test("reconcile sends no tick when nothing is active", async () => {
    const { handler } = await import("./reconcile")
    const { handler: api } = await import("./api")
    const ctx = lambdaContext as unknown as LambdaContext
    const jobs = JSON.parse((await api(httpEvent("GET", "/v1/jobs", { key: adminKey }), ctx)).body).items
    for (const j of jobs) await api(httpEvent("POST", `/v1/jobs/${j.id}/cancel`, { key: adminKey }), ctx)
    // A backend with work would get its ticks for the minute as schedule requests; an idle one none.
    expect(await handler(scheduled)).toEqual({ sent: 0, busy: 0, backends: 1 })
  })
})

describe("bootstrap script for a deployed stage", () => {
  test("says the operator project exists, and mints a working admin key with --new-key", async () => {
    // Asynchronous on purpose: dynalite runs in this process and must keep answering.
    const run = async (...args: string[]) =>
      (
        await promisify(execFile)(process.execPath, ["--import", "tsx", "scripts/bootstrap.ts", ...args], {
          cwd: join(import.meta.dirname, ".."),
          env: process.env,
          encoding: "utf8",
        })
      ).stdout
    expect(await run()).toMatch(/exists already; nothing to do/)
    const key = /^\s+(sp_\S+)$/m.exec(await run("--new-key"))?.[1]
    expect(key).toBeTruthy()
    const { handler } = await import("./api")
    const me = await handler(httpEvent("GET", "/v1/me", { key }), lambdaContext as unknown as LambdaContext)
    expect(JSON.parse(me.body)).toMatchObject({ project: "default", role: "admin", operator: true })
  })
})

describe("schedule handler when the store is down", () => {
  // Last in this file: it stops DynamoDB.
  test("every valid message comes back as a batch item failure; a poison message does not", async () => {
    const { handler } = await import("./schedule")
    await servers[0]?.stop()
    servers.shift()
    const body = (id: string) =>
      JSON.stringify({ kind: "swarm", project: "default", id, reason: "swarm.created" })
    const event = {
      Records: [sqsRecord("m-1", body("a")), sqsRecord("m-2", "{}"), sqsRecord("m-3", body("b"))],
    } as SQSEvent
    const result = await handler(event)
    expect(result.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(["m-1", "m-3"])
  })
})
