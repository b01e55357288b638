import { generateKeyPairSync } from "node:crypto"
/**
 * Conformance of every backend type the registry maps to the protocols (DESIGN.md §3): the required
 * core is complete, each optional capability is all there or not at all (its guard decides; nothing
 * answers with a stub), calls resolve or fail with a transport error where they need a cluster, and
 * the descriptor is complete. A type of the config union with no factory is refused by name. Method
 * lists are checked against the interfaces at compile time, so a member added without a test fails
 * to compile.
 */
import type { z } from "@hono/zod-openapi"
import { describe, expect, test } from "vitest"
import { type Backend, BackendConfig, kindOfType } from "../model/backend"
import { type Job, JobSpec } from "../model/job"
import { type BackendType, BackendTypes } from "../model/states"
import type { Swarm } from "../model/swarm"
import { MemoryQueue } from "../queue/memory"
import { createRuntime } from "../runtime"
import { MemoryStore } from "../store/memory"
import { FakeClock } from "../util/clock"
import { BackendError } from "../util/errors"
import { silentLogger } from "../util/logger"
import {
  type AutoscalingBackend,
  autoscales,
  type FetchesManyLogs,
  fetchesManyLogs,
  isServing,
  keepsWorkers,
  type ReplicaSetBackend,
  type ReportsCapacity,
  type ReportsHealth,
  reportsCapacity,
  reportsHealth,
  rollsReplicas,
  type ServingBackend,
  type TaskBackend,
  type TaskRef,
  type WorkerStoreBackend,
} from "./protocol"
import { availableTypes, BackendNotAvailableError, createBackend } from "./registry"

/** Names of the members of `T` that are functions. */
type MethodsOf<T> = { [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T]

/**
 * The members of `T`, listed: naming one that is not a member fails to compile, and so does leaving
 * one out (the error names it).
 */
function members<T>() {
  return <const L extends readonly MethodsOf<T>[]>(
    list: L &
      ([Exclude<MethodsOf<T>, L[number]>] extends [never] ? unknown : Exclude<MethodsOf<T>, L[number]>),
  ) => list
}

/** The required core: every backend has all of it. */
const core = members<TaskBackend>()([
  "status",
  "schedule",
  "launch",
  "reconcile",
  "stop",
  "fetchLogs",
  "close",
] as const)

/** Each optional capability: its members, and the guard that says whether a backend has it. */
const capabilities = {
  serving: {
    methods: members<ServingBackend>()(["createOrUpdate", "servingStatus", "delete"] as const),
    guard: isServing,
  },
  replicaSet: {
    methods: members<ReplicaSetBackend>()([
      "observeReplicaSet",
      "startReplica",
      "stopReplicas",
      "runRouter",
      "stopRouter",
    ] as const),
    guard: rollsReplicas,
  },
  workerStore: {
    methods: members<WorkerStoreBackend>()(["isAway", "seedLiveness", "pruneDeadWorkers"] as const),
    guard: keepsWorkers,
  },
  autoscaling: {
    methods: members<AutoscalingBackend>()(["autoscale", "autoscalerStatus", "keepsMinimum"] as const),
    guard: autoscales,
  },
  capacity: { methods: members<ReportsCapacity>()(["resourceCapacity"] as const), guard: reportsCapacity },
  health: { methods: members<ReportsHealth>()(["health"] as const), guard: reportsHealth },
  manyLogs: { methods: members<FetchesManyLogs>()(["fetchLogsMany"] as const), guard: fetchesManyLogs },
} as const
type Capability = keyof typeof capabilities
type Method = (typeof core)[number] | (typeof capabilities)[Capability]["methods"][number]

/** What calling a method must do on a backend type. */
type Expect = "resolves" | "needs_cluster"

/** One valid config per type of the union: a type added to it fails to compile here. */
const configs = {
  workers: {
    type: "workers",
    displayName: "Local workers",
    scaleGroups: [
      {
        name: "cpu",
        provider: { type: "local" },
        max: 2,
        resources: { cpu: 2, memoryMiB: 2048 },
        attributes: { zone: "a" },
      },
      {
        name: "gpu",
        provider: { type: "local" },
        max: 1,
        resources: { cpu: 8, memoryMiB: 65536, gpu: 8, gpuType: "h100" },
        attributes: { zone: "b", accelerator: "h100" },
      },
    ],
  },
  slurm: {
    type: "slurm",
    loginHost: "login.hpc.example.org",
    user: "svc_swarm",
    sshKeySecret: "hpc-ssh-key",
    hostKey: "SHA256:Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5",
    partition: "gpu",
    attributes: { partition: "gpu" },
  },
  lepton: {
    type: "lepton",
    workspaceId: "ws123",
    tokenSecret: "lepton-token",
    nodeGroup: "h100-pool",
    resourceShape: "gpu.8xh100-80gb",
    displayName: "Lepton H100",
    // Nothing listens on the discard port: a call that needs Lepton fails at once.
    workspaceUrl: "http://127.0.0.1:9/api/v2/workspaces/ws123",
  },
  eks: {
    type: "eks",
    clusterName: "gpu-cluster",
    region: "us-west-2",
    localQueue: "team-a",
    attributes: { accelerator: "a100" },
    // Nothing listens on the discard port: DescribeCluster fails at once.
    endpoint: "http://127.0.0.1:9",
  },
} as const satisfies { [T in BackendType]: z.input<typeof BackendConfig> & { type: T } }

/**
 * Per implemented type: the capabilities it has, and what each call of its methods does with no
 * cluster reachable (a call that needs one fails with a retryable transport error, never silently).
 * A type missing here has no factory: the registry refuses it.
 */
const implemented: Partial<
  Record<BackendType, { capabilities: Capability[]; calls: Partial<Record<Method, Expect>> }>
> = {
  workers: {
    capabilities: ["replicaSet", "workerStore", "autoscaling", "capacity"],
    calls: {},
  },
  slurm: {
    capabilities: ["replicaSet", "capacity", "health", "manyLogs"],
    calls: {
      status: "needs_cluster",
      resourceCapacity: "needs_cluster",
      observeReplicaSet: "needs_cluster",
      startReplica: "needs_cluster",
      stopReplicas: "needs_cluster",
      runRouter: "needs_cluster",
    },
  },
  lepton: {
    capabilities: ["serving", "health"],
    calls: { createOrUpdate: "needs_cluster" },
  },
  // Its status() reports an unreachable cluster as unhealthy (it resolves).
  eks: {
    capabilities: ["serving", "health"],
    calls: { createOrUpdate: "needs_cluster" },
  },
}

const t0 = "2026-01-01T00:00:00.000Z"
/** A real private key, so the Slurm backend gets as far as the (unreachable) network. */
const sshKey = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs1", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
}).privateKey

function runtime() {
  const clock = new FakeClock()
  return createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue({ clock }),
    clock,
    logger: silentLogger,
    pepper: "test-pepper",
    secrets: { get: async () => sshKey },
  })
}

function backendOf(type: BackendType): Backend {
  const config = BackendConfig.parse(configs[type])
  return {
    id: `${type}-1`,
    project: "p",
    kind: kindOfType[type],
    config,
    status: {},
    createdAt: t0,
    updatedAt: t0,
  }
}

const job: Job = {
  id: "j1",
  project: "p",
  spec: JobSpec.parse({ command: ["true"] }),
  backendId: "b",
  status: "RUNNING",
  counts: { RUNNING: 1 },
  cancelRequested: false,
  createdAt: t0,
  updatedAt: t0,
}
const ref: TaskRef = {
  job,
  task: {
    pk: "p#job#j1",
    sk: "task#0",
    type: "task",
    version: 1,
    data: {
      index: 0,
      state: "RUNNING",
      attempts: [{ attemptUid: "att-1", state: "RUNNING", workerId: "w1", createdAt: t0 }],
      failureCount: 0,
      preemptionCount: 0,
      updatedAt: t0,
    },
  },
}
const swarm: Swarm = {
  name: "llm",
  project: "p",
  model: "echo",
  replicas: 1,
  gpusPerReplica: 0,
  cpusPerReplica: 1,
  memoryMiBPerReplica: 1024,
  args: [],
  env: {},
  port: 8000,
  healthPath: "/health",
  serving: {},
  labels: {},
  phase: "PENDING",
  desired: "running",
  generation: 1,
  observedGeneration: 0,
  replicaStatus: { ready: 0, total: 1, items: [] },
  createdAt: t0,
  updatedAt: t0,
}

/** One call of each method with small, valid arguments (made only on a backend that has it). */
const calls: Record<Method, (b: never) => unknown> = {
  status: (b: TaskBackend) => b.status(),
  schedule: (b: TaskBackend) => b.schedule({ pending: [], live: [], mintAttemptUid: () => "att-new" }),
  launch: (b: TaskBackend) => b.launch({ attempts: [] }),
  reconcile: (b: TaskBackend) => b.reconcile({ live: [] }),
  stop: (b: TaskBackend) => b.stop([{ kind: "stop", attemptUid: "att-1" }]),
  fetchLogs: (b: TaskBackend) => b.fetchLogs(ref, 10),
  close: (b: TaskBackend) => b.close(),
  createOrUpdate: (b: ServingBackend) => b.createOrUpdate(swarm, 1),
  servingStatus: (b: ServingBackend) => b.servingStatus(swarm),
  delete: (b: ServingBackend) => b.delete(swarm, 1),
  observeReplicaSet: (b: ReplicaSetBackend) => b.observeReplicaSet(swarm),
  startReplica: (b: ReplicaSetBackend) =>
    b.startReplica(
      { ...swarm, backendId: "workers-1" },
      { slot: 0, generation: 1, state: "starting", since: t0 },
    ),
  stopReplicas: (b: ReplicaSetBackend) => b.stopReplicas(swarm, [0]),
  runRouter: (b: ReplicaSetBackend) => b.runRouter({ ...swarm, backendId: "workers-1" }),
  stopRouter: (b: ReplicaSetBackend) => b.stopRouter(swarm),
  isAway: (b: WorkerStoreBackend) => b.isAway(0, 60_000),
  seedLiveness: (b: WorkerStoreBackend) => b.seedLiveness(),
  pruneDeadWorkers: (b: WorkerStoreBackend) => b.pruneDeadWorkers(),
  autoscale: (b: AutoscalingBackend) => b.autoscale({ pending: [], live: [] }),
  autoscalerStatus: (b: AutoscalingBackend) => b.autoscalerStatus(),
  keepsMinimum: (b: AutoscalingBackend) => b.keepsMinimum(),
  resourceCapacity: (b: ReportsCapacity) => b.resourceCapacity(),
  health: (b: ReportsHealth) => b.health(),
  fetchLogsMany: (b: FetchesManyLogs) => b.fetchLogsMany([ref], 10),
}

test("the registry implements exactly the types this suite expects", () => {
  expect(availableTypes).toEqual(Object.keys(implemented).sort())
})

for (const [type, spec] of Object.entries(implemented) as [
  BackendType,
  NonNullable<(typeof implemented)[BackendType]>,
][]) {
  describe(`${type} backend`, () => {
    const make = () => createBackend(backendOf(type), runtime())

    test("implements the required core", async () => {
      const backend = (await make()) as unknown as Record<string, unknown>
      expect(core.filter((m) => typeof backend[m] !== "function")).toEqual([])
    })

    test(`has ${spec.capabilities.join(", ")}, each whole, and no other capability`, async () => {
      const backend = (await make()) as unknown as Record<string, unknown>
      for (const [name, capability] of Object.entries(capabilities) as [
        Capability,
        (typeof capabilities)[Capability],
      ][]) {
        const present = capability.methods.filter((m) => typeof backend[m] === "function")
        const expected = spec.capabilities.includes(name)
        expect(capability.guard(backend), name).toBe(expected)
        expect(present, `${name} is all there or not at all`).toEqual(expected ? [...capability.methods] : [])
      }
    })

    test("describes itself: backendId, kind of its type, attributes, scale groups, display name", async () => {
      const { descriptor } = await make()
      expect(Object.keys(descriptor).sort()).toEqual(
        ["advertisedAttributes", "backendId", "displayName", "kind", "scaleGroups"].sort(),
      )
      expect(descriptor.backendId).toBe(`${type}-1`)
      expect(descriptor.kind).toBe(kindOfType[type])
      expect(descriptor.displayName.length).toBeGreaterThan(0)
      expect(Array.isArray(descriptor.scaleGroups)).toBe(true)
      for (const group of descriptor.scaleGroups) expect(typeof group).toBe("string")
      for (const values of Object.values(descriptor.advertisedAttributes)) {
        expect(Array.isArray(values)).toBe(true)
        for (const value of values) expect(typeof value).toBe("string")
      }
    })

    const methods: Method[] = [
      ...core,
      ...spec.capabilities.flatMap((name) => [...capabilities[name].methods] as Method[]),
    ]
    for (const method of methods) {
      const outcome = spec.calls[method] ?? "resolves"
      test(`${method} ${outcome === "resolves" ? "answers" : "fails with a transport error without a cluster"}`, async () => {
        const result = Promise.resolve(calls[method]((await make()) as never))
        if (outcome === "resolves") {
          await result
          return
        }
        // A backend's own error class (LeptonApiError) is a BackendError too.
        const error = await result.then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toBeInstanceOf(BackendError)
        expect(error).toMatchObject({ retryable: true })
      })
    }
  })
}

describe("a type with no implementation in this release", () => {
  // Every type of the config union is implemented now; a record a newer release stored may still name
  // one this release does not know.
  const missing = [...BackendTypes.filter((t) => !implemented[t]), "gke" as BackendType]
  for (const type of missing)
    test(`${type}: no backend is made; the error names the type and the types there are`, async () => {
      const make = () =>
        createBackend(
          implemented[type] || !BackendTypes.includes(type)
            ? { ...backendOf("eks"), config: { ...backendOf("eks").config, type } as Backend["config"] }
            : backendOf(type),
          runtime(),
        )
      await expect(make()).rejects.toThrow(BackendNotAvailableError)
      await expect(make()).rejects.toThrow(
        `the ${type} backend is not available in this release; available types: eks, lepton, slurm, workers`,
      )
      await expect(make()).rejects.toMatchObject({
        code: "backend.not_available",
        status: 422,
        details: { type, available: ["eks", "lepton", "slurm", "workers"] },
      })
    })
})

describe("descriptors carry the config", () => {
  test("a workers backend advertises its scale groups and their attributes", async () => {
    const { descriptor } = await createBackend(backendOf("workers"), runtime())
    expect(descriptor).toEqual({
      backendId: "workers-1",
      kind: "worker-daemon",
      advertisedAttributes: { zone: ["a", "b"], accelerator: ["h100"] },
      scaleGroups: ["cpu", "gpu"],
      displayName: "Local workers",
    })
  })

  test("a slurm backend advertises its partitions and configured attributes", async () => {
    const { descriptor } = await createBackend(backendOf("slurm"), runtime())
    expect(descriptor).toEqual({
      backendId: "slurm-1",
      kind: "delegated",
      advertisedAttributes: { partition: ["gpu"] },
      scaleGroups: [],
      displayName: "slurm-1",
    })
  })
})
