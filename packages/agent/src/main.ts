/**
 * `swarmplane-agent`: the worker agent (`worker`), the echo model server (`echo-server`), the
 * standalone swarm router (`router`) and the batch inference runner of a job's tasks (`run-batch`).
 * `main` returns the exit code; the bin launcher exits with it.
 */
import { readFileSync } from "node:fs"
import { rename, writeFile } from "node:fs/promises"
import { controlPlane } from "./api-client"
import { runBatchCommand } from "./batch/command"
import { parseEchoServer, parseRouter, parseWorker, ReloadMs, UsageError, type WorkerConfig } from "./cli"
import { createEchoServer } from "./echo-server"
import { GroupRecords } from "./group-records"
import { type Logger, stderrLogger } from "./logger"
import { httpUrl } from "./net"
import { agentBin, PassedVariables, TokenVariable } from "./process-runner"
import { createRouter } from "./router"
import { RouterProcessCommand, runRouterProcess } from "./router-attempt"
import type { RouterTotals } from "./router-metrics"
import { detectSandbox, hiddenPathIssue, type Sandbox } from "./sandbox"
import { lookUpUser, type TaskUser } from "./task-user"
import { readToken } from "./token-file"
import { type UpstreamSource, watchUpstreamFiles } from "./upstream-files"
import { DefaultHeartbeatWaitS, FatalError, WorkerAgent } from "./worker"

const usage = `swarmplane-agent: the swarmplane worker agent, echo model server and swarm router

Usage:
  swarmplane-agent worker --api URL --backend ID [options]   register and run assigned work
  swarmplane-agent echo-server [--port P] [--host H]         an OpenAI-compatible echo model server
  swarmplane-agent router --upstream[-file] X... [opts]      a round-robin router over replicas
  swarmplane-agent run-batch --input F --output DIR [opts]   run one shard of a batch inference job
  swarmplane-agent <command> --help                          options of one command
`

const workerHelp = `swarmplane-agent worker: register with a swarmplane control plane and run the work it assigns

Options:
  --api URL             control plane base URL (required); https://, or http:// to this machine
  --backend ID          the \`workers\` backend this worker serves (required)
  --group G             scale group that started this worker
  --name N              display name (default: the host name)
  --instance-id I       the provider's id of this machine or process
  --cpu N               CPU cores offered (default: all)
  --memory-mib M        memory offered in MiB (default: 80% of RAM)
  --gpu G               GPUs offered (default 0)
  --gpu-type T          GPU model, e.g. h100
  --attr k=v            an attribute to advertise; repeatable
  --advertise-host H    host in the endpoints this worker reports (default 127.0.0.1)
  --token-file F        file holding the API token, only this user may read it; - reads stdin
  --token T             API token (shown in ps; ${TokenVariable} in the environment also works)
  --allow-http          allow http:// to a host other than this machine
  --heartbeat-wait S    ask the control plane to hold each heartbeat up to S seconds until new
                        work is placed here, so it starts at once (default ${DefaultHeartbeatWaitS});
                        0: heartbeat at the backend's interval only

Tasks:
  --isolation M         auto (default): private mount+pid namespaces when they work here;
                        namespaces: refuse to start without them; none: tasks run as this user
  --hide PATH           a file or folder tasks see empty (in namespaces); repeatable; the
                        state folder and a token file are always hidden
  --state-dir D         the agent's own folder (default $XDG_STATE_HOME/swarmplane-agent)
  --work-dir D          where each attempt gets a fresh working folder (default the OS temp folder)
  --keep-work-dirs      keep each attempt's working folder after it ended
  --pass-env NAME       a variable of the agent's environment tasks get too (NAME or PREFIX_*);
                        repeatable; tasks always get ${PassedVariables.join(" ")}
  --task-user U         run tasks as user U (an agent running as root only)

Tasks get their job's env and those variables, never the agent's token. The worker attribute
\`isolation\` (namespaces or none) says which isolation its tasks have.

Examples:
  swarmplane-agent worker --api http://127.0.0.1:8787 --backend local-workers --token-file ~/.sp-token
  swarmplane-agent worker --api https://api.example.com --backend gpu-pool --token-file - \\
    --gpu 8 --gpu-type h100 --attr zone=a --advertise-host 10.0.0.12 < token
`

const echoHelp = `swarmplane-agent echo-server: an OpenAI-compatible server that echoes the last user message

Options:
  --port P        port to listen on (default: $PORT, else a free port)
  --host H        address to listen on (default: $HOST, else 127.0.0.1)
  --fail-rate R   for tests: answer this fraction (0..1) of completions with 429 or 500 (default 0)
  --delay-ms N    for tests: wait N ms before answering each /v1/ request (default 0)
  --seed N        seed of those failures, for a reproducible sequence

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions, POST /v1/completions, GET /stats,
GET /requests (the prompts answered successfully, in order)

Example:
  swarmplane-agent echo-server --port 8000
`

const routerHelp = `swarmplane-agent router: one endpoint in front of a swarm's replicas (the least busy first)

Options:
  --upstream URL          a replica's base URL; repeatable
  --upstream-file PATH    a file holding a replica's host:port (or http(s):// URL), re-read while the
                          router runs; missing, empty or unparsable means no replica; repeatable
  --upstream-list PATH    a file holding one host:port (or URL) per line, re-read while the router runs
                          (on Slurm the control plane writes it: the replicas to send requests to)
  --counters-file PATH    write the router's counters there (JSON) every second while they change
  --wake-hold-s N         with no replica, hold each request N s for one to come (a swarm scaled to
                          zero), then answer 503 with Retry-After
  --reload-ms N           how often the upstream files are re-read (ms; default ${ReloadMs.default}, min ${ReloadMs.min})
  --port P                port to listen on (default: $PORT, else a free port)
  --host H                address to listen on (default 0.0.0.0)

At least one --upstream, --upstream-file or --upstream-list is required. Upstreams are used in the order given. A
change in the files is logged to stderr ("router: upstreams now ..."); GET /_swarmplane/router
shows the current upstreams.

Examples:
  swarmplane-agent router --port 9000 --upstream http://10.0.0.5:8000 --upstream http://10.0.0.6:8000
  swarmplane-agent router --port 9000 --upstream-file /shared/r_0.addr --upstream-file /shared/r_1.addr
`

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, ...args] = argv
  try {
    switch (command) {
      case "worker":
        return await runWorker(args, env)
      case "echo-server":
        return await runEchoServer(args, env)
      case "router":
        return await runRouter(args, env)
      case RouterProcessCommand:
        return await runRouterProcess()
      case "run-batch":
        return await runBatchCommand(args, env)
      case undefined:
        process.stderr.write(usage)
        return 2
      case "help":
      case "--help":
      case "-h":
        return help(usage)
      default:
        throw new UsageError(
          `unknown command "${command}"; the commands are worker, echo-server, router and run-batch`,
        )
    }
  } catch (error) {
    const prefix = command && command !== "help" ? `swarmplane-agent ${command}` : "swarmplane-agent"
    if (error instanceof UsageError) {
      process.stderr.write(`${prefix}: ${error.message}\n`)
      return 2
    }
    process.stderr.write(`${prefix}: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}

async function runWorker(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = parseWorker(args, env)
  if (config === "help") return help(workerHelp)
  const log = stderrLogger()
  const token = config.token ?? (await readToken(config.tokenFile ?? "-"))
  // Nothing the agent starts needs it; tasks never get it (see attemptEnv).
  delete process.env[TokenVariable]
  const { sandbox, records, user } = setUpTasks(config, log)
  if (sandbox.isolation === "none" && config.tokenFrom !== "file")
    log.warn(
      `the token is in this agent's ${config.tokenFrom === "flag" ? "command line" : "environment"}, which its tasks can read here; prefer --token-file`,
    )
  const agent = new WorkerAgent({
    api: controlPlane({ api: config.api, token }),
    registration: {
      ...config.registration,
      attributes: { ...config.registration.attributes, isolation: sandbox.isolation },
      agentVersion: agentVersion(),
    },
    advertiseHost: config.advertiseHost,
    log,
    ...(config.heartbeatWaitS !== undefined ? { heartbeatWaitS: config.heartbeatWaitS } : {}),
    tasks: {
      sandbox,
      records,
      workRoot: config.workRoot,
      keepWorkDirs: config.keepWorkDirs,
      passEnv: config.passEnv,
      ...(user ? { user } : {}),
    },
  })
  // Attempts run in their own process groups, so nothing else stops them if the agent dies.
  process.once("exit", () => agent.killAllNow())
  let signals = 0
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      log.warn(`${signal} again: killing all attempts now`)
      agent.killAllNow()
      process.exit(1)
    }
    log.info(`${signal}: stopping all attempts, then exiting`)
    void agent.shutdown()
  }
  process.on("SIGTERM", onSignal)
  process.on("SIGINT", onSignal)
  try {
    await agent.start()
    log.info("stopped")
    return 0
  } catch (error) {
    if (error instanceof FatalError) throw error
    throw new Error(`worker loop failed: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * Before the first attempt: 1. check the hidden paths, 2. open the state folder and kill what agents
 * that are gone left running there, 3. find the isolation that works here and say which.
 */
function setUpTasks(
  config: WorkerConfig,
  log: Logger,
): { sandbox: Sandbox; records: GroupRecords; user?: TaskUser } {
  const user = config.taskUser === undefined ? undefined : taskUser(config.taskUser)
  const needed = {
    "the attempts' working folders": config.workRoot,
    "this Node.js": process.execPath,
    "this agent": agentBin,
  }
  const tokenFile = config.tokenFile && config.tokenFile !== "-" ? [config.tokenFile] : []
  const checks: [string, string][] = [
    ...config.hide.map((p): [string, string] => [p, "--hide"]),
    [config.stateDir, "--state-dir"],
  ]
  for (const [path, flag] of checks) {
    const issue = hiddenPathIssue(path, needed, flag)
    if (issue) throw new UsageError(issue)
  }
  let records: GroupRecords
  try {
    records = new GroupRecords(config.stateDir)
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  for (const { record, processes } of records.reap())
    log.warn(
      `reaped the leftover process group ${record.pgid} of attempt ${record.attemptUid} (${processes} process${processes === 1 ? "" : "es"}): its agent (pid ${record.agentPid}) is gone`,
    )
  const sandbox = detectSandbox({
    mode: config.isolation,
    hide: outermost([...config.hide, config.stateDir, ...tokenFile]),
    ...(user ? { user } : {}),
  })
  log.info(sandbox.summary)
  return { sandbox, records, ...(user ? { user } : {}) }
}

function taskUser(spec: string): TaskUser {
  if (process.getuid?.() !== 0)
    throw new UsageError(
      `--task-user: only an agent running as root can run tasks as another user; drop --task-user, or start the agent as root`,
    )
  const user = lookUpUser(spec)
  if (typeof user === "string") throw new UsageError(user)
  return user
}

/** The paths not inside another of them (hiding a folder hides what is in it). */
function outermost(paths: string[]): string[] {
  const unique = [...new Set(paths)]
  return unique.filter((p) => !unique.some((q) => q !== p && p.startsWith(q.endsWith("/") ? q : `${q}/`)))
}

async function runEchoServer(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = parseEchoServer(args, env)
  if (config === "help") return help(echoHelp)
  const echo = createEchoServer({ failRate: config.failRate, seed: config.seed, delayMs: config.delayMs })
  const port = await echo.listen(config.port, config.host)
  process.stdout.write(`listening on ${httpUrl(shownHost(config.host), port)}\n`)
  await untilSignal()
  await echo.close()
  return 0
}

async function runRouter(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = parseRouter(args, env)
  if (config === "help") return help(routerHelp)
  let writeCounters: (() => void) | undefined
  const router = createRouter([], { onWaiting: () => writeCounters?.() })
  if (config.wakeHoldS) router.setHold(config.wakeHoldS * 1000)
  // Its counters for the control plane, which reads the file over SSH each pass (on Slurm).
  const counters = config.countersFile
    ? countersWriter(config.countersFile, () => router.metrics.totals(router.waiting()))
    : undefined
  writeCounters = counters?.write
  const watch = watchUpstreamFiles(router, config.upstreams, {
    everyMs: config.reloadMs,
    log: stderrLogger("router"),
  })
  // The first read before listening, so a router whose files are written already is ready at once.
  await watch.reload()
  const port = await router.listen(config.port, config.host)
  process.stdout.write(
    `listening on ${httpUrl(shownHost(config.host), port)} over ${describeSources(config.upstreams)}\n`,
  )
  await untilSignal()
  counters?.stop()
  watch.stop()
  await router.close()
  return 0
}

/**
 * Write the router's counters (`{ startedAt, ...totals }`) to `path` every second while they change,
 * and at once when asked (a request began to wait for a replica): a new file renamed over the old, so
 * a reader never sees half of one.
 */
function countersWriter(path: string, totals: () => RouterTotals) {
  const startedAt = Date.now()
  let last = ""
  let writing = false
  const write = () => {
    if (writing) return
    const text = JSON.stringify({ startedAt, ...totals() })
    if (text === last) return
    writing = true
    last = text
    const tmp = `${path}.${process.pid}.tmp`
    writeFile(tmp, text)
      .then(() => rename(tmp, path))
      .catch(() => {
        last = ""
      })
      .finally(() => {
        writing = false
      })
  }
  const timer = setInterval(write, 1000)
  timer.unref()
  write()
  return { write: () => setImmediate(write), stop: () => clearInterval(timer) }
}

function describeSources(sources: readonly UpstreamSource[]): string {
  return sources
    .map((s) =>
      "url" in s ? s.url : "list" in s ? `the addresses listed in ${s.list}` : `the address in ${s.file}`,
    )
    .join(", ")
}

function help(text: string): number {
  process.stdout.write(text)
  return 0
}

/** A wildcard address is not something to connect to; loopback is, on this machine. */
function shownHost(host: string): string {
  return host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host
}

function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"))
    process.once("SIGINT", () => resolve("SIGINT"))
  })
}

function agentVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
    const version = typeof pkg === "object" && pkg !== null && "version" in pkg ? pkg.version : undefined
    return typeof version === "string" ? version : "unknown"
  } catch {
    return "unknown"
  }
}
