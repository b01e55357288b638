import { describe, expect, test } from "vitest"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { swarmFixture } from "../../rules/testing"
import { parseSqueue } from "./parse"
import {
  observeCommand,
  observeSections,
  replicaJobName,
  replicaScript,
  routerJobName,
  routerScript,
  servingFiles,
  slurmObservation,
} from "./serving"
import { slurmConfig } from "./testing"

const config = slurmConfig()

const swarm = (extra: Partial<Swarm> = {}): Swarm => swarmFixture({ name: "s", ...extra })

const line = (id: string, name: string, state: string, reason = "None") =>
  `${id}||N/A|${name}|${state}|${reason}|0:05|10:00|debug|vm|1|1|1G|N/A`
const row = (state: string, reason = "None") => parseSqueue(line("40", "sp-srv-r0", state, reason))[0]

describe("a replica or router job, as the rollout plan sees it", () => {
  test("running and answering its health check: ready, at the address it wrote", () => {
    expect(slurmObservation(row("RUNNING"), { addr: "10.0.0.1:5000", code: "200" })).toEqual({
      state: "ready",
      url: "http://10.0.0.1:5000",
    })
  })

  test("running without an answer yet (or a non-2xx one): starting", () => {
    expect(slurmObservation(row("RUNNING"), undefined)).toMatchObject({ state: "starting" })
    expect(slurmObservation(row("RUNNING"), { addr: "10.0.0.1:5000", code: "503" })).toMatchObject({
      state: "starting",
    })
  })

  test("waiting in the queue: pending, with Slurm's reason", () => {
    expect(slurmObservation(row("PENDING", "Resources"), undefined)).toMatchObject({
      state: "pending",
      detail: expect.stringMatching(/^Slurm: /),
    })
  })

  test("a requeued replica (its node failed) is pending again, not failed", () => {
    expect(slurmObservation(row("PENDING", "BeginTime"), undefined).state).toBe("pending")
  })

  test("cancelled: ended; failed: failed and over; not in the queue: missing", () => {
    expect(slurmObservation(row("CANCELLED"), undefined)).toEqual({ state: "ended", detail: "cancelled" })
    expect(slurmObservation(row("FAILED", "NonZeroExitCode"), undefined)).toMatchObject({
      state: "failed",
      over: true,
    })
    expect(slurmObservation(undefined, undefined)).toEqual({ state: "missing" })
  })
})

describe("a swarm read in one command", () => {
  test("the command's output splits into its queue, probes, routing file and counters", () => {
    const out = [
      line("40", "sp-srv-r0", "RUNNING"),
      "@@addr",
      "sp-srv-r0_0.addr|10.0.0.1:5000|200",
      "sp-srv-router-g1_0.addr|10.0.0.9:8000|200",
      "@@routing",
      "http://10.0.0.1:5000",
      "",
      "@@counters",
      '{"requests":3}',
    ].join("\n")
    const parts = observeSections(out)
    expect(parseSqueue(parts.queue).map((r) => r.name)).toEqual(["sp-srv-r0"])
    expect(parts.probes.get("sp-srv-router-g1_0.addr")).toEqual({ addr: "10.0.0.9:8000", code: "200" })
    expect(parts.routed).toEqual(["http://10.0.0.1:5000"])
    expect(JSON.parse(parts.counters)).toEqual({ requests: 3 })
  })

  test("a swarm from an earlier release has its array and router jobs cancelled first", () => {
    const command = observeCommand({
      dir: "/out",
      replicas: [],
      healthPath: "/health",
      files: { routing: "/out/r", counters: "/out/c" },
      legacy: ["sp-srv-p.s.abc-g1", "sp-srv-p.s.abc-g1-router"],
    })
    expect(command.split("\n")[0]).toMatch(/^for n in sp-srv-p.s.abc-g1 sp-srv-p.s.abc-g1-router; do scancel/)
  })
})

describe("serving scripts", () => {
  test("a replica comes back after a node failure and appends to its log, its address file gone until it serves", () => {
    const replica = replicaScript(config, swarm(), replicaJobName("p", swarm(), 3))
    expect(replica).toContain("#SBATCH --requeue")
    expect(replica).toContain("#SBATCH --open-mode=append")
    expect(replica).not.toContain("--array")
    expect(replica).toContain('rm -f "$addr"')
    expect(replica).toMatch(/^addr=\S+\/sp-srv-p\.s\.[0-9a-f]{6}-r3_0\.addr$/m)
  })

  test("the router follows the routing file, writes its counters, and holds requests only when the swarm scales to zero", () => {
    const files = servingFiles(config, "p", swarm())
    const name = routerJobName("p", swarm(), 1)
    const router = routerScript(config, swarm(), name, files)
    expect(router).toContain(`--upstream-list ${files.routing} --counters-file ${files.counters}`)
    expect(router).not.toContain("--wake-hold-s")
    const zero = swarm({
      autoscaling: {
        ...SwarmSpec.parse({ name: "s", model: "echo", autoscaling: { minReplicas: 0, maxReplicas: 2 } })
          .autoscaling!,
      },
    })
    expect(routerScript(config, zero, name, files)).toMatch(/--wake-hold-s '?300'?/)
  })

  test("a new router keeps the swarm's port", () => {
    const files = servingFiles(config, "p", swarm())
    const router = routerScript(
      config,
      swarm({ url: "http://10.0.0.9:41234" }),
      routerJobName("p", swarm(), 2),
      files,
    )
    expect(router).toContain("export PORT=41234")
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
