/**
 * The scripts and login-node commands of swarms on Slurm, pure: each replica is a Slurm job of its own
 * (`<base>-r<slot>`) that starts the model server on a free port, waits for its health check, then
 * writes `host:port` to an address file beside its output; the swarm's router is a job of its own
 * (`<base>-router-g<generation it was made at>`, kept through every update) that sends requests to the
 * replicas its routing file lists and writes its counters to a file beside it. Compute nodes are
 * usually reachable only from inside the cluster, so every health check runs on the login node, in the
 * one command a pass reads a swarm with. Every stored value that reaches a script or a command is
 * quoted as one word or refused naming its field (`hostile.property.test.ts`).
 */
import { createHash } from "node:crypto"
import type { BackendConfigOf } from "../../model/backend"
import { SlurmGrammarText, SlurmNamePattern } from "../../model/slurm-grammar"
import type { Swarm } from "../../model/swarm"
import type { ReplicaObservation } from "../../rules/swarm-rollout"
import { isUnfinished } from "./observe"
import { SQUEUE_FORMAT, type SqueueRow } from "./parse"
import { mapSlurmState } from "./parse-state"
import {
  agentArgv,
  checked,
  exportLines,
  extraLines,
  headerLines,
  outputDirOf,
  quotable,
  setupLines,
  sh,
} from "./script"
import type { ExecResult } from "./ssh"

type SlurmConfig = BackendConfigOf<"slurm">

export interface SlurmServingOptions {
  config: SlurmConfig
  project: string
  backendId: string
  run(command: string, stdin?: string): Promise<ExecResult>
}

/**
 * Job names carry the project, the swarm and a tag of this incarnation of it (from its creation time,
 * so a swarm deleted and made again never adopts its predecessor's jobs). They are the same for the
 * same replica slot or router generation, so a retried submit adopts instead of duplicating.
 */
export const base = (project: string, swarm: Swarm) =>
  `sp-srv-${project}.${swarm.name}.${createHash("sha1").update(swarm.createdAt).digest("hex").slice(0, 6)}`
export const replicaJobName = (project: string, swarm: Swarm, slot: number) =>
  `${base(project, swarm)}-r${slot}`
export const routerJobName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-router-g${generation}`

/** How a job on a node names itself to others: its first address, else its host name. */
export const myAddress = `$(hostname -I 2>/dev/null | awk '{print $1}')`
export const freePort = `$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])' 2>/dev/null || shuf -i 20000-60000 -n 1)`

/** The server's argv, each word checked as text a program can receive (quoted when written). */
function replicaCommand(swarm: Swarm): string[] {
  const args = swarm.args.map((w, i) => quotable(`args[${i}]`, w))
  if (swarm.command) return [...swarm.command.map((w, i) => quotable(`command[${i}]`, w)), ...args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", ...args]
  return ["vllm", "serve", quotable("model", swarm.model), "--host", "0.0.0.0", "--port", "$PORT", ...args]
}

/** A word for the shell, except `$PORT`, which must expand. */
const word = (w: string) => (w === "$PORT" ? '"$PORT"' : sh(w))

function header(config: SlurmConfig, swarm: Swarm, name: string, extra: string[]): string[] {
  const own = swarm.serving.slurm?.partition
  const partition =
    own ?? (swarm.gpusPerReplica > 0 ? (config.gpuPartition ?? config.partition) : config.partition)
  return [
    ...headerLines(config, {
      name,
      partition,
      partitionField: own !== undefined ? "serving.slurm.partition" : "partition",
      timeLimit: swarm.serving.slurm?.timeLimit ?? config.timeLimit,
      timeField: swarm.serving.slurm?.timeLimit !== undefined ? "serving.slurm.timeLimit" : "timeLimit",
    }),
    // A replica or router whose node fails comes back (Slurm requeues it); the plane follows its address.
    "#SBATCH --requeue",
    ...extra,
    ...extraLines(config),
  ]
}

/** One replica's script (a job of its own; a replica larger than a node spans several). */
export function replicaScript(config: SlurmConfig, swarm: Swarm, name: string): string {
  const dir = outputDirOf(config)
  // A replica larger than a node spans `nodes` of them, its GPUs split evenly (GRES is per node).
  const nodes = swarm.serving.slurm?.nodesPerReplica ?? 1
  const gpusPerNode = Math.ceil(swarm.gpusPerReplica / nodes)
  return [
    ...header(config, swarm, name, [
      ...(nodes > 1 ? [`#SBATCH --nodes=${nodes}`, "#SBATCH --ntasks-per-node=1"] : []),
      `#SBATCH --cpus-per-task=${Math.max(1, Math.ceil(swarm.cpusPerReplica / nodes))}`,
      `#SBATCH --mem=${Math.ceil(swarm.memoryMiBPerReplica / nodes)}M`,
      ...(swarm.gpusPerReplica > 0
        ? [
            `#SBATCH --gres=${checked("gresGpuName", config.gresGpuName, SlurmNamePattern, SlurmGrammarText.name)}:${gpusPerNode}`,
          ]
        : []),
    ]),
    "",
    `addr=${sh(dir)}/${name}_0.addr`,
    // A requeued run starts elsewhere: its old address is gone until the new one serves.
    'rm -f "$addr"',
    `echo "swarmplane: replica run $(($\{SLURM_RESTART_COUNT:-0} + 1)) on $(hostname)"`,
    `export PORT=${freePort} HOST=0.0.0.0 MODEL=${sh(quotable("model", swarm.model))} SWARMPLANE_REPLICA_NODES=${nodes}`,
    ...exportLines(swarm.env, "env"),
    ...setupLines(config),
    `${agentArgv(config, replicaCommand(swarm)).map(word).join(" ")} &`,
    "server=$!",
    `until curl -sf -o /dev/null "http://127.0.0.1:$PORT"${sh(quotable("healthPath", swarm.healthPath))}; do kill -0 $server 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $server",
    "",
  ].join("\n")
}

/** Where a swarm's router reads the replicas to route to, and writes its counters. */
export const servingFiles = (config: SlurmConfig, project: string, swarm: Swarm) => {
  const dir = outputDirOf(config)
  return {
    routing: `${dir}/${base(project, swarm)}.routing`,
    counters: `${dir}/${base(project, swarm)}.counters`,
  }
}

/** The swarm's router: it follows the routing file and writes its counters beside it. */
export function routerScript(
  config: SlurmConfig,
  swarm: Swarm,
  name: string,
  files: { routing: string; counters: string },
): string {
  const dir = outputDirOf(config)
  // The swarm keeps its port across routers (a new one after a scale to 0 or a failure).
  const kept = swarm.url && URL.canParse(swarm.url) ? Number(new URL(swarm.url).port) || undefined : undefined
  const port = swarm.serving.slurm?.routerPort ?? kept
  const wake =
    swarm.autoscaling?.minReplicas === 0 ? ["--wake-hold-s", String(swarm.autoscaling.wakeTimeoutS)] : []
  const command = [
    ...(config.routerCommand?.map((w, i) => quotable(`routerCommand[${i}]`, w)) ??
      agentArgv(config, ["swarmplane-agent", "router"])),
    "--upstream-list",
    quotable("routing file", files.routing),
    "--counters-file",
    quotable("counters file", files.counters),
    ...wake,
  ]
  return [
    ...header(config, swarm, name, ["#SBATCH --cpus-per-task=1", "#SBATCH --mem=256M"]),
    "",
    `addr=${sh(dir)}/${name}_0.addr`,
    'rm -f "$addr"',
    `export PORT=${port ?? freePort}`,
    ...setupLines(config),
    `: >> ${sh(files.routing)}`,
    `${command.map((w) => sh(w)).join(" ")} --port "$PORT" &`,
    "router=$!",
    `until curl -s -o /dev/null "http://127.0.0.1:$PORT/_swarmplane/router"; do kill -0 $router 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $router",
    "",
  ].join("\n")
}

/** Submit a script read from stdin under a name, or print the id of the job that already has it. */
export const submit = (name: string, dir: string) =>
  [
    `existing=$(squeue -h -t all -u "$(id -un)" --name=${sh(name)} -o %F | head -n 1)`,
    `if [ -n "$existing" ]; then cat >/dev/null; echo "$existing"; exit 0; fi`,
    `mkdir -p ${sh(dir)} && rm -f ${sh(dir)}/${sh(name)}_*.addr && sbatch --parsable`,
  ].join("\n")

/** Cancel the jobs of these names (scancel takes one name at a time). */
export const cancelNamesCommand = (names: readonly string[]) =>
  names.length
    ? `for n in ${names.map(sh).join(" ")}; do scancel -u "$(id -un)" --name="$n"; done; true`
    : "true"

/**
 * Everything a pass needs of one swarm, in one command: `legacy` jobs cancelled first (a swarm served
 * by an earlier release, its replicas one array job), its jobs in the queue, a health probe of each
 * address file (a replica is healthy when its health check answers 2xx; the router when it says it
 * routes: it has replicas, or holds requests while one wakes), the routing file and the counters.
 */
export function observeCommand(o: {
  dir: string
  replicas: readonly string[]
  router?: string
  healthPath: string
  files: { routing: string; counters: string }
  legacy?: readonly string[]
}): string {
  const names = [...o.replicas, ...(o.router ? [o.router] : [])]
  return [
    ...(o.legacy?.length ? [cancelNamesCommand(o.legacy).replace(/; true$/, " 2>/dev/null")] : []),
    names.length
      ? `squeue -h -t all -u "$(id -un)" --name=${sh(names.join(","))} -o ${sh(SQUEUE_FORMAT)}`
      : "true",
    "echo @@addr",
    ...o.replicas.map(
      (n) =>
        `f=${sh(o.dir)}/${sh(n)}_0.addr; if [ -s "$f" ]; then a=$(head -c 256 "$f" | tr -d '\\n'); code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$a"${sh(o.healthPath)} || true); echo "$(basename "$f")|$a|$code"; fi`,
    ),
    ...(o.router
      ? [
          `f=${sh(o.dir)}/${sh(o.router)}_0.addr; if [ -s "$f" ]; then a=$(head -c 256 "$f" | tr -d '\\n'); body=$(curl -s -m 2 "http://$a/_swarmplane/router" || true); case "$body" in *'"ready":true'*) code=200;; "") code=000;; *) code=503;; esac; echo "$(basename "$f")|$a|$code"; fi`,
        ]
      : []),
    "echo @@routing",
    `head -c 262144 ${sh(o.files.routing)} 2>/dev/null`,
    "echo @@counters",
    `head -c 65536 ${sh(o.files.counters)} 2>/dev/null; true`,
  ].join("\n")
}

/** `observeCommand`'s output in its parts. */
export function observeSections(stdout: string) {
  const [queue = "", rest = ""] = stdout.split("@@addr\n")
  const [addrs = "", rest2 = ""] = rest.split("@@routing\n")
  const [routing = "", counters = ""] = rest2.split("@@counters\n")
  return {
    queue,
    probes: parseProbes(addrs),
    routed: routing
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean),
    counters,
  }
}

/** Write the routing file: the replicas the router sends requests to, one a line (a new file, renamed). */
export const routeCommand = (dir: string, routing: string, urls: readonly string[]) =>
  `mkdir -p ${sh(dir)} && printf '%s\\n' ${urls.map((u) => sh(u.replaceAll("\n", ""))).join(" ")} > ${sh(`${routing}.tmp`)} && mv ${sh(`${routing}.tmp`)} ${sh(routing)}`

export const lastLine = (text: string) => text.trim().split("\n").at(-1) ?? ""

export type Probes = Map<string, { addr: string; code: string }>

export function parseProbes(text: string): Probes {
  const out: Probes = new Map()
  for (const line of text.split("\n")) {
    const [file = "", addr = "", code = ""] = line.split("|")
    if (file.endsWith(".addr") && addr) out.set(file, { addr, code })
  }
  return out
}

/** What a job of the swarm is, from its queue row and the probe of its address file. */
export function slurmObservation(
  row: SqueueRow | undefined,
  probe: { addr: string; code: string } | undefined,
): ReplicaObservation {
  if (!row) return { state: "missing" }
  const state = mapSlurmState(row.state, row.reason)
  switch (state.kind) {
    case "pending":
      return {
        state: "pending",
        ...("message" in state && state.message ? { detail: `Slurm: ${state.message}` } : {}),
      }
    case "running": {
      const ok = !!probe && probe.code.startsWith("2")
      if (ok) return { state: "ready", url: `http://${probe!.addr}` }
      return { state: "starting", ...("message" in state && state.message ? { detail: state.message } : {}) }
    }
    case "killed":
      return { state: "ended", detail: "cancelled" }
    case "unknown":
      return { state: "starting", detail: state.message }
    default:
      return {
        state: "failed",
        over: !isUnfinished(row.state),
        detail: "message" in state && state.message ? state.message : state.state.toLowerCase(),
      }
  }
}
