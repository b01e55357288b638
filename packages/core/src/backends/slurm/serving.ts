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
import type { Swarm } from "../../model/swarm"
import type { Runtime } from "../../runtime"
import type { ServingStatus } from "../protocol"
import { mapSlurmState, parseSqueue, SQUEUE_FORMAT } from "./parse"
import { agentArgv, outputDirOf, sh } from "./script"
import type { ExecResult } from "./ssh"

type SlurmConfig = BackendConfigOf<"slurm">

export interface SlurmServingOptions {
  config: SlurmConfig
  project: string
  backendId: string
  run(command: string, stdin?: string): Promise<ExecResult>
  rt(): Runtime
}

/**
 * Job names carry the project, the swarm, a tag of this incarnation of it (from its creation time, so a
 * swarm deleted and made again never adopts its predecessor's jobs) and the generation. They are the
 * same for the same swarm and generation, so a retried submit adopts instead of duplicating.
 */
const base = (project: string, swarm: Swarm) =>
  `sp-srv-${project}.${swarm.name}.${createHash("sha1").update(swarm.createdAt).digest("hex").slice(0, 6)}`
export const replicasName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-g${generation}`
export const routerName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-g${generation}-router`

/** How a job on a node names itself to others: its first address, else its host name. */
const myAddress = `$(hostname -I 2>/dev/null | awk '{print $1}')`
const freePort = `$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])' 2>/dev/null || shuf -i 20000-60000 -n 1)`

function replicaCommand(swarm: Swarm): string[] {
  if (swarm.command) return [...swarm.command, ...swarm.args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", ...swarm.args]
  return ["vllm", "serve", swarm.model, "--host", "0.0.0.0", "--port", "$PORT", ...swarm.args]
}

/** A word for the shell, except `$PORT`, which must expand. */
const word = (w: string) => (w === "$PORT" ? '"$PORT"' : sh(w))

function header(config: SlurmConfig, swarm: Swarm, name: string, extra: string[]): string[] {
  const partition =
    swarm.serving.slurm?.partition ??
    (swarm.gpusPerReplica > 0 ? (config.gpuPartition ?? config.partition) : config.partition)
  return [
    "#!/bin/bash",
    `#SBATCH --job-name=${name}`,
    `#SBATCH --partition=${partition}`,
    `#SBATCH --output=${outputDirOf(config)}/%x_%a.out`,
    `#SBATCH --time=${swarm.serving.slurm?.timeLimit ?? config.timeLimit}`,
    ...(config.account ? [`#SBATCH --account=${config.account}`] : []),
    ...(config.qos ? [`#SBATCH --qos=${config.qos}`] : []),
    ...extra,
    ...config.extraSbatch.map((line) => (line.startsWith("#SBATCH") ? line : `#SBATCH ${line}`)),
  ]
}

export function replicaScript(config: SlurmConfig, swarm: Swarm, name: string): string {
  const dir = outputDirOf(config)
  return [
    ...header(config, swarm, name, [
      `#SBATCH --array=0-${swarm.replicas - 1}`,
      `#SBATCH --cpus-per-task=${Math.max(1, Math.ceil(swarm.cpusPerReplica))}`,
      `#SBATCH --mem=${swarm.memoryMiBPerReplica}M`,
      ...(swarm.gpusPerReplica > 0 ? [`#SBATCH --gres=${config.gresGpuName}:${swarm.gpusPerReplica}`] : []),
    ]),
    "",
    `export PORT=${freePort} HOST=0.0.0.0 MODEL=${sh(swarm.model)}`,
    ...Object.entries(swarm.env).map(([k, v]) => `export ${k}=${sh(v)}`),
    ...config.setup,
    `${agentArgv(config, replicaCommand(swarm)).map(word).join(" ")} &`,
    "server=$!",
    `addr=${sh(dir)}/${name}_$SLURM_ARRAY_TASK_ID.addr`,
    `until curl -sf -o /dev/null "http://127.0.0.1:$PORT${swarm.healthPath}"; do kill -0 $server 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $server",
    "",
  ].join("\n")
}

export function routerScript(config: SlurmConfig, swarm: Swarm, name: string, replicas: string): string {
  const dir = outputDirOf(config)
  const command = config.routerCommand ?? agentArgv(config, ["swarmplane-agent", "router"])
  return [
    ...header(config, swarm, name, ["#SBATCH --cpus-per-task=1", "#SBATCH --mem=256M"]),
    "",
    `export PORT=${swarm.serving.slurm?.routerPort ?? freePort}`,
    ...config.setup,
    `files=(); for i in $(seq 0 ${swarm.replicas - 1}); do files+=(${sh(dir)}/${replicas}_$i.addr); done`,
    `all_ready() { for f in "\${files[@]}"; do [ -s "$f" ] || return 1; done; }`,
    "until all_ready; do sleep 1; done",
    `upstreams=(); for f in "\${files[@]}"; do upstreams+=(--upstream "http://$(cat "$f")"); done`,
    `${command.map(sh).join(" ")} --port "$PORT" "\${upstreams[@]}" &`,
    "router=$!",
    `addr=${sh(dir)}/${name}_0.addr`,
    `until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do kill -0 $router 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $router",
    "",
  ].join("\n")
}

const submit = (name: string, dir: string) =>
  [
    `existing=$(squeue -h -t all -u "$(id -un)" --name=${sh(name)} -o %F | head -n 1)`,
    `if [ -n "$existing" ]; then cat >/dev/null; echo "$existing"; exit 0; fi`,
    `mkdir -p ${sh(dir)} && rm -f ${sh(dir)}/${name}_*.addr && sbatch --parsable`,
  ].join("\n")

export function SlurmServing(o: SlurmServingOptions) {
  const dir = outputDirOf(o.config)

  return {
    async createOrUpdate(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const replicas = replicasName(o.project, swarm, swarm.generation)
      const router = routerName(o.project, swarm, swarm.generation)
      const r = await o.run(submit(replicas, dir), replicaScript(o.config, swarm, replicas))
      const replicaJob = /^(\d+)/.exec(r.stdout.trim())?.[1]
      if (r.code !== 0 || !replicaJob)
        throw new Error(`sbatch refused the replicas: ${(r.stderr || r.stdout).trim()}`)
      const q = await o.run(submit(router, dir), routerScript(o.config, swarm, router, replicas))
      const routerJob = /^(\d+)/.exec(q.stdout.trim())?.[1]
      if (q.code !== 0 || !routerJob)
        throw new Error(`sbatch refused the router: ${(q.stderr || q.stdout).trim()}`)
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

    async status(swarm: Swarm): Promise<ServingStatus | { gone: true }> {
      const meta = swarm.handle?.meta
      if (!meta || typeof meta.replicas !== "string" || typeof meta.router !== "string") return { gone: true }
      const replicas = meta.replicas
      const router = meta.router
      const out = await o.run(
        [
          `squeue -h -t all -u "$(id -un)" --name=${sh(replicas)},${sh(router)} -o ${sh(SQUEUE_FORMAT)}`,
          "echo @@addr",
          `for f in ${sh(dir)}/${replicas}_*.addr ${sh(dir)}/${router}_0.addr; do [ -s "$f" ] || continue; a=$(cat "$f"); code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$a${swarm.healthPath}" || true); echo "$(basename "$f")|$a|$code"; done`,
        ].join("\n"),
      )
      const [queue = "", addrs = ""] = out.stdout.split("@@addr\n")
      const rows = parseSqueue(queue)
      const health = new Map(
        addrs
          .split("\n")
          .filter(Boolean)
          .map((line) => {
            const [file = "", addr = "", code = ""] = line.split("|")
            return [
              file,
              { addr, ok: code.startsWith("2") || (file.startsWith(router) && code !== "000") },
            ] as const
          }),
      )
      const replicaRows = rows.filter((r) => r.name === replicas)
      const routerRow = rows.find((r) => r.name === router)
      if (!replicaRows.length && !routerRow) return { gone: true }
      const items = Array.from({ length: swarm.replicas }, (_, index) => {
        const row = replicaRows.find((r) => r.arrayTaskId === index || r.arrayTaskIds?.includes(index))
        const h = health.get(`${replicas}_${index}.addr`)
        const state = h?.ok ? "READY" : (row?.state ?? "UNKNOWN")
        return {
          index,
          state,
          ...(h ? { url: `http://${h.addr}` } : {}),
          ...(row && row.state === "PENDING" ? { message: row.reason } : {}),
        }
      })
      const ready = items.filter((i) => i.state === "READY").length
      const replicaStatus = { ready, total: swarm.replicas, items }
      const ended = [...replicaRows, ...(routerRow ? [routerRow] : [])].map((r) =>
        mapSlurmState(r.state, r.reason),
      )
      if (ended.length && ended.every((s) => s.kind === "killed"))
        return { phase: "STOPPED", replicas: replicaStatus, generation: swarm.generation }
      const failed = ended.find(
        (s) =>
          s.kind === "failed" ||
          s.kind === "worker_failed" ||
          s.kind === "preempted" ||
          s.kind === "killed" ||
          s.kind === "succeeded",
      )
      if (failed)
        return {
          phase: "FAILED",
          detail: `a serving job ended: ${failed.state}`,
          replicas: replicaStatus,
          generation: swarm.generation,
        }
      const routerHealth = health.get(`${router}_0.addr`)
      if (ready === swarm.replicas && routerHealth?.ok)
        return {
          phase: "RUNNING",
          url: `http://${routerHealth.addr}`,
          replicas: replicaStatus,
          generation: swarm.generation,
        }
      if (replicaRows.some((r) => r.state !== "PENDING"))
        return {
          phase: "INITIALIZING",
          detail: `${ready}/${swarm.replicas} replicas ready`,
          replicas: replicaStatus,
          generation: swarm.generation,
        }
      return {
        phase: "PENDING",
        detail: replicaRows[0]?.reason,
        replicas: replicaStatus,
        generation: swarm.generation,
      }
    },

    /** Cancel every job of the swarm and wait until none is queued or running. */
    async delete(swarm: Swarm): Promise<void> {
      await this.stopOthers(swarm, [])
    },
  }
}
