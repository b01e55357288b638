/**
 * Swarms on Slurm, rolled by swarmplane (`rules/swarm-rollout`): each replica is a Slurm job of its own
 * (`<base>-r<slot>`) that writes its `host:port` to an address file once healthy, and a router job of
 * the swarm's own (`<base>-router-g<generation>`, started once and kept through every update) sends
 * requests to the replicas listed in the swarm's routing file, which the control plane writes over SSH
 * when the replicas that serve change. The router also writes its counters to a file the pass reads,
 * so the swarm's metrics, its autoscaling and its wake from zero work as on the `workers` backend.
 * Everything a pass needs of a swarm is read in one command: its jobs in the queue, a health probe of
 * each address file (run on the login node: compute nodes are usually reachable only from inside the
 * cluster), the routing file and the router's counters.
 */
import type { ReplicaSlot, Swarm } from "../../model/swarm"
import { RouterCounters } from "../../model/worker"
import type { ReplicaObservation, RouterObservation } from "../../rules/swarm-rollout"
import { BackendError } from "../../util/errors"
import { isUnfinished } from "./observe"
import { parseSqueue, SQUEUE_FORMAT, type SqueueRow } from "./parse"
import { mapSlurmState } from "./parse-state"
import { agentArgv, outputDirOf, quotable, setupLines, sh } from "./script"
import {
  base,
  freePort,
  header,
  lastLine,
  myAddress,
  parseProbes,
  replicaScript,
  type SlurmServingOptions,
  submit,
} from "./serving"

export const replicaJobName = (project: string, swarm: Swarm, slot: number) =>
  `${base(project, swarm)}-r${slot}`
export const swarmRouterName = (project: string, swarm: Swarm, generation: number) =>
  `${base(project, swarm)}-router-g${generation}`

export interface ReplicaSetObservation {
  router: RouterObservation
  replicas: Map<number, ReplicaObservation>
  /** The replicas the routing file lists now. */
  routed: string[]
  /** The router's counters, when it wrote them. */
  counters?: RouterCounters
}

/** The router of a rolled swarm: it follows the routing file and writes its counters beside it. */
export function swarmRouterScript(
  config: SlurmServingOptions["config"],
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
    files.routing,
    "--counters-file",
    files.counters,
    ...wake,
  ]
  return [
    ...header(config, swarm, name, ["#SBATCH --cpus-per-task=1", "#SBATCH --mem=256M"]),
    "",
    `addr=${sh(dir)}/${name}_0.addr`,
    'rm -f "$addr"',
    `export PORT=${port ?? freePort}`,
    ...setupLines(config),
    `touch ${sh(files.routing)}`,
    `${command.map((w) => sh(w)).join(" ")} --port "$PORT" &`,
    "router=$!",
    `until curl -s -o /dev/null "http://127.0.0.1:$PORT/_swarmplane/router"; do kill -0 $router 2>/dev/null || exit 1; sleep 1; done`,
    `echo "${myAddress}:$PORT" > "$addr.tmp" && mv "$addr.tmp" "$addr"`,
    "wait $router",
    "",
  ].join("\n")
}

/** What a job of the swarm is, from its queue row and the probe of its address file. Pure. */
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

export function SlurmReplicaSet(o: SlurmServingOptions) {
  const dir = outputDirOf(o.config)
  const files = (swarm: Swarm) => ({
    routing: `${dir}/${base(o.project, swarm)}.routing`,
    counters: `${dir}/${base(o.project, swarm)}.counters`,
  })
  const routerOf = (swarm: Swarm) =>
    typeof swarm.handle?.meta.router === "string" && swarm.handle.meta.layout === "replicas"
      ? swarm.handle.meta.router
      : undefined
  /** The router's state as this pass observed it, by swarm (so `runRouter` needs no command). */
  const routerSeen = new Map<string, RouterObservation>()
  const key = (swarm: Swarm) => `${swarm.project}/${swarm.name}`

  return {
    /** One command: the swarm's jobs in the queue, each address file probed, the routing file, the counters. */
    async observeReplicaSet(swarm: Swarm): Promise<ReplicaSetObservation> {
      const slots = (swarm.replicaSet?.replicas ?? []).map((r) => r.slot)
      const replicaNames = slots.map((slot) => replicaJobName(o.project, swarm, slot))
      const router = routerOf(swarm)
      const names = [...replicaNames, ...(router ? [router] : [])]
      const f = files(swarm)
      // A swarm served by an earlier release (its replicas one array job, a router per generation):
      // those jobs are cancelled, and it comes up again as rolled replicas.
      const legacy =
        swarm.handle?.meta.layout !== "replicas" && typeof swarm.handle?.meta.replicas === "string"
      const out = await o.run(
        [
          ...(legacy
            ? [
                `for n in ${sh(String(swarm.handle!.meta.replicas))} ${sh(String(swarm.handle!.meta.router))}; do scancel -u "$(id -un)" --name="$n" 2>/dev/null; done`,
              ]
            : []),
          names.length
            ? `squeue -h -t all -u "$(id -un)" --name=${names.map(sh).join(",")} -o ${sh(SQUEUE_FORMAT)}`
            : "true",
          "echo @@addr",
          // A replica is healthy when its health check answers 2xx; the router when it says it routes
          // (it has replicas, or holds requests while one wakes).
          ...replicaNames.map(
            (n) =>
              `f=${sh(dir)}/${sh(n)}_0.addr; if [ -s "$f" ]; then a=$(head -c 256 "$f" | tr -d '\\n'); code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$a"${sh(swarm.healthPath)} || true); echo "$(basename "$f")|$a|$code"; fi`,
          ),
          ...(router
            ? [
                `f=${sh(dir)}/${sh(router)}_0.addr; if [ -s "$f" ]; then a=$(head -c 256 "$f" | tr -d '\\n'); body=$(curl -s -m 2 "http://$a/_swarmplane/router" || true); case "$body" in *'"ready":true'*) code=200;; "") code=000;; *) code=503;; esac; echo "$(basename "$f")|$a|$code"; fi`,
              ]
            : []),
          "echo @@routing",
          `head -c 262144 ${sh(f.routing)} 2>/dev/null`,
          "echo @@counters",
          `head -c 65536 ${sh(f.counters)} 2>/dev/null; true`,
        ].join("\n"),
      )
      if (out.code !== 0)
        throw new BackendError(
          `squeue failed on ${o.config.loginHost}: ${lastLine(out.stderr || out.stdout)}`,
          true,
        )
      const [queue = "", rest = ""] = out.stdout.split("@@addr\n")
      const [addrs = "", rest2 = ""] = rest.split("@@routing\n")
      const [routing = "", counters = ""] = rest2.split("@@counters\n")
      const rows = parseSqueue(queue)
      const probes = parseProbes(addrs)
      // The latest row of a name (a requeued job keeps its id; a resubmitted one has a higher id).
      const rowOf = (name: string) =>
        rows
          .filter((r) => r.name === name)
          .sort((a, b) => Number.parseInt(b.jobId, 10) - Number.parseInt(a.jobId, 10))[0]
      const replicas = new Map<number, ReplicaObservation>()
      slots.forEach((slot, i) => {
        const name = replicaNames[i]!
        replicas.set(slot, slurmObservation(rowOf(name), probes.get(`${name}_0.addr`)))
      })
      const routerState = router
        ? slurmObservation(rowOf(router), probes.get(`${router}_0.addr`))
        : ({ state: "missing" } as const)
      routerSeen.set(key(swarm), routerState)
      const parsed = (() => {
        try {
          return RouterCounters.safeParse(JSON.parse(counters))
        } catch {
          return undefined
        }
      })()
      return {
        router: routerState,
        replicas,
        routed: routing
          .split("\n")
          .map((l) => l.trim())
          .filter(Boolean),
        ...(parsed?.success ? { counters: parsed.data } : {}),
      }
    },

    async startReplica(swarm: Swarm, replica: ReplicaSlot): Promise<void> {
      const name = replicaJobName(o.project, swarm, replica.slot)
      const r = await o.run(submit(name, dir), replicaScript(o.config, swarm, name, true))
      if (r.code !== 0 || !/^\d+/.test(r.stdout.trim()))
        throw new BackendError(
          `sbatch refused replica ${replica.slot}: ${lastLine(r.stderr || r.stdout)}`,
          false,
        )
    },

    async stopReplicas(swarm: Swarm, slots: readonly number[]): Promise<void> {
      if (!slots.length) return
      const names = slots.map((slot) => sh(replicaJobName(o.project, swarm, slot)))
      // scancel takes one name at a time.
      await o.run(`for n in ${names.join(" ")}; do scancel -u "$(id -un)" --name="$n"; done; true`)
    },

    async runRouter(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const current = routerOf(swarm)
      const seen = routerSeen.get(key(swarm))
      if (
        current &&
        seen &&
        seen.state !== "ended" &&
        seen.state !== "missing" &&
        !(seen.state === "failed" && seen.over)
      )
        return swarm.handle!
      const name = swarmRouterName(o.project, swarm, swarm.generation)
      if (name === current && seen?.state !== "missing")
        throw new BackendError(
          `the swarm's router (Slurm job ${name}) ended outside swarmplane; update the swarm to start a new one`,
          false,
        )
      const f = files(swarm)
      const r = await o.run(submit(name, dir), swarmRouterScript(o.config, swarm, name, f))
      const id = /^(\d+)/.exec(r.stdout.trim())?.[1]
      if (r.code !== 0 || !id)
        throw new BackendError(`sbatch refused the router: ${lastLine(r.stderr || r.stdout)}`, false)
      return { id, url: "", meta: { layout: "replicas", router: name, routerJob: id } }
    },

    async stopRouter(swarm: Swarm): Promise<void> {
      const router = routerOf(swarm)
      if (router) await o.run(`scancel -u "$(id -un)" --name=${sh(router)}; true`)
    },

    /** Write the routing file: the replicas the router sends requests to (a new file, renamed). */
    async route(swarm: Swarm, urls: readonly string[]): Promise<void> {
      const f = files(swarm)
      const lines = urls.map((u) => sh(u)).join(" ")
      const r = await o.run(
        `mkdir -p ${sh(dir)} && printf '%s\\n' ${lines} > ${sh(`${f.routing}.tmp`)} && mv ${sh(`${f.routing}.tmp`)} ${sh(f.routing)}`,
      )
      if (r.code !== 0)
        throw new BackendError(
          `could not write the routing file on ${o.config.loginHost}: ${lastLine(r.stderr)}`,
          true,
        )
    },
  }
}
