import { describe, expect, test } from "vitest"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { parseSqueue } from "./parse"
import { parseProbes, replicaScript, routerScript, servingStatusFrom } from "./serving"
import { slurmConfig } from "./testing"

const config = slurmConfig()

function swarm(extra: Partial<Swarm> = {}): Swarm {
  return {
    ...SwarmSpec.parse({ name: "s", model: "echo", replicas: 2 }),
    project: "p",
    phase: "RUNNING",
    desired: "running",
    generation: 1,
    observedGeneration: 1,
    replicaStatus: { ready: 2, total: 2, items: [] },
    handle: { id: "40", url: "", meta: { generation: 1, replicas: "sp-srv-r", router: "sp-srv-r-router" } },
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
    ...extra,
  } as Swarm
}

const line = (id: string, task: string, name: string, state: string, reason = "None") =>
  `${id}|${task ? id.split("_")[0] : ""}|${task}|${name}|${state}|${reason}|0:05|10:00|debug|vm|1|1|1G|N/A`
const rows = (...lines: string[]) => parseSqueue(lines.join("\n"))
const probes = (...lines: string[]) => parseProbes(lines.join("\n"))

describe("a swarm's phase from its jobs", () => {
  test("a replica Slurm requeued elsewhere: a swarm that served stays RUNNING behind its router", () => {
    const status = servingStatusFrom(
      swarm(),
      rows(
        line("40_0", "0", "sp-srv-r", "RUNNING"),
        line("40_1", "1", "sp-srv-r", "PENDING", "BeginTime"),
        line("41", "", "sp-srv-r-router", "RUNNING"),
      ),
      probes("sp-srv-r_0.addr|10.0.0.1:5000|200", "sp-srv-r-router_0.addr|10.0.0.9:8000|404"),
    )
    expect(status).toMatchObject({
      phase: "RUNNING",
      url: "http://10.0.0.9:8000",
      detail: "1/2 replicas ready",
    })
  })

  test("a first start waits for every replica", () => {
    const status = servingStatusFrom(
      swarm({ phase: "INITIALIZING", observedGeneration: undefined }),
      rows(
        line("40_0", "0", "sp-srv-r", "RUNNING"),
        line("40_1", "1", "sp-srv-r", "RUNNING"),
        line("41", "", "sp-srv-r-router", "RUNNING"),
      ),
      probes("sp-srv-r_0.addr|10.0.0.1:5000|200", "sp-srv-r-router_0.addr|10.0.0.9:8000|404"),
    )
    expect(status).toMatchObject({ phase: "INITIALIZING", detail: "1/2 replicas ready" })
  })

  test("after a delete, nothing queued or running is idle, whatever the jobs ended in", () => {
    const status = servingStatusFrom(
      swarm({ phase: "FAILED", desired: "deleted" }),
      rows(
        line("40_0", "0", "sp-srv-r", "FAILED", "NonZeroExitCode"),
        line("40_1", "1", "sp-srv-r", "CANCELLED"),
        line("41", "", "sp-srv-r-router", "CANCELLED"),
      ),
      probes(),
    )
    expect(status).toMatchObject({ phase: "FAILED", idle: true })
  })

  test("jobs cancelled on the cluster fail a swarm that should run; after a delete they are STOPPED", () => {
    const cancelled = rows(
      line("40_0", "0", "sp-srv-r", "CANCELLED"),
      line("41", "", "sp-srv-r-router", "CANCELLED"),
    )
    expect(servingStatusFrom(swarm(), cancelled, probes())).toMatchObject({
      phase: "FAILED",
      detail: expect.stringContaining("cancelled on the cluster"),
    })
    expect(servingStatusFrom(swarm({ desired: "deleted" }), cancelled, probes())).toMatchObject({
      phase: "STOPPED",
    })
  })
})

describe("serving scripts", () => {
  test("replicas come back after a node failure and append to their log; the router follows their address files", () => {
    const replicas = replicaScript(config, swarm(), "sp-srv-r")
    expect(replicas).toContain("#SBATCH --requeue")
    expect(replicas).toContain("#SBATCH --open-mode=append")
    expect(replicas).toContain('rm -f "$addr"')
    const router = routerScript(config, swarm(), "sp-srv-r-router", "sp-srv-r")
    expect(router).toContain('upstreams+=(--upstream-file "$f")')
  })

  test("a replica larger than a node spans nodes, its GPUs, CPUs and memory split over them", () => {
    const big = swarm({
      gpusPerReplica: 8,
      cpusPerReplica: 16,
      memoryMiBPerReplica: 65536,
      serving: { slurm: { nodesPerReplica: 2 } },
    } as Partial<Swarm>)
    const script = replicaScript(config, big, "sp-srv-r")
    expect(script).toContain("#SBATCH --nodes=2")
    expect(script).toContain("#SBATCH --ntasks-per-node=1")
    expect(script).toContain("#SBATCH --gres=gpu:4")
    expect(script).toContain("#SBATCH --cpus-per-task=8")
    expect(script).toContain("#SBATCH --mem=32768M")
    expect(script).toContain("SWARMPLANE_REPLICA_NODES=2")
  })
})
