/**
 * Swarms on Slurm, rolled by swarmplane (`rules/swarm-rollout`): each replica is a Slurm job of its own
 * and the router a job of the swarm's own, kept through every update (the scripts and commands are in
 * `serving.ts`). The router learns its replicas from the swarm's routing file, which this writes over
 * SSH when the replicas that serve change, and writes its counters beside it, so the swarm's metrics,
 * its autoscaling and its wake from zero work as on the `workers` backend. A pass reads a swarm in one
 * command.
 */
import type { ReplicaSlot, Swarm } from "../../model/swarm"
import { RouterCounters } from "../../model/worker"
import type { ReplicaObservation, RouterObservation } from "../../rules/swarm-rollout"
import { BackendError } from "../../util/errors"
import { parseSqueue } from "./parse"
import { outputDirOf } from "./script"
import {
  cancelNamesCommand,
  lastLine,
  observeCommand,
  observeSections,
  replicaJobName,
  replicaScript,
  routeCommand,
  routerJobName,
  routerScript,
  type SlurmServingOptions,
  servingFiles,
  slurmObservation,
  submit,
} from "./serving"

export interface ReplicaSetObservation {
  router: RouterObservation
  replicas: Map<number, ReplicaObservation>
  /** The replicas the routing file lists now. */
  routed: string[]
  /** The router's counters, when it wrote them. */
  counters?: RouterCounters
}

export function SlurmReplicaSet(o: SlurmServingOptions) {
  const dir = outputDirOf(o.config)
  const files = (swarm: Swarm) => servingFiles(o.config, o.project, swarm)
  const routerOf = (swarm: Swarm) =>
    typeof swarm.handle?.meta.router === "string" && swarm.handle.meta.layout === "replicas"
      ? swarm.handle.meta.router
      : undefined
  /** The router's state as this pass observed it, by swarm (so `runRouter` needs no command). */
  const routerSeen = new Map<string, RouterObservation>()
  const key = (swarm: Swarm) => `${swarm.project}/${swarm.name}`

  return {
    async observeReplicaSet(swarm: Swarm): Promise<ReplicaSetObservation> {
      const slots = (swarm.replicaSet?.replicas ?? []).map((r) => r.slot)
      const replicaNames = slots.map((slot) => replicaJobName(o.project, swarm, slot))
      const router = routerOf(swarm)
      // A swarm served by an earlier release (its replicas one array job, a router per generation):
      // those jobs are cancelled, and it comes up again as rolled replicas.
      const meta = swarm.handle?.meta
      const legacy =
        meta && meta.layout !== "replicas" && typeof meta.replicas === "string"
          ? [meta.replicas, ...(typeof meta.router === "string" ? [meta.router] : [])]
          : undefined
      const out = await o.run(
        observeCommand({
          dir,
          replicas: replicaNames,
          ...(router ? { router } : {}),
          healthPath: swarm.healthPath,
          files: files(swarm),
          ...(legacy ? { legacy } : {}),
        }),
      )
      if (out.code !== 0)
        throw new BackendError(
          `squeue failed on ${o.config.loginHost}: ${lastLine(out.stderr || out.stdout)}`,
          true,
        )
      const parts = observeSections(out.stdout)
      const rows = parseSqueue(parts.queue)
      // The latest row of a name (a requeued job keeps its id; a resubmitted one has a higher id).
      const rowOf = (name: string) =>
        rows
          .filter((r) => r.name === name)
          .sort((a, b) => Number.parseInt(b.jobId, 10) - Number.parseInt(a.jobId, 10))[0]
      const replicas = new Map<number, ReplicaObservation>()
      slots.forEach((slot, i) => {
        const name = replicaNames[i]!
        replicas.set(slot, slurmObservation(rowOf(name), parts.probes.get(`${name}_0.addr`)))
      })
      const routerState = router
        ? slurmObservation(rowOf(router), parts.probes.get(`${router}_0.addr`))
        : ({ state: "missing" } as const)
      routerSeen.set(key(swarm), routerState)
      const parsed = (() => {
        try {
          return RouterCounters.safeParse(JSON.parse(parts.counters))
        } catch {
          return undefined
        }
      })()
      return {
        router: routerState,
        replicas,
        routed: parts.routed,
        ...(parsed?.success ? { counters: parsed.data } : {}),
      }
    },

    async startReplica(swarm: Swarm, replica: ReplicaSlot): Promise<void> {
      const name = replicaJobName(o.project, swarm, replica.slot)
      const r = await o.run(submit(name, dir), replicaScript(o.config, swarm, name))
      if (r.code !== 0 || !/^\d+/.test(r.stdout.trim()))
        throw new BackendError(
          `sbatch refused replica ${replica.slot}: ${lastLine(r.stderr || r.stdout)}`,
          false,
        )
    },

    async stopReplicas(swarm: Swarm, slots: readonly number[]): Promise<void> {
      if (!slots.length) return
      await o.run(cancelNamesCommand(slots.map((slot) => replicaJobName(o.project, swarm, slot))))
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
      const name = routerJobName(o.project, swarm, swarm.generation)
      if (name === current && seen?.state !== "missing")
        throw new BackendError(
          `the swarm's router (Slurm job ${name}) ended outside swarmplane; update the swarm to start a new one`,
          false,
        )
      const r = await o.run(submit(name, dir), routerScript(o.config, swarm, name, files(swarm)))
      const id = /^(\d+)/.exec(r.stdout.trim())?.[1]
      if (r.code !== 0 || !id)
        throw new BackendError(`sbatch refused the router: ${lastLine(r.stderr || r.stdout)}`, false)
      return { id, url: "", meta: { layout: "replicas", router: name, routerJob: id } }
    },

    async stopRouter(swarm: Swarm): Promise<void> {
      const router = routerOf(swarm)
      if (router) await o.run(cancelNamesCommand([router]))
    },

    async route(swarm: Swarm, urls: readonly string[]): Promise<void> {
      const r = await o.run(routeCommand(dir, files(swarm).routing, urls))
      if (r.code !== 0)
        throw new BackendError(
          `could not write the routing file on ${o.config.loginHost}: ${lastLine(r.stderr)}`,
          true,
        )
    },
  }
}
