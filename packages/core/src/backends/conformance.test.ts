import { generateKeyPairSync } from "node:crypto"
/**
 * Conformance of every backend type the registry maps to the protocols (DESIGN.md §3): every method
 * exists, the descriptor is complete, and a capability a backend lacks rejects with a typed
 * `backend.not_supported` error instead of resolving as a silent no-op. The method list is checked
 * against the interfaces at compile time, so a protocol method added without a test fails to compile.
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
import { NotSupportedError } from "../util/errors"
import { silentLogger } from "../util/logger"
import type { ServingBackend, TaskBackend, TaskRef } from "./protocol"
import { type AnyBackend, createBackend } from "./registry"

/** Names of the members of `T` that are functions. */
type MethodsOf<T> = { [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T]
type Method = MethodsOf<TaskBackend & ServingBackend>

/** Every method of both protocols: listing a name that is not one fails to compile (`satisfies`)... */
const methods = [
  "bindRuntime",
  "schedule",
  "launch",
  "reconcile",
  "autoscale",
  "status",
  "autoscalerStatus",
  "resourceCapacity",
  "runtimeImage",
  "getProcessStatus",
  "profileTask",
  "execInContainer",
  "fetchLogs",
  "seedLiveness",
  "runTeardown",
  "teardown",
  "pruneDeadWorkers",
  "close",
  "createOrUpdate",
  "servingStatus",
  "delete",
] as const satisfies readonly Method[]

/** ...and so does leaving one out: `Unlisted` names the missing method in the error. */
type Unlisted = Exclude<Method, (typeof methods)[number]>
const everyMethodListed: [Unlisted] extends [never] ? true : Unlisted = true

/** Synchronous lifecycle methods; every other method returns a promise. */
const syncMethods = ["bindRuntime", "runtimeImage"] as const satisfies readonly Method[]
type AsyncMethod = Exclude<(typeof methods)[number], (typeof syncMethods)[number]>

/** What calling a method must do on a backend type. */
type Expect = "resolves" | "not_supported" | "needs_cluster"

/** One valid config per type the registry maps: a type added to the union fails to compile here. */
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
  },
  eks: {
    type: "eks",
    clusterName: "gpu-cluster",
    region: "us-west-2",
    localQueue: "team-a",
    attributes: { accelerator: "a100" },
  },
} as const satisfies { [T in BackendType]: z.input<typeof BackendConfig> & { type: T } }

/** What each capability does per type. `workers` implements all but the process-level ones. */
const expectations: { [T in BackendType]: Record<AsyncMethod, Expect> } = {
  workers: {
    schedule: "resolves",
    launch: "resolves",
    reconcile: "resolves",
    autoscale: "resolves",
    status: "resolves",
    autoscalerStatus: "resolves",
    resourceCapacity: "resolves",
    getProcessStatus: "not_supported",
    profileTask: "not_supported",
    execInContainer: "not_supported",
    fetchLogs: "resolves",
    seedLiveness: "resolves",
    runTeardown: "resolves",
    teardown: "resolves",
    pruneDeadWorkers: "resolves",
    close: "resolves",
    createOrUpdate: "resolves",
    servingStatus: "resolves",
    delete: "resolves",
  },
  // With no cluster reachable: calls that need one fail with a (retryable) transport error, never silently.
  slurm: {
    schedule: "resolves",
    launch: "resolves",
    reconcile: "resolves",
    autoscale: "resolves",
    status: "needs_cluster",
    autoscalerStatus: "resolves",
    resourceCapacity: "needs_cluster",
    getProcessStatus: "not_supported",
    profileTask: "not_supported",
    execInContainer: "not_supported",
    fetchLogs: "resolves",
    seedLiveness: "resolves",
    runTeardown: "resolves",
    teardown: "resolves",
    pruneDeadWorkers: "resolves",
    close: "resolves",
    createOrUpdate: "needs_cluster",
    servingStatus: "resolves",
    delete: "needs_cluster",
  },
  lepton: unavailable(),
  eks: unavailable(),
}

/** Not implemented in this release: every call rejects, except `close`, which a handler always runs. */
function unavailable(): Record<AsyncMethod, Expect> {
  return {
    schedule: "not_supported",
    launch: "not_supported",
    reconcile: "not_supported",
    autoscale: "not_supported",
    status: "not_supported",
    autoscalerStatus: "not_supported",
    resourceCapacity: "not_supported",
    getProcessStatus: "not_supported",
    profileTask: "not_supported",
    execInContainer: "not_supported",
    fetchLogs: "not_supported",
    seedLiveness: "not_supported",
    runTeardown: "not_supported",
    teardown: "not_supported",
    pruneDeadWorkers: "not_supported",
    close: "resolves",
    createOrUpdate: "not_supported",
    servingStatus: "not_supported",
    delete: "not_supported",
  }
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

/** One call of each async method with small, valid arguments. */
const calls: Record<AsyncMethod, (b: AnyBackend) => Promise<unknown>> = {
  schedule: (b) => b.schedule({ pending: [], live: [], mintAttemptUid: () => "att-new" }),
  launch: (b) => b.launch({ attempts: [] }),
  reconcile: (b) => b.reconcile({ live: [] }),
  autoscale: (b) => b.autoscale({ pending: [], live: [] }),
  status: (b) => b.status(),
  autoscalerStatus: (b) => b.autoscalerStatus(),
  resourceCapacity: (b) => b.resourceCapacity(),
  getProcessStatus: (b) => b.getProcessStatus({ address: "127.0.0.1:9000", attemptUid: "att-1" }),
  profileTask: (b) => b.profileTask({ attemptUid: "att-1" }, 5),
  execInContainer: (b) => b.execInContainer({ attemptUid: "att-1" }, ["ls"]),
  fetchLogs: (b) => b.fetchLogs(ref, 10),
  seedLiveness: (b) => b.seedLiveness(),
  runTeardown: (b) => b.runTeardown([{ kind: "stop", attemptUid: "att-1" }]),
  teardown: (b) => b.teardown(),
  pruneDeadWorkers: (b) => b.pruneDeadWorkers(),
  close: (b) => b.close(),
  createOrUpdate: (b) => b.createOrUpdate(swarm, 1),
  servingStatus: (b) => b.servingStatus(swarm),
  delete: (b) => b.delete(swarm, 1),
}

test("the method list covers both protocols", () => {
  expect(everyMethodListed).toBe(true)
  expect(new Set(methods).size).toBe(methods.length)
  const asyncMethods = methods.filter((m) => !syncMethods.some((s) => s === m))
  expect(Object.keys(calls).sort()).toEqual([...asyncMethods].sort())
  for (const type of BackendTypes)
    expect(Object.keys(expectations[type]).sort()).toEqual([...asyncMethods].sort())
})

for (const type of BackendTypes) {
  describe(`${type} backend`, () => {
    const make = () => createBackend(backendOf(type), runtime())

    test("implements every method of TaskBackend and ServingBackend", () => {
      const backend = make()
      const missing = methods.filter((m) => typeof backend[m] !== "function")
      expect(missing).toEqual([])
    })

    test("describes itself: backendId, kind of its type, attributes, scale groups, display name", () => {
      const { descriptor } = make()
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

    test("bindRuntime and runtimeImage answer synchronously", () => {
      const backend = make()
      expect(backend.bindRuntime(runtime())).toBeUndefined()
      const image = backend.runtimeImage()
      expect(image === undefined || typeof image === "string").toBe(true)
    })

    for (const [method, outcome] of Object.entries(expectations[type]) as [AsyncMethod, Expect][])
      test(`${method} ${outcome === "resolves" ? "resolves" : outcome === "needs_cluster" ? "fails with a transport error without a cluster" : "rejects with backend.not_supported"}`, async () => {
        const result = calls[method](make())
        expect(result).toBeInstanceOf(Promise)
        if (outcome === "resolves") {
          await result
          return
        }
        if (outcome === "needs_cluster") {
          await expect(result).rejects.toMatchObject({ name: "BackendError", retryable: true })
          return
        }
        const error = await result.then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error, `${method} resolved instead of rejecting`).toBeInstanceOf(NotSupportedError)
        expect(error).toMatchObject({
          code: "backend.not_supported",
          status: 501,
          message: expect.stringContaining(type),
        })
      })
  })
}

describe("descriptors carry the config", () => {
  test("a workers backend advertises its scale groups and their attributes", () => {
    const { descriptor } = createBackend(backendOf("workers"), runtime())
    expect(descriptor).toEqual({
      backendId: "workers-1",
      kind: "worker-daemon",
      advertisedAttributes: { zone: ["a", "b"], accelerator: ["h100"] },
      scaleGroups: ["cpu", "gpu"],
      displayName: "Local workers",
    })
  })

  const delegated: Record<string, { type: BackendType; attributes: Record<string, string[]>; name: string }> =
    {
      "slurm advertises its configured attributes": {
        type: "slurm",
        attributes: { partition: ["gpu"] },
        name: "slurm-1",
      },
      "lepton shows its display name": { type: "lepton", attributes: {}, name: "Lepton H100" },
      "eks advertises its configured attributes": {
        type: "eks",
        attributes: { accelerator: ["a100"] },
        name: "eks-1",
      },
    }
  for (const [name, tc] of Object.entries(delegated))
    test(name, () => {
      const { descriptor } = createBackend(backendOf(tc.type), runtime())
      expect(descriptor).toEqual({
        backendId: `${tc.type}-1`,
        kind: "delegated",
        advertisedAttributes: tc.attributes,
        scaleGroups: [],
        displayName: tc.name,
      })
    })
})
