/**
 * The local control plane: the same API, schedule consumer and ticks as the deployed one, on
 * `@hono/node-server` with timers in place of the crons. It reads no environment itself:
 * `functions/local.ts` turns the environment into these options (tests build them).
 *
 * Its state lives in the data folder, in one of two stores (`LocalStore`): by default a journal
 * store in this process (`store.jsonl`: the in-memory store's semantics, each write appended to the
 * file before it is acknowledged) with the in-memory queue, or, to run the DynamoDB and SQS adapters
 * locally, embedded dynalite (`dynamo/`, DynamoDB's API over LevelDB) and fauxqs (SQS), reached
 * through the AWS SDK. The journal serves the API several times faster: dynalite and the SDK took
 * half of the process's CPU (`npm run bench -- local-api`).
 *
 * Steps: 1. data folder and its lock; 2. store and queue; 3. runtime; 4. bootstrap (default project,
 * admin key, CLI profile); 5. HTTP server; 6. schedule consumer and tick timers.
 */
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync } from "node:fs"
import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises"
import { availableParallelism, totalmem } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { serve } from "@hono/node-server"
import { createApp } from "@swarmplane/core/api/app"
import { bootstrapOperator } from "@swarmplane/core/bootstrap"
import { handleScheduleBatch } from "@swarmplane/core/control/schedule"
import { autoscaleTick, reconcileTick } from "@swarmplane/core/control/ticks"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import type { ScheduleQueue } from "@swarmplane/core/queue/port"
import { ensureQueues, SqsQueue } from "@swarmplane/core/queue/sqs"
import { createRuntime, type Runtime } from "@swarmplane/core/runtime"
import { FileSecrets } from "@swarmplane/core/secrets/files"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { JournalStore } from "@swarmplane/core/store/journal"
import type { StateStore } from "@swarmplane/core/store/port"
import type { Logger } from "@swarmplane/core/util/logger"
import { LocalProvider } from "./provider"
import { dynamoClient, type Embedded, sqsClient, startDynalite, startFauxqs } from "./servers"

/**
 * Where the plane keeps its state: `journal` (the default) or `dynalite` (the DynamoDB adapter on
 * embedded dynalite, with fauxqs as the queue).
 */
export type LocalStore = "journal" | "dynalite"
export const LocalStores: readonly LocalStore[] = ["journal", "dynalite"]

export interface LocalOptions {
  /** Folder for state, secrets and the admin key. Created when missing. */
  dataDir: string
  /**
   * Where the state is kept. Default: `journal`, except in a data folder that holds dynalite's state
   * and no journal (made before the journal store existed), which goes on with dynalite.
   */
  store?: LocalStore
  host: string
  /** 0 picks a free port. */
  port: number
  logger: Logger
  /** Use this admin key instead of a generated one. */
  adminKey?: string
  /** Where the CLI's config lives; a `local` profile is written there. Undefined: write none. */
  cliConfigDir?: string
  /** Register the `local` workers backend on start (default true). */
  localBackend?: boolean
  /** The agent launcher the local provider runs (default: this checkout's). */
  agentBin?: string
  /** The environment local worker agents start with (the edge passes its own). */
  agentEnv: Record<string, string | undefined>
  /** Tick periods, ms. */
  reconcileEveryMs?: number
  autoscaleEveryMs?: number
}

export interface LocalControlPlane {
  url: string
  /** Where the state is kept. */
  store: LocalStore
  adminKey: string
  /** True when this start made the admin key (first start). */
  adminKeyCreated: boolean
  runtime: Runtime
  stop(): Promise<void>
}

const TableName = "swarmplane-local"
const QueueName = "swarmplane-schedule"
const JournalFile = "store.jsonl"
const DynaliteFolder = "dynamo"

/** The store of a data folder when none is asked for: see `LocalOptions.store`. */
export function defaultLocalStore(dataDir: string): LocalStore {
  const dynalite = join(dataDir, DynaliteFolder)
  const hasDynalite = existsSync(dynalite) && readdirSync(dynalite).length > 0
  return hasDynalite && !existsSync(join(dataDir, JournalFile)) ? "dynalite" : "journal"
}

/**
 * Take the data folder's lock: a pid file created exclusively, so two starts cannot both pass. A lock
 * left by a process that is gone is taken over.
 */
async function acquireLock(dataDir: string): Promise<string> {
  const lock = join(dataDir, "control-plane.pid")
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lock, `${process.pid}\n`, { flag: "wx" })
      return lock
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
    const pid = Number((await readFile(lock, "utf8").catch(() => "")).trim())
    let alive = false
    try {
      if (pid > 0) {
        process.kill(pid, 0)
        alive = true
      }
    } catch {}
    if (alive)
      throw new Error(
        `another local control plane (pid ${pid}) uses ${dataDir}; stop it, or set SWARMPLANE_DATA_DIR to another folder`,
      )
    await rm(lock, { force: true })
  }
  throw new Error(`could not take the lock ${lock}; remove it if no control plane runs`)
}

async function readOrCreate(file: string, make: () => string): Promise<{ value: string; created: boolean }> {
  if (existsSync(file)) return { value: (await readFile(file, "utf8")).trim(), created: false }
  const value = make()
  await writeFile(file, `${value}\n`, { mode: 0o600 })
  return { value, created: true }
}

/** Write (or update) the CLI's `local` profile, keeping other profiles. */
async function writeCliProfile(dir: string, api: string, key: string): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const file = join(dir, "config.json")
  let config: { currentProfile?: string; profiles?: Record<string, { api: string; key: string }> } = {}
  try {
    config = JSON.parse(await readFile(file, "utf8"))
  } catch {}
  config.profiles = { ...config.profiles, local: { api, key } }
  config.currentProfile ??= "local"
  await writeFile(file, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 })
  await chmod(file, 0o600)
  return file
}

const defaultAgentBin = fileURLToPath(
  new URL("../../packages/agent/bin/swarmplane-agent.mjs", import.meta.url),
)

/**
 * The key local agents register with (a `worker` key of the operator project: it can act as a worker
 * and nothing else), kept in the data folder. A saved key that no longer works, or of another role (a
 * data folder from before the `worker` role kept a `write` key), is replaced, and an old one revoked.
 */
async function ensureWorkerKey(rt: Runtime, file: string): Promise<string> {
  let replaced: { id: string } | undefined
  if (existsSync(file)) {
    const key = (await readFile(file, "utf8")).trim()
    const saved = await rt.repos.projects.verifyKey(key)
    if (saved?.role === "worker" && !saved.revokedAt && !saved.expiresAt) return key
    if (saved && !saved.revokedAt) replaced = saved
  }
  const { key } = await rt.repos.projects.createKey(rt.operatorProject, "worker", { name: "local workers" })
  await writeFile(file, `${key}\n`, { mode: 0o600 })
  if (replaced) await rt.repos.projects.revokeKey(rt.operatorProject, replaced.id, rt.clock.now())
  return key
}

/**
 * CPUs each local worker offers per core of the machine. Local workers share one machine, as its
 * processes do, and what a laptop runs (echo servers, routers, I/O-bound shards waiting on an endpoint)
 * rarely keeps a core busy; placing by whole cores would run the README's 4 small shards one after
 * another behind a 2-replica swarm. The OS shares the cores; a task that needs them asks for more.
 */
export const LocalCpusPerCore = 4

/**
 * The `local` backend a new user runs work on with no setup: worker agents on this machine, started
 * by the autoscaler as work arrives (up to one per CPU) and stopped when idle. Each offers the machine
 * (they share it, as processes do): `LocalCpusPerCore` CPUs per core and 80% of its memory.
 */
async function ensureLocalBackend(rt: Runtime): Promise<void> {
  if (await rt.repos.backends.get(rt.operatorProject, "local")) return
  const cpus = availableParallelism()
  const config = BackendConfig.parse({
    type: "workers",
    displayName: "This machine",
    heartbeatIntervalS: 1,
    heartbeatGraceS: 15,
    scaleGroups: [
      {
        name: "local",
        provider: { type: "local" },
        min: 0,
        max: cpus,
        resources: { cpu: cpus * LocalCpusPerCore, memoryMiB: Math.floor((totalmem() / 1024 / 1024) * 0.8) },
        idleTimeoutS: 60,
      },
    ],
  })
  await rt.repos.backends.put(rt.operatorProject, "local", config)
}

/** A loop that runs `body` every `everyMs` without overlapping itself, until stopped. */
/**
 * Run `body` again and again, `everyMs` after each run ends, or after what the run returns (a loop
 * that paces itself by its cost).
 */
function every(everyMs: number, body: () => Promise<number | undefined>, logger: Logger) {
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> = Promise.resolve()
  const run = () => {
    if (stopped) return
    let pause = everyMs
    running = body()
      .then((ms) => {
        if (typeof ms === "number") pause = ms
      })
      .catch((error) =>
        logger.error(`loop failed: ${error instanceof Error ? error.message : String(error)}`),
      )
      .finally(() => {
        if (!stopped) timer = setTimeout(run, pause)
      })
  }
  timer = setTimeout(run, 0)
  return async () => {
    stopped = true
    clearTimeout(timer)
    await running
  }
}

/**
 * The journal store in the data folder, and the in-memory queue (what fauxqs was, without the SDK and
 * HTTP between: requests lost with the process are recovered by the reconcile tick, which reads the
 * active index).
 */
async function journalState(dataDir: string, stops: (() => Promise<void>)[]) {
  const store = JournalStore({ path: join(dataDir, JournalFile) })
  stops.push(async () => store.close())
  return { store: store as StateStore, queue: MemoryQueue({ maxReceiveCount: 5, visibilityS: 30 }) }
}

/** Embedded dynalite (on disk in the data folder) through the DynamoDB adapter, and fauxqs. */
async function dynaliteState(dataDir: string, stops: (() => Promise<void>)[]) {
  const folder = join(dataDir, DynaliteFolder)
  await mkdir(folder, { recursive: true })
  const dynalite: Embedded = await startDynalite(folder)
  stops.push(() => dynalite.stop())
  const dynamo = dynamoClient(dynalite.endpoint)
  stops.push(async () => dynamo.destroy())
  await ensureTable(dynamo, TableName)
  return {
    store: DynamoStore({ client: dynamo, tableName: TableName }) as StateStore,
    queue: await fauxqsQueue(stops),
  }
}

/** Embedded fauxqs (in memory: lost schedule requests are recovered by the reconcile tick). */
async function fauxqsQueue(stops: (() => Promise<void>)[]): Promise<ScheduleQueue> {
  const fauxqs: Embedded = await startFauxqs()
  stops.push(() => fauxqs.stop())
  const sqs = sqsClient(fauxqs.endpoint)
  stops.push(async () => sqs.destroy())
  const { queueUrl } = await ensureQueues(sqs, { name: QueueName, maxReceiveCount: 5, visibilityS: 30 })
  return SqsQueue({ client: sqs, queueUrl })
}

export async function startLocalControlPlane(options: LocalOptions): Promise<LocalControlPlane> {
  const { logger } = options
  const stops: (() => Promise<void>)[] = []
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {})
  }
  try {
    // 1. Data folder (this user's alone) and lock.
    await mkdir(options.dataDir, { recursive: true, mode: 0o700 })
    await mkdir(join(options.dataDir, "secrets"), { recursive: true, mode: 0o700 })
    const lock = await acquireLock(options.dataDir)
    stops.push(() => rm(lock, { force: true }))

    // 2. Store and queue.
    const kind = options.store ?? defaultLocalStore(options.dataDir)
    const { store, queue: scheduleQueue } =
      kind === "journal"
        ? await journalState(options.dataDir, stops)
        : await dynaliteState(options.dataDir, stops)

    // 3. Runtime.
    const pepper = (
      await readOrCreate(join(options.dataDir, "api-pepper"), () => randomBytes(32).toString("base64url"))
    ).value
    let connection: { api: string; token: string } | undefined
    const provider = LocalProvider({
      agentBin: options.agentBin ?? defaultAgentBin,
      env: options.agentEnv,
      logDir: join(options.dataDir, "workers"),
      // Tasks of local agents see neither the plane's data (keys, pepper, state) nor the CLI's profiles.
      hide: [options.dataDir, ...(options.cliConfigDir ? [options.cliConfigDir] : [])],
      stateDir: join(options.dataDir, "agents"),
      logger,
      connection: () => {
        if (!connection) throw new Error("the API is not listening yet")
        return connection
      },
      // An agent that died is a dead worker now, not after the heartbeat grace: its attempts are
      // requeued by the pass this asks for.
      onLost: (target, instanceId, how) =>
        void workerLost(target.project, target.backendId, instanceId, how).catch((error) =>
          logger.warn(`worker ${instanceId} ended (${how}); could not mark it dead: ${error.message}`),
        ),
    })
    const workerLost = async (project: string, backendId: string, instanceId: string, how: string) => {
      const worker = (await runtime.repos.workers.list(project, backendId)).find(
        (w) => w.instanceId === instanceId,
      )
      if (!worker || worker.health === "dead") return
      await runtime.repos.workers.leave(project, worker.id, "agent_exited", `its agent ${how}`)
      await runtime.queue.send([
        { kind: "backend", project, id: backendId, reason: "worker.lost", backendId },
      ])
    }
    const runtime = createRuntime({
      store,
      queue: scheduleQueue,
      logger,
      pepper,
      secrets: FileSecrets(join(options.dataDir, "secrets")),
      providers: { local: provider },
      // The API and the passes share this process: a held heartbeat costs nothing here.
      heartbeatHold: true,
    })
    // Agents stop before the API and the store go away (stops run in reverse).

    // 4. Bootstrap: the operator project and its admin key (kept in the data folder for later starts).
    const keyFile = join(options.dataDir, "admin-key")
    let adminKey = options.adminKey
    if (!adminKey && existsSync(keyFile)) {
      const saved = (await readFile(keyFile, "utf8")).trim()
      const info = await runtime.repos.projects.verifyKey(saved)
      if (info && !info.revokedAt) adminKey = saved
    }
    const boot = await bootstrapOperator(runtime, {
      keyName: "local admin key",
      ...(adminKey ? { key: adminKey } : { newKey: true }),
    })
    const adminKeyCreated = !adminKey
    adminKey = boot.adminKey?.key ?? adminKey!
    await writeFile(keyFile, `${adminKey}\n`, { mode: 0o600 })
    const workerKey = await ensureWorkerKey(runtime, join(options.dataDir, "worker-key"))
    if (options.localBackend !== false) await ensureLocalBackend(runtime)

    // 5. HTTP server.
    const app = createApp(runtime)
    const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
      const s = serve({ fetch: app.fetch, hostname: options.host, port: options.port }, () => resolve(s))
      s.once("error", (error: NodeJS.ErrnoException) =>
        reject(
          error.code === "EADDRINUSE"
            ? new Error(
                `port ${options.port} on ${options.host} is in use: stop the other process or set SWARMPLANE_PORT`,
              )
            : error,
        ),
      )
    })
    stops.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          // Open long-polls (`?wait`) would hold the close for up to 25 s: give them a moment, then cut them.
          const http = server as unknown as {
            closeIdleConnections?: () => void
            closeAllConnections?: () => void
          }
          http.closeIdleConnections?.()
          setTimeout(() => http.closeAllConnections?.(), 1_000).unref()
        }),
    )
    const address = server.address()
    const port = typeof address === "object" && address ? address.port : options.port
    const url = `http://${options.host}:${port}`
    if (options.cliConfigDir) await writeCliProfile(options.cliConfigDir, url, adminKey)
    connection = { api: url, token: workerKey }
    stops.push(() => provider.stopAll())

    // 6. Schedule consumer and ticks.
    const queue = runtime.queue
    // After a batch the consumer rests as long as the batch took (at most a second): under a burst
    // of submissions, back-to-back passes (each reads the backend's whole active index) would
    // otherwise take the event loop the API answers on; an idle plane still places a new job at once.
    stops.push(
      every(
        0,
        async () => {
          // As many as are waiting (SQS gives 10 at most): a batch is one pass per backend.
          const messages = await queue.receive({ max: 100, waitS: 1 })
          if (!messages.length) return 0
          const started = performance.now()
          const { retry } = await handleScheduleBatch(runtime, messages)
          await queue.delete(messages.filter((m) => !retry.includes(m.id)).map((m) => m.receipt))
          return Math.min(performance.now() - started, 1_000)
        },
        logger,
      ),
    )
    const reconcileEvery = options.reconcileEveryMs ?? 1_000
    stops.push(
      every(
        reconcileEvery,
        async () => {
          await reconcileTick(runtime)
          return undefined
        },
        logger,
      ),
    )
    stops.push(
      every(
        options.autoscaleEveryMs ?? 2_000,
        async () => {
          await autoscaleTick(runtime)
          return undefined
        },
        logger,
      ),
    )

    return { url, store: kind, adminKey, adminKeyCreated, runtime, stop: stopAll }
  } catch (error) {
    await stopAll()
    throw error
  }
}
