/**
 * The Lambdas as they are deployed: each function bundled with the deploy's settings
 * (`infra/bundle.ts`, for the runtime `infra/` names), its size printed, then imported in a fresh
 * Node process from a folder with no node_modules above it (as in Lambda), with only the environment
 * the infrastructure gives that function (read from `infra/` run against the recording stand-in of
 * `test/support/sst-stand-in.ts`: its links as `SST_RESOURCE_*`, its variables), pointed at DynamoDB
 * Local and fauxqs, and handed a literal event of its trigger: Function URL requests, an SQS batch,
 * schedule events. A handler that reads a link its function is not given fails here.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { ReceiveMessageCommand } from "@aws-sdk/client-sqs"
import { ensureQueues, SqsQueue } from "@swarmplane/core/queue/sqs"
import { createRuntime } from "@swarmplane/core/runtime"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { silentLogger } from "@swarmplane/core/util/logger"
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest"
import { type Built, buildHandler, lambdaEntries } from "../bench/cold-start"
import { ReconcileIntervalMs } from "../functions/timing"
import { bundleSettings, lambdaRuntime } from "../infra/bundle"
import { dynamoClient, javaAvailable, startDynamoLocal } from "./support/dynamo"
import { sqsClient, startFauxqs } from "./support/fauxqs"
import { deploy, type Linked } from "./support/sst-stand-in"

const run = promisify(execFile)
const Table = "bundles-test"
const Pepper = "pepper-for-bundles"

/** A fresh process: import the bundle, hand its handler each event in turn, print the answers. */
const invoke = `
const [file, events, remainingMs] = process.argv.slice(1)
const { handler } = await import(file)
const context = { functionName: "swarmplane-test", awsRequestId: "req-1", getRemainingTimeInMillis: () => Number(remainingMs) }
const out = []
for (const event of JSON.parse(events)) out.push(await handler(event, context))
// After whatever the function logged (JSON lines on stdout, as Lambda collects them).
process.stdout.write("\\n@@answers " + JSON.stringify(out) + "\\n")
process.exit(0)
`

/** A Function URL (payload 2.0) request. */
function httpEvent(method: string, path: string, opts: { key?: string; body?: unknown } = {}) {
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: "",
    headers: {
      host: "abc123.lambda-url.us-east-1.on.aws",
      "x-forwarded-proto": "https",
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
      ...(opts.body ? { "content-type": "application/json" } : {}),
    },
    requestContext: {
      accountId: "anonymous",
      apiId: "abc123",
      domainName: "abc123.lambda-url.us-east-1.on.aws",
      domainPrefix: "abc123",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.9", userAgent: "test" },
      requestId: "req-1",
      routeKey: "$default",
      stage: "$default",
      time: "02/Dec/2026:00:00:00 +0000",
      timeEpoch: 1_796_169_600_000,
    },
    ...(opts.body ? { body: JSON.stringify(opts.body) } : {}),
    isBase64Encoded: false,
  }
}

/** A schedule event, as EventBridge Scheduler delivers it. */
const scheduled = {
  version: "0",
  id: "c1",
  "detail-type": "Scheduled Event",
  source: "aws.scheduler",
  account: "123456789012",
  time: "2026-12-02T12:00:00Z",
  region: "us-east-1",
  resources: ["arn:aws:scheduler:us-east-1:123456789012:schedule/default/Reconcile"],
  detail: {},
}

describe.runIf(javaAvailable())("bundled Lambdas on DynamoDB Local and fauxqs", () => {
  const servers: { stop(): Promise<void> }[] = []
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-lambda-bundles-"))
  const built: Record<string, Built> = {}
  /** Each bundle's environment: what Lambda sets, the test's endpoints, and what infra/ gives its function. */
  const env: Record<string, Record<string, string>> = {}
  let queueUrl = ""
  let sqsEndpoint = ""
  let adminKey = ""
  /** What the functions logged: every line must be a JSON object. */
  const logs: Record<string, unknown>[] = []

  beforeAll(async () => {
    const [dynamo, fauxqs] = await Promise.all([startDynamoLocal(), startFauxqs()])
    servers.push(dynamo, fauxqs)
    sqsEndpoint = fauxqs.endpoint
    await ensureTable(dynamoClient(dynamo.endpoint), Table)
    queueUrl = (
      await ensureQueues(sqsClient(fauxqs.endpoint), { name: Table, maxReceiveCount: 5, visibilityS: 360 })
    ).queueUrl
    // What Lambda sets, and where this test's DynamoDB and SQS are.
    const lambda = {
      PATH: process.env.PATH ?? "",
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      AWS_LAMBDA_LOG_LEVEL: "WARN",
      SWARMPLANE_DYNAMODB_ENDPOINT: dynamo.endpoint,
      SWARMPLANE_SQS_ENDPOINT: fauxqs.endpoint,
    }
    // This test's counterpart of each component a function can be linked to: its link's properties.
    const local: Record<string, Record<string, string>> = {
      State: { name: Table, type: "sst.aws.Dynamo" },
      ScheduleQueue: { url: queueUrl, type: "sst.aws.Queue" },
      ApiPepper: { value: Pepper, type: "sst.sst.Secret" },
    }
    // What infra/ gives each function: its links (SST sets SST_RESOURCE_App in every function) and
    // its variables, by the handler file it runs.
    try {
      const { functions } = await deploy("test")
      for (const [name, entry] of Object.entries(lambdaEntries)) {
        const fn = Object.values(functions).find((f) =>
          entry.endsWith(`${String(f.handler).split(".")[0]}.ts`),
        )
        if (!fn) throw new Error(`no function of infra/ runs ${entry}`)
        const links = (fn.link ?? []) as Linked[]
        env[name] = {
          ...lambda,
          SST_RESOURCE_App: JSON.stringify({ name: "swarmplane", stage: "test" }),
          ...Object.fromEntries(
            links.map((link) => {
              if (!local[link.name])
                throw new Error(`${name} is linked to ${link.name}, which this test has no counterpart of`)
              return [`SST_RESOURCE_${link.name}`, JSON.stringify(local[link.name])]
            }),
          ),
          ...(fn.environment as Record<string, string>),
        }
      }
    } finally {
      vi.unstubAllGlobals()
      vi.unstubAllEnvs()
    }
    const rt = createRuntime({
      store: DynamoStore({ client: dynamoClient(dynamo.endpoint), tableName: Table }),
      queue: SqsQueue({ client: sqsClient(fauxqs.endpoint), queueUrl }),
      logger: silentLogger,
      pepper: Pepper,
      secrets: { get: async () => "" },
    })
    await rt.repos.projects.create("default")
    adminKey = (await rt.repos.projects.createKey("default", "admin")).key
    for (const [name, entry] of Object.entries(lambdaEntries))
      built[name] = await buildHandler(entry, bundleSettings, join(dir, name))
    console.log(
      `bundles for ${lambdaRuntime} (infra/bundle.ts): ${Object.entries(built)
        .map(
          ([name, b]) =>
            `${name} ${Math.round(b.bytes / 1024)} KB (${Math.round(b.eagerBytes / 1024)} KB at import)`,
        )
        .join(", ")}`,
    )
  }, 180_000)

  afterAll(async () => {
    for (const s of servers) await s.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Each event to the bundled function `name`, in one fresh process. */
  async function call<T = Record<string, unknown>>(name: string, events: unknown[], remainingMs = 60_000) {
    const { stdout } = await run(
      process.execPath,
      ["--input-type=module", "-e", invoke, built[name]!.file, JSON.stringify(events), String(remainingMs)],
      { cwd: dir, env: env[name], timeout: 90_000 },
    )
    const lines = stdout.split("\n").filter(Boolean)
    const answers = lines.find((l) => l.startsWith("@@answers "))
    if (!answers) throw new Error(`no answers from the ${name} bundle: ${stdout}`)
    logs.push(
      ...lines
        .filter((l) => !l.startsWith("@@answers "))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    )
    return JSON.parse(answers.slice("@@answers ".length)) as T[]
  }

  const receive = async () =>
    (
      await sqsClient(sqsEndpoint).send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      )
    ).Messages ?? []

  test("each bundle holds its own code only: no ssh2, no SSM client at import", () => {
    for (const [name, b] of Object.entries(built)) {
      expect(
        b.eager.some((i) => i.includes("node_modules/ssh2/")),
        name,
      ).toBe(false)
      expect(
        b.eager.some((i) => i.includes("@aws-sdk/client-ssm")),
        name,
      ).toBe(false)
    }
  })

  test("the API answers Function URL requests: health, the caller, a backend and a job made, its schedule request sent", {
    timeout: 120_000,
  }, async () => {
    const answers = await call<{ statusCode: number; body: string }>("api", [
      httpEvent("GET", "/health"),
      httpEvent("GET", "/v1/me", { key: adminKey }),
      httpEvent("GET", "/v1/me"),
      httpEvent("POST", "/v1/backends", { key: adminKey, body: { id: "pool", config: { type: "workers" } } }),
      httpEvent("POST", "/v1/jobs", {
        key: adminKey,
        body: { backendId: "pool", command: ["true"], tasks: 2 },
      }),
    ])
    const [health, me, anonymous, backend, job] = answers.map((a) => ({
      status: a.statusCode,
      body: JSON.parse(a.body),
    }))
    expect(health).toMatchObject({ status: 200, body: { status: "ok" } })
    expect(me).toMatchObject({ status: 200, body: { project: "default", role: "admin", operator: true } })
    expect(anonymous).toMatchObject({ status: 401, body: { error: { code: "auth.unauthorized" } } })
    expect(backend!.status).toBe(201)
    expect(job).toMatchObject({ status: 202, body: { backendId: "pool" } })
    const reasons = (await receive()).map((m) => JSON.parse(m.Body ?? "{}").reason)
    expect(reasons).toEqual(expect.arrayContaining(["backend.created", "job.created"]))
  })

  test("the schedule consumer answers an SQS batch with partial failures: a poison message is dropped, not retried", {
    timeout: 120_000,
  }, async () => {
    const record = (messageId: string, body: string) => ({
      messageId,
      receiptHandle: `rh-${messageId}`,
      body,
      attributes: {
        ApproximateReceiveCount: "1",
        SentTimestamp: "1796169600000",
        SenderId: "AIDAEXAMPLE",
        ApproximateFirstReceiveTimestamp: "1796169600001",
      },
      messageAttributes: {},
      md5OfBody: "",
      eventSource: "aws:sqs",
      eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:ScheduleQueue",
      awsRegion: "us-east-1",
    })
    const request = JSON.stringify({
      kind: "backend",
      project: "default",
      id: "pool",
      reason: "test",
      backendId: "pool",
    })
    const [answer] = await call("schedule", [
      { Records: [record("m-1", request), record("m-2", "not json")] },
    ])
    expect(answer).toEqual({ batchItemFailures: [] })
  })

  test("the ticks answer schedule events: reconcile sends the backend with the job its ticks for the minute, the consumer runs the one due; an autoscale pass", {
    timeout: 120_000,
  }, async () => {
    const [reconcile] = await call("reconcile", [scheduled])
    expect(reconcile).toEqual({ sent: 12, busy: 1, backends: 1 })
    // Held back by the queue until due: the first now, the next 5 s later, and so on.
    const due = await receive()
    expect(due.map((m) => JSON.parse(m.Body ?? "{}"))).toEqual([
      { kind: "backend", project: "default", id: "pool", backendId: "pool", reason: "tick" },
    ])
    expect(ReconcileIntervalMs).toBeGreaterThanOrEqual(5_000)
    const [consumed] = await call("schedule", [
      {
        Records: due.map((m) => ({
          messageId: m.MessageId,
          receiptHandle: m.ReceiptHandle,
          body: m.Body,
          attributes: { ApproximateReceiveCount: "1" },
          messageAttributes: {},
          eventSource: "aws:sqs",
          awsRegion: "us-east-1",
        })),
      },
    ])
    expect(consumed).toEqual({ batchItemFailures: [] })
    // The pass ran: the job's tasks say why they wait (the backend has no workers yet).
    const [jobs] = await call<{ statusCode: number; body: string }>("api", [
      httpEvent("GET", "/v1/jobs?backendId=pool", { key: adminKey }),
    ])
    const [job] = JSON.parse(jobs!.body).items
    const [detail] = await call<{ statusCode: number; body: string }>("api", [
      httpEvent("GET", `/v1/jobs/${job.id}`, { key: adminKey }),
    ])
    expect(JSON.parse(detail!.body).tasks[0].pendingReason).toBeTruthy()
    const [autoscale] = await call("autoscale", [scheduled])
    expect(autoscale).toEqual({ busy: 0, backends: 1 })
    // With only what their functions are given: reconcile the table and the queue (it sends the ticks;
    // the consumer runs the passes); autoscale the table; no pepper, no backend secrets for either.
    const given = (name: string) =>
      Object.keys(env[name]!).filter((k) => /^SST_RESOURCE_|^SWARMPLANE_S[TE]/.test(k))
    expect(given("reconcile").sort()).toEqual([
      "SST_RESOURCE_App",
      "SST_RESOURCE_ScheduleQueue",
      "SST_RESOURCE_State",
    ])
    expect(given("autoscale").sort()).toEqual(["SST_RESOURCE_App", "SST_RESOURCE_State"])
  })
})
