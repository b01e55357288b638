/**
 * The deployed composition root: the one place that reads the environment, SST's linked resources
 * and secrets. Each handler takes the runtime built for what it uses, so its function is linked to and
 * allowed no more than that (`infra/` declares the same per function, and `test/infra-wiring.test.ts`
 * holds each function's links and environment to what its handler's bundle reads):
 *
 *   runtime()           the API (and scripts/bootstrap.ts): the table, the pepper, the schedule queue
 *                       (its link read on the first send) and backend secrets
 *   tickRuntime()       the reconcile cron: the table and the schedule queue (it fans the passes out)
 *   controlRuntime()    the schedule consumer (every pass): the table and backend secrets
 *   autoscaleRuntime()  the autoscale tick: the table (deployed, only worker-daemon backends autoscale,
 *                       and no provider of theirs reads a secret)
 *
 * Each is built once per Lambda container (cold start) and reused by every invocation. Only the clients
 * every invocation uses are loaded at import; the SSM client loads when a secret is first read.
 *
 *   Resource.State.name, Resource.ApiPepper.value, Resource.ScheduleQueue.url   (SST links)
 *   SWARMPLANE_SECRETS_PREFIX   SSM path of backend secrets (default /swarmplane/<SWARMPLANE_STAGE>/secrets)
 *   SWARMPLANE_OPERATOR_PROJECT project whose admin keys may create projects (default `default`; API)
 *   SWARMPLANE_LOG_LEVEL (or Lambda's AWS_LAMBDA_LOG_LEVEL)  debug, info (default), warn, error, silent
 *   SWARMPLANE_DYNAMODB_ENDPOINT, SWARMPLANE_SQS_ENDPOINT, SWARMPLANE_SSM_ENDPOINT  overrides (tests)
 */

import { randomBytes } from "node:crypto"
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { SQSClient } from "@aws-sdk/client-sqs"
import type { ControlDeps } from "@swarmplane/core/control/deps"
import type { ScheduleQueue } from "@swarmplane/core/queue/port"
import { SqsQueue } from "@swarmplane/core/queue/sqs"
import { createRuntime, type Runtime, type Secrets } from "@swarmplane/core/runtime"
import { SsmSecrets } from "@swarmplane/core/secrets/ssm"
import { DynamoStore } from "@swarmplane/core/store/dynamo"
import { jsonLogger, parseLogLevel } from "@swarmplane/core/util/logger"
import { Resource } from "sst"

type Env = NodeJS.ProcessEnv

let api: Runtime | undefined
let control: ControlDeps | undefined
let scaling: ControlDeps | undefined
let ticks: Runtime | undefined

const endpoint = (url: string | undefined) => (url ? { endpoint: url } : {})

/** What every runtime has: the table and the logger. */
function common(env: Env) {
  return {
    store: DynamoStore({
      client: new DynamoDBClient(endpoint(env.SWARMPLANE_DYNAMODB_ENDPOINT)),
      tableName: Resource.State.name,
    }),
    logger: jsonLogger({
      service: "swarmplane",
      // Ours, else the function's own log-level setting (Lambda's advanced logging controls).
      level: parseLogLevel(env.SWARMPLANE_LOG_LEVEL) ?? parseLogLevel(env.AWS_LAMBDA_LOG_LEVEL),
    }),
  }
}

/** Backend secrets (a config's sshKeySecret or tokenSecret) from SSM; the client loads on the first read. */
function backendSecrets(env: Env): Secrets {
  return SsmSecrets({
    client: async () => {
      const { SSMClient } = await import("@aws-sdk/client-ssm")
      return new SSMClient(endpoint(env.SWARMPLANE_SSM_ENDPOINT))
    },
    prefix: env.SWARMPLANE_SECRETS_PREFIX ?? `/swarmplane/${env.SWARMPLANE_STAGE ?? "dev"}/secrets`,
  })
}

/** The schedule queue: its link is read, and its client made, on the first call (a request that sends nothing needs neither). */
function scheduleQueue(env: Env): ScheduleQueue {
  let sqs: ScheduleQueue | undefined
  const queue = () =>
    (sqs ??= SqsQueue({
      client: new SQSClient(endpoint(env.SWARMPLANE_SQS_ENDPOINT)),
      queueUrl: Resource.ScheduleQueue.url,
    }))
  return {
    send: async (requests, delaysS) => queue().send(requests, delaysS),
    receive: async (options) => queue().receive(options),
    delete: async (receipts) => queue().delete(receipts),
    release: async (receipt) => queue().release(receipt),
  }
}

/** What a function is not given, should its handler ever reach for it: an error that says so. */
const notGiven = (what: string) => async (): Promise<never> => {
  throw new Error(`${what}: not given to this function (functions/deps.ts, infra/)`)
}

/** The control loop sends no schedule requests. */
const noQueue: ScheduleQueue = {
  send: notGiven("the schedule queue"),
  receive: notGiven("the schedule queue"),
  delete: notGiven("the schedule queue"),
  release: notGiven("the schedule queue"),
}

/**
 * The control loop hashes nothing: only the API verifies keys and worker credentials, registers
 * workers and seals idempotent responses, so only the API is linked to the pepper. The runtime still
 * wants one for its repositories; this one is random per process, so anything hashed with it could
 * never match what the API stored: a mistake fails closed.
 */
const noPepper = () => randomBytes(32).toString("base64")

/** The API's runtime (also scripts/bootstrap.ts's, under `sst shell`). */
export function runtime(env: Env = process.env): Runtime {
  api ??= createRuntime({
    ...common(env),
    queue: scheduleQueue(env),
    pepper: Resource.ApiPepper.value,
    secrets: backendSecrets(env),
    ...(env.SWARMPLANE_OPERATOR_PROJECT ? { operatorProject: env.SWARMPLANE_OPERATOR_PROJECT } : {}),
  })
  return api
}

/** A control-loop runtime: no pepper to hash with (see `noPepper`), the queue and secrets it is given. */
const loopRuntime = (env: Env, queue: ScheduleQueue, secrets: Secrets): Runtime =>
  createRuntime({ ...common(env), queue, pepper: noPepper(), secrets })

const noSecrets: Secrets = { get: notGiven("backend secrets") }

/**
 * The reconcile cron's: it sends each backend with work its ticks as schedule requests (the table and
 * the queue); the passes themselves run in the schedule consumer, so it reaches no backend's system.
 */
export function tickRuntime(env: Env = process.env): Runtime {
  ticks ??= loopRuntime(env, scheduleQueue(env), noSecrets)
  return ticks
}

/** The schedule consumer's: passes that reach the backends' systems. */
export function controlRuntime(env: Env = process.env): ControlDeps {
  control ??= loopRuntime(env, noQueue, backendSecrets(env))
  return control
}

/** The autoscale tick's: the table alone. */
export function autoscaleRuntime(env: Env = process.env): ControlDeps {
  scaling ??= loopRuntime(env, noQueue, noSecrets)
  return scaling
}

/** Forget the cached runtimes (tests that change the environment between cases). */
export function resetRuntime(): void {
  api = control = scaling = ticks = undefined
}
