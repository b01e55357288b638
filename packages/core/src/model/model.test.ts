import { z } from "@hono/zod-openapi"
import { describe, expect, test } from "vitest"
import { undescribedFields } from "./describe-walk"
import * as Model from "./index"

const publicSchemas = Object.entries(Model).filter(([, value]) => value instanceof z.ZodType) as [
  string,
  z.ZodType,
][]

describe("model schemas", () => {
  test("there are public schemas to check", () => {
    expect(publicSchemas.length).toBeGreaterThan(30)
  })

  test("every field reachable from a public schema has a description", () => {
    const missing = publicSchemas.flatMap(([name, schema]) => undescribedFields(name, schema))
    expect(missing).toEqual([])
  })

  test("the walker notices an undescribed field, however deep", () => {
    const Bad = z.object({
      ok: z.string().describe("fine"),
      nested: z.object({ deep: z.array(z.object({ nope: z.number() }).describe("items")) }).describe("n"),
    })
    expect(undescribedFields("Bad", Bad)).toEqual(["Bad.nested.deep", "Bad.nested.deep[].nope"])
  })
})

describe("bounds", () => {
  const job = { command: ["python", "infer.py"] }

  const cases: Record<string, { schema: z.ZodType; value: unknown; path: string }> = {
    "name too long": { schema: Model.SwarmSpec, value: { name: "a".repeat(64), model: "m" }, path: "name" },
    "name not a DNS label": {
      schema: Model.SwarmSpec,
      value: { name: "My_Swarm", model: "m" },
      path: "name",
    },
    "too many tasks": { schema: Model.JobSpec, value: { ...job, tasks: 10_001 }, path: "tasks" },
    "empty command": { schema: Model.JobSpec, value: { command: [] }, path: "command" },
    "command too large": {
      schema: Model.JobSpec,
      value: { command: Array(10).fill("x".repeat(16_000)) },
      path: "command",
    },
    "too many env vars": {
      schema: Model.JobSpec,
      value: { ...job, env: Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`V${i}`, "x"])) },
      path: "env",
    },
    "env value too long": {
      schema: Model.JobSpec,
      value: { ...job, env: { A: "x".repeat(20_000) } },
      path: "env.A",
    },
    "bad env name": { schema: Model.JobSpec, value: { ...job, env: { "1A": "x" } }, path: "env.1A" },
    "unknown field": { schema: Model.JobSpec, value: { ...job, bogus: 1 }, path: "" },
    "maxTaskFailures above tasks": {
      schema: Model.JobSpec,
      value: { ...job, tasks: 2, maxTaskFailures: 3 },
      path: "maxTaskFailures",
    },
    "eq without value": {
      schema: Model.JobSpec,
      value: { ...job, constraints: [{ key: "accelerator", op: "eq" }] },
      path: "constraints.0.value",
    },
    "unknown backend type": { schema: Model.BackendConfig, value: { type: "nomad" }, path: "type" },
    "secret value instead of name": {
      schema: Model.BackendConfig,
      value: {
        type: "lepton",
        workspaceId: "ws1",
        tokenSecret: "abc def",
        nodeGroup: "ng",
        resourceShape: "gpu.1xh100-80gb",
      },
      path: "tokenSecret",
    },
    "workspace URL in plain http to another host": {
      schema: Model.BackendConfig,
      value: {
        type: "lepton",
        workspaceId: "ws1",
        workspaceUrl: "http://collector.example.com/api",
        tokenSecret: "tok",
        nodeGroup: "ng",
        resourceShape: "gpu.1xh100-80gb",
      },
      path: "workspaceUrl",
    },
    "scale group min above max": {
      schema: Model.BackendConfig,
      value: {
        type: "workers",
        scaleGroups: [{ name: "g", provider: { type: "local" }, min: 3, max: 2, resources: {} }],
      },
      path: "scaleGroups.0.min",
    },
  }

  for (const [name, tc] of Object.entries(cases)) {
    test(`rejects: ${name}`, () => {
      const result = tc.schema.safeParse(tc.value)
      expect(result.success).toBe(false)
      expect(result.error?.issues.map((i) => i.path.join("."))).toContain(tc.path)
    })
  }

  test("accepts a minimal job and fills defaults", () => {
    const spec = Model.JobSpec.parse(job)
    expect(spec).toMatchObject({
      name: "job",
      tasks: 1,
      priority: "batch",
      maxRetriesFailure: 0,
      maxRetriesPreemption: 100,
    })
    expect(spec.resources).toEqual({ cpu: 1, memoryMiB: 1024, gpu: 0 })
  })

  test("accepts one config of every backend type", () => {
    const configs = [
      {
        type: "slurm",
        loginHost: "login.hpc.example",
        user: "svc",
        sshKeySecret: "hpc-key",
        hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample",
        partition: "debug",
      },
      {
        type: "lepton",
        workspaceId: "ws123",
        tokenSecret: "lepton-token",
        nodeGroup: "ng-1",
        resourceShape: "gpu.1xh100-80gb",
      },
      { type: "eks", clusterName: "gpu-prod", region: "us-west-2", localQueue: "team-a" },
      {
        type: "workers",
        scaleGroups: [{ name: "local", provider: { type: "local" }, max: 2, resources: {} }],
      },
    ]
    for (const config of configs) expect(Model.BackendConfig.safeParse(config).error).toBeUndefined()
  })
})

test("the default rollout the rules and the eks backend use is the schema's defaults", async () => {
  const { DefaultRollout, Rollout } = await import("./swarm")
  expect(DefaultRollout).toEqual(Rollout.parse({}))
})
