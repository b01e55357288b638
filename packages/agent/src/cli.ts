/**
 * Command-line parsing of `swarmplane-agent`: flags to options, with one-line errors that name the
 * flag and the fix (a `UsageError`, exit code 2). Pure apart from the machine defaults it reads.
 */
import { availableParallelism, homedir, hostname, tmpdir, totalmem } from "node:os"
import { join, resolve } from "node:path"
import { type ParseArgsConfig, parseArgs } from "node:util"
import type { RegisterBody } from "./api-client"
import { isLoopback } from "./net"
import { TokenVariable } from "./process-runner"
import { type IsolationMode, IsolationModes } from "./sandbox"
import type { UpstreamSource } from "./upstream-files"

export class UsageError extends Error {}

export interface WorkerConfig {
  api: string
  /** The token, when given by `--token` or the environment; else it is read from `tokenFile`. */
  token?: string
  /** `--token-file`: a file holding the token, or `-` for stdin. */
  tokenFile?: string
  /** Where the token came from. */
  tokenFrom: "flag" | "environment" | "file"
  registration: RegisterBody
  advertiseHost: string
  /** What tasks run in: `--isolation`. */
  isolation: IsolationMode
  /** Absolute paths tasks must not see: `--hide`. */
  hide: string[]
  /** The agent's own folder (records of its process groups): `--state-dir`. */
  stateDir: string
  /** Where each attempt gets its fresh working folder: `--work-dir`. */
  workRoot: string
  keepWorkDirs: boolean
  /** Further variables of the agent's environment tasks get: `--pass-env`. */
  passEnv: string[]
  /** The user tasks run as, when the agent is root: `--task-user`. */
  taskUser?: string
  /** `--heartbeat-wait`: how long a heartbeat asks to be held for new work (0: never). */
  heartbeatWaitS?: number
}

export interface ServerConfig {
  port: number
  host: string
}

/** `echo-server`: failure injection for tests of clients (see `EchoOptions`), present only when given. */
export interface EchoServerConfig extends ServerConfig {
  failRate?: number
  seed?: number
  delayMs?: number
}

export interface RouterConfig extends ServerConfig {
  /** `--upstream` URLs and `--upstream-file` paths, in the order given. */
  upstreams: UpstreamSource[]
  /** How often the `--upstream-file`s are re-read. */
  reloadMs: number
  /** Where to write the router's counters (JSON, every second while they change), for the control plane. */
  countersFile?: string
  /** With no upstream, hold each request this long for one to come (a swarm scaled to zero). */
  wakeHoldS?: number
}

/** `--reload-ms`: often enough to follow a requeue, never so often it loads a shared file system. */
export const ReloadMs = { default: 1000, min: 100 } as const

type Options = NonNullable<ParseArgsConfig["options"]>

/** Parse one command's flags; `undefined` when `--help` was asked for. (Also used by batch/options.ts.) */
export function parse(
  command: string,
  args: string[],
  options: Options,
): Record<string, unknown> | undefined {
  const { values } = parseTokens(command, args, options)
  return values.help === true ? undefined : values
}

type Token = NonNullable<ReturnType<typeof parseArgs>["tokens"]>[number]

/** `parse` with the tokens too, for flags whose order matters; `help` is left in the values. */
function parseTokens(
  command: string,
  args: string[],
  options: Options,
): { values: Record<string, unknown>; tokens: Token[] } {
  try {
    const { values, tokens } = parseArgs({
      args,
      options: { ...options, help: { type: "boolean", short: "h" } },
      strict: true,
      tokens: true,
    })
    return { values, tokens }
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error)
    const unknown = /^Unknown option '([^']+)'/.exec(text)?.[1]
    const positional = /^Unexpected argument '([^']+)'/.exec(text)?.[1]
    const what = unknown
      ? `unknown option ${unknown}`
      : positional
        ? `unexpected argument "${positional}"`
        : (text.split(". ")[0] ?? text)
    throw new UsageError(`${what}; see 'swarmplane-agent ${command} --help'`)
  }
}

export function parseWorker(args: string[], env: NodeJS.ProcessEnv): WorkerConfig | "help" {
  const v = parse("worker", args, {
    api: { type: "string" },
    backend: { type: "string" },
    group: { type: "string" },
    name: { type: "string" },
    "instance-id": { type: "string" },
    cpu: { type: "string" },
    "memory-mib": { type: "string" },
    gpu: { type: "string" },
    "gpu-type": { type: "string" },
    attr: { type: "string", multiple: true },
    "advertise-host": { type: "string" },
    token: { type: "string" },
    "token-file": { type: "string" },
    "allow-http": { type: "boolean" },
    isolation: { type: "string" },
    hide: { type: "string", multiple: true },
    "state-dir": { type: "string" },
    "work-dir": { type: "string" },
    "keep-work-dirs": { type: "boolean" },
    "pass-env": { type: "string", multiple: true },
    "task-user": { type: "string" },
    "heartbeat-wait": { type: "string" },
  })
  if (!v) return "help"
  const api = required(v.api, "--api", "the control plane's URL, e.g. --api https://api.example.com")
  let url: URL
  try {
    url = new URL(api)
  } catch {
    throw new UsageError(
      `--api: "${api}" is not a URL; give the control plane's base URL, e.g. https://api.example.com`,
    )
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new UsageError(
      `--api: "${api}" must start with https:// (or http:// for a control plane on this machine)`,
    )
  if (url.protocol === "http:" && !isLoopback(url.hostname) && v["allow-http"] !== true)
    throw new UsageError(
      `--api: http:// to ${url.hostname} would send the token in clear text; use https://, or add --allow-http on a trusted network`,
    )
  const tokenFile = str(v["token-file"])
  if (tokenFile && str(v.token))
    throw new UsageError("--token and --token-file: give one of them (--token-file keeps it out of ps)")
  const token = tokenFile ? undefined : (str(v.token) ?? env[TokenVariable])
  if (!token && !tokenFile)
    throw new UsageError(
      `no token: pass --token-file FILE (a file only this user can read, or - for stdin) or set ${TokenVariable}`,
    )
  const tokenFrom = tokenFile ? "file" : str(v.token) ? "flag" : "environment"
  const isolation = str(v.isolation) ?? "auto"
  if (!(IsolationModes as readonly string[]).includes(isolation))
    throw new UsageError(`--isolation: "${isolation}" must be one of ${IsolationModes.join(", ")}`)
  const backendId = required(
    v.backend,
    "--backend",
    "the id of a `workers` backend, e.g. --backend local-workers",
  )
  const gpuType = str(v["gpu-type"])
  const registration: RegisterBody = {
    backendId,
    scaleGroup: str(v.group),
    name: str(v.name) ?? hostname(),
    resources: {
      cpu: number(v.cpu, "--cpu", { min: 0.001, integer: false }) ?? availableParallelism(),
      memoryMiB:
        number(v["memory-mib"], "--memory-mib", { min: 1 }) ?? Math.floor((totalmem() * 0.8) / 2 ** 20),
      gpu: number(v.gpu, "--gpu", { min: 0 }) ?? 0,
      ...(gpuType ? { gpuType } : {}),
    },
    attributes: attributes(v.attr),
    instanceId: str(v["instance-id"]),
  }
  const advertiseHost = str(v["advertise-host"]) ?? "127.0.0.1"
  // The worker has no port of its own (each replica and router has one); the host says where it is.
  registration.address = advertiseHost
  const stateHome = env.XDG_STATE_HOME || join(homedir(), ".local", "state")
  return {
    api,
    ...(token ? { token } : {}),
    ...(tokenFile ? { tokenFile: tokenFile === "-" ? "-" : resolve(tokenFile) } : {}),
    tokenFrom,
    registration,
    advertiseHost,
    isolation: isolation as IsolationMode,
    hide: strings(v.hide).map((p) => resolve(p)),
    stateDir: resolve(str(v["state-dir"]) ?? join(stateHome, "swarmplane-agent")),
    workRoot: resolve(str(v["work-dir"]) ?? tmpdir()),
    keepWorkDirs: v["keep-work-dirs"] === true,
    passEnv: strings(v["pass-env"]).map(passedVariable),
    ...(str(v["task-user"]) ? { taskUser: str(v["task-user"]) } : {}),
    ...optional("heartbeatWaitS", number(v["heartbeat-wait"], "--heartbeat-wait", { min: 0 })),
  }
}

/** `{ [key]: value }`, or nothing when the value is absent. */
function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }
}

/** `--pass-env NAME` or `--pass-env PREFIX_*`: never everything, never the agent's own variables. */
function passedVariable(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(name))
    throw new UsageError(
      `--pass-env: "${name}" must be a variable name, or a prefix ending in *, e.g. --pass-env HF_HOME or --pass-env NCCL_*`,
    )
  const prefix = name.endsWith("*") ? name.slice(0, -1).toUpperCase() : undefined
  if (
    name.toUpperCase().startsWith("SWARMPLANE_") ||
    (prefix !== undefined && "SWARMPLANE_".startsWith(prefix))
  )
    throw new UsageError(
      `--pass-env: "${name}" would pass the agent's own SWARMPLANE_ variables (its token); name the variables tasks need`,
    )
  return name
}

function strings(values: unknown): string[] {
  return (Array.isArray(values) ? values : []).map(String).filter((s) => s !== "")
}

export function parseEchoServer(args: string[], env: NodeJS.ProcessEnv): EchoServerConfig | "help" {
  const v = parse("echo-server", args, {
    port: { type: "string" },
    host: { type: "string" },
    "fail-rate": { type: "string" },
    seed: { type: "string" },
    "delay-ms": { type: "string" },
  })
  if (!v) return "help"
  const config: EchoServerConfig = {
    port: port(str(v.port) ?? env.PORT, str(v.port) ? "--port" : "PORT") ?? 0,
    host: str(v.host) ?? env.HOST ?? "127.0.0.1",
  }
  const failRate = number(v["fail-rate"], "--fail-rate", { min: 0, integer: false })
  if (failRate !== undefined && failRate > 1)
    throw new UsageError(`--fail-rate: "${failRate}" must be a fraction from 0 to 1, e.g. --fail-rate 0.1`)
  if (failRate !== undefined) config.failRate = failRate
  const seed = number(v.seed, "--seed", { min: 0 })
  if (seed !== undefined) config.seed = seed
  const delayMs = number(v["delay-ms"], "--delay-ms", { min: 0 })
  if (delayMs !== undefined) config.delayMs = delayMs
  return config
}

export function parseRouter(args: string[], env: NodeJS.ProcessEnv): RouterConfig | "help" {
  const { values: v, tokens } = parseTokens("router", args, {
    port: { type: "string" },
    host: { type: "string" },
    upstream: { type: "string", multiple: true },
    "upstream-file": { type: "string", multiple: true },
    "upstream-list": { type: "string", multiple: true },
    "reload-ms": { type: "string" },
    "counters-file": { type: "string" },
    "wake-hold-s": { type: "string" },
  })
  if (v.help === true) return "help"
  // From the tokens rather than the values, to keep the order of --upstream and --upstream-file.
  const upstreams = tokens.flatMap((t): UpstreamSource[] => {
    if (t.kind !== "option" || t.value === undefined) return []
    if (t.name === "upstream") return [{ url: upstreamUrl(t.value) }]
    if (t.name === "upstream-file") return [{ file: upstreamFile(t.value) }]
    if (t.name === "upstream-list") return [{ list: upstreamFile(t.value, "--upstream-list") }]
    return []
  })
  if (upstreams.length === 0)
    throw new UsageError(
      "--upstream, --upstream-file or --upstream-list: give at least one replica, e.g. --upstream http://10.0.0.5:8000, --upstream-file /shared/replica_0.addr or --upstream-list /shared/swarm.routing",
    )
  return {
    port: port(str(v.port) ?? env.PORT, str(v.port) ? "--port" : "PORT") ?? 0,
    host: str(v.host) ?? "0.0.0.0",
    upstreams,
    reloadMs: number(v["reload-ms"], "--reload-ms", { min: ReloadMs.min }) ?? ReloadMs.default,
    ...(str(v["counters-file"]) ? { countersFile: str(v["counters-file"]) } : {}),
    ...(v["wake-hold-s"] !== undefined
      ? { wakeHoldS: number(v["wake-hold-s"], "--wake-hold-s", { min: 1 }) }
      : {}),
  }
}

function upstreamUrl(u: string): string {
  if (!URL.canParse(u) || !/^https?:$/.test(new URL(u).protocol))
    throw new UsageError(`--upstream: "${u}" is not an http(s) URL; e.g. --upstream http://10.0.0.5:8000`)
  return u
}

function upstreamFile(path: string, flag = "--upstream-file"): string {
  // The file itself may not exist yet (the replica has not written it); only the path is checked.
  if (path.trim() === "")
    throw new UsageError(
      flag === "--upstream-file"
        ? "--upstream-file: give the path of a file holding host:port, e.g. /shared/r_0.addr"
        : "--upstream-list: give the path of a file holding one host:port per line, e.g. /shared/swarm.routing",
    )
  return path
}

/** A flag's or variable's text; undefined when absent or empty. */
export function str(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined
}

export function required(value: unknown, flag: string, hint: string): string {
  const s = str(value)
  if (!s) throw new UsageError(`${flag} is required: ${hint}`)
  return s
}

/** A numeric flag or variable, checked: a one-line error naming it, when it is not one. */
export function number(
  value: unknown,
  flag: string,
  { min, integer = true }: { min: number; integer?: boolean },
): number | undefined {
  const s = str(value)
  if (s === undefined) return undefined
  const n = Number(s)
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
    throw new UsageError(
      `${flag}: "${s}" must be ${integer ? "a whole number" : "a number"} of at least ${min}`,
    )
  return n
}

function port(value: string | undefined, flag: string): number | undefined {
  if (value === undefined || value === "") return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new UsageError(`${flag}: "${value}" must be a port number 0..65535 (0 picks a free port)`)
  return n
}

function attributes(values: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  for (const item of Array.isArray(values) ? values : []) {
    const text = String(item)
    const eq = text.indexOf("=")
    const key = text.slice(0, eq)
    if (eq <= 0 || !/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(key))
      throw new UsageError(
        `--attr: "${text}" must be key=value with a key of letters, digits, '.', '_', '/', '-'; e.g. --attr accelerator=h100`,
      )
    out[key] = text.slice(eq + 1)
  }
  return out
}
