/**
 * Swarms on Slurm: the replicas are one array job; each replica starts the model server on a free
 * port, waits for its health check, then writes `host:port` to an address file beside its output. A
 * router job starts once every replica has an address and gives the swarm its one endpoint. Compute
 * nodes are usually reachable only from inside the cluster, so every health check runs on the login
 * node, through the same SSH connection. The handle keeps the job names and ids, so any later process
 * finds the deployment again.
 */
import { createHash } from "node:crypto"
import type { BackendConfigOf } from "../../model/backend"
import { SlurmGrammarText, SlurmNamePattern } from "../../model/slurm-grammar"
import type { Swarm } from "../../model/swarm"
import { BackendError } from "../../util/errors"
import type { ServingStatus } from "../protocol"
import { isUnfinished } from "./observe"
import { mapSlurmState, parseSqueue, SQUEUE_FORMAT, type SqueueRow } from "./parse"
import {
  agentArgv,
  checked,
  exportLines,
  extraLines,
  headerLines,
  JobNamePattern,
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
 * Job names carry the project, the swarm, a tag of this incarnation of it (from its creation time, so a
 * swarm deleted and made again never adopts its predecessor's jobs) and the generation. They are the
 * same for the same swarm and generation, so a retried submit adopts instead of duplicating.
 */
export const base = (project: string, swarm: Swarm) =>
  `sp-srv-${project}.${swarm.name}.${createHash("sha1").update(swarm.createdAt).digest("hex").slice(0, 6)}`
export const replicasName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-g${generation}`
export const routerName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-g${generation}-router`

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

export function header(config: SlurmConfig, swarm: Swarm, name: string, extra: string[]): string[] {
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
    // A replica or router whose node fails comes back (Slurm requeues it); the router follows its address.
    "#SBATCH --requeue",
    ...extra,
    ...extraLines(config),
  ]
}

/**
 * A replica's script: with `single`, one replica of its own job (the rolled replicas of a swarm); else
 * the swarm's replicas as one array job.
 */
export function replicaScript(config: SlurmConfig, swarm: Swarm, name: string, single = false): string {
  const dir = outputDirOf(config)
  // A replica larger than a node spans `nodes` of them, its GPUs split evenly (GRES is per node).
  const nodes = swarm.serving.slurm?.nodesPerReplica ?? 1
  const gpusPerNode = Math.ceil(swarm.gpusPerReplica / nodes)
  return [
    ...header(config, swarm, name, [
      ...(single ? [] : [`#SBATCH --array=0-${swarm.replicas - 1}`]),
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
    `addr=${sh(dir)}/${name}_\${SLURM_ARRAY_TASK_ID:-0}.addr`,
    // A requeued run starts elsewhere: its old address is gone until the new one serves.
    'rm -f "$addr"',
    `echo "swarmplane: replica \${SLURM_ARRAY_TASK_ID:-0} run $(($\{SLURM_RESTART_COUNT:-0} + 1)) on $(hostname)"`,
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

export function routerScript(config: SlurmConfig, swarm: Swarm, name: string, replicas: string): string {
  const dir = outputDirOf(config)
  checked("replicas job name", replicas, JobNamePattern, "a swarmplane job name")
  const command =
    config.routerCommand?.map((w, i) => quotable(`routerCommand[${i}]`, w)) ??
    agentArgv(config, ["swarmplane-agent", "router"])
  return [
    ...header(config, swarm, name, ["#SBATCH --cpus-per-task=1", "#SBATCH --mem=256M"]),
    "",
    `addr=${sh(dir)}/${name}_0.addr`,
    'rm -f "$addr"',
    `export PORT=${swarm.serving.slurm?.routerPort ?? freePort}`,
    ...setupLines(config),
    `files=(); for i in $(seq 0 ${swarm.replicas - 1}); do files+=(${sh(dir)}/${replicas}_$i.addr); done`,
    `all_ready() { for f in "\${files[@]}"; do [ -s "$f" ] || return 1; done; }`,
    "until all_ready; do sleep 1; done",
    // The router reads the address files again while it runs: a replica Slurm requeued elsewhere
    // writes its new address there, and the router follows it (the swarm's URL stays the same).
    `upstreams=(); for f in "\${files[@]}"; do upstreams+=(--upstream-file "$f"); done`,
    `${command.map((w) => sh(w)).join(" ")} --port "$PORT" "\${upstreams[@]}" &`,
    "router=$!",
    `until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do kill -0 $router 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $router",
    "",
  ].join("\n")
}

export const submit = (name: string, dir: string) =>
  [
    `existing=$(squeue -h -t all -u "$(id -un)" --name=${sh(name)} -o %F | head -n 1)`,
    `if [ -n "$existing" ]; then cat >/dev/null; echo "$existing"; exit 0; fi`,
    `mkdir -p ${sh(dir)} && rm -f ${sh(dir)}/${sh(name)}_*.addr && sbatch --parsable`,
  ].join("\n")

export const lastLine = (text: string) => text.trim().split("\n").at(-1) ?? ""

export function SlurmServing(o: SlurmServingOptions) {
  const dir = outputDirOf(o.config)

  return {
    /**
     * Submit (or adopt) the replicas and the router of the current generation, then cancel other
     * generations. Both scripts are written (and their values checked) before anything is submitted;
     * a refusal is final (`BackendError`, not retryable) and leaves nothing running.
     */
    async createOrUpdate(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const replicas = replicasName(o.project, swarm, swarm.generation)
      const router = routerName(o.project, swarm, swarm.generation)
      const replicaBody = replicaScript(o.config, swarm, replicas)
      const routerBody = routerScript(o.config, swarm, router, replicas)
      const r = await o.run(submit(replicas, dir), replicaBody)
      const replicaJob = /^(\d+)/.exec(r.stdout.trim())?.[1]
      if (r.code !== 0 || !replicaJob)
        throw new BackendError(`sbatch refused the replicas: ${lastLine(r.stderr || r.stdout)}`, false)
      const q = await o.run(submit(router, dir), routerBody)
      const routerJob = /^(\d+)/.exec(q.stdout.trim())?.[1]
      if (q.code !== 0 || !routerJob) {
        await o.run(`scancel ${sh(replicaJob)}`)
        throw new BackendError(`sbatch refused the router: ${lastLine(q.stderr || q.stdout)}`, false)
      }
      await this.stopOthers(swarm, [replicas, router])
      return {
        id: replicaJob,
        url: "",
        meta: { generation: swarm.generation, replicas, router, replicaJob, routerJob },
      }
    },

    /** Cancel the jobs of the swarm's other generations (an update replaces them). */
    async stopOthers(swarm: Swarm, keep: string[]) {
      const prefix = `${base(o.project, swarm)}-g`
      await o.run(
        [
          `ids=$(squeue -h -u "$(id -un)" -o '%F|%j' | awk -F'|' -v p=${sh(prefix)} ${keep.map((k, i) => `-v k${i}=${sh(k)}`).join(" ")} 'index($2,p)==1 ${keep.map((_, i) => `&& $2!=k${i}`).join(" ")} {print $1}' | sort -u)`,
          `[ -z "$ids" ] || scancel $ids`,
          "true",
        ].join("\n"),
      )
    },

    /** The deployment's state, from one command of its own (the reconcile pass batches this instead). */
    async status(swarm: Swarm): Promise<ServingStatus | { gone: true }> {
      const names = servingNames(swarm)
      if (!names) return { gone: true }
      const out = await o.run(
        [
          `squeue -h -t all -u "$(id -un)" --name=${sh(names.replicas)},${sh(names.router)} -o ${sh(SQUEUE_FORMAT)}`,
          "echo @@addr",
          probeCommand(dir, [swarm]),
        ].join("\n"),
      )
      const [queue = "", addrs = ""] = out.stdout.split("@@addr\n")
      return servingStatusFrom(swarm, parseSqueue(queue), parseProbes(addrs))
    },

    /** Cancel every job of the swarm and wait until none is queued or running. */
    async delete(swarm: Swarm): Promise<void> {
      await this.stopOthers(swarm, [])
    },
  }
}

/** The job names of a swarm's current deployment, from its handle. */
export function servingNames(swarm: Swarm): { replicas: string; router: string } | undefined {
  const meta = swarm.handle?.meta
  if (!meta || typeof meta.replicas !== "string" || typeof meta.router !== "string") return undefined
  return { replicas: meta.replicas, router: meta.router }
}

/**
 * Health probes of the swarms' address files, run on the login node (compute nodes are usually
 * reachable only from inside the cluster): one `<file>|<address>|<http code>` line per file.
 */
export function probeCommand(dir: string, swarms: Swarm[]): string {
  const lines = swarms.flatMap((swarm) => {
    const names = servingNames(swarm)
    if (!names) return []
    return [
      `for f in ${sh(dir)}/${sh(names.replicas)}_*.addr ${sh(dir)}/${sh(names.router)}_0.addr; do [ -s "$f" ] || continue; a=$(head -c 256 "$f" | tr -d '\\n'); code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$a"${sh(swarm.healthPath)} || true); echo "$(basename "$f")|$a|$code"; done`,
    ]
  })
  return lines.length ? lines.join("\n") : "true"
}

export type Probes = Map<string, { addr: string; code: string }>

export function parseProbes(text: string): Probes {
  const out: Probes = new Map()
  for (const line of text.split("\n")) {
    const [file = "", addr = "", code = ""] = line.split("|")
    if (file.endsWith(".addr") && addr) out.set(file, { addr, code })
  }
  return out
}

/**
 * A swarm's phase from its jobs' rows and the probes of its address files. `idle`: none of its jobs is
 * queued or running any more (a teardown is complete). A swarm that served stays RUNNING while its
 * router and at least one replica answer (a replica Slurm requeued elsewhere comes back behind the
 * same router); it is INITIALIZING until every replica first answers.
 */
export function servingStatusFrom(
  swarm: Swarm,
  rows: SqueueRow[],
  probes: Probes,
): ServingStatus | { gone: true } {
  const names = servingNames(swarm)
  if (!names) return { gone: true }
  const replicaRows = rows.filter((r) => r.name === names.replicas)
  const routerRow = rows.find((r) => r.name === names.router)
  if (!replicaRows.length && !routerRow) return { gone: true }
  const routerProbe = probes.get(`${names.router}_0.addr`)
  const routerOk = !!routerProbe && routerProbe.code !== "000" && routerProbe.code !== ""
  const items = Array.from({ length: swarm.replicas }, (_, index) => {
    const row = replicaRows.find((r) => r.arrayTaskId === index || r.arrayTaskIds?.includes(index))
    const probe = probes.get(`${names.replicas}_${index}.addr`)
    const ok = !!probe && probe.code.startsWith("2") && !!row && isUnfinished(row.state)
    const state = ok ? "READY" : (row?.state ?? "UNKNOWN")
    return {
      index,
      state,
      ...(probe ? { url: `http://${probe.addr}` } : {}),
      ...(row && mapSlurmState(row.state, row.reason).kind === "pending"
        ? { message: (mapSlurmState(row.state, row.reason) as { message: string }).message }
        : {}),
    }
  })
  const ready = items.filter((i) => i.state === "READY").length
  const replicas = { ready, total: swarm.replicas, items }
  const all = [...replicaRows, ...(routerRow ? [routerRow] : [])]
  const idle = all.every((r) => !isUnfinished(r.state))
  const ended = all.map((r) => mapSlurmState(r.state, r.reason))
  const base = { replicas, generation: swarm.generation, ...(idle ? { idle } : {}) }
  if (ended.every((s) => s.kind === "killed"))
    return swarm.desired === "deleted"
      ? { phase: "STOPPED", ...base }
      : {
          phase: "FAILED",
          detail: "its Slurm jobs were cancelled on the cluster, not through swarmplane",
          ...base,
        }
  const failed = ended.find((s) => !["pending", "running", "unknown"].includes(s.kind))
  if (failed) return { phase: "FAILED", detail: `a serving job ended: ${failed.state}`, ...base }
  const served = swarm.phase === "RUNNING" && swarm.observedGeneration === swarm.generation
  if (routerOk && (ready === swarm.replicas || (served && ready > 0)))
    return {
      phase: "RUNNING",
      url: `http://${routerProbe!.addr}`,
      ...(ready < swarm.replicas ? { detail: `${ready}/${swarm.replicas} replicas ready` } : {}),
      ...base,
    }
  if (replicaRows.some((r) => mapSlurmState(r.state, r.reason).kind === "running"))
    return { phase: "INITIALIZING", detail: `${ready}/${swarm.replicas} replicas ready`, ...base }
  const waiting = replicaRows.map((r) => mapSlurmState(r.state, r.reason)).find((s) => s.kind === "pending")
  return {
    phase: "PENDING",
    ...(waiting && "message" in waiting ? { detail: `Slurm: ${waiting.message}` } : {}),
    ...base,
  }
}
