/**
 * The infrastructure's wiring, checked without AWS: `sst.config.ts` and `infra/*` run against a
 * recording stand-in for SST's globals (`test/support/sst-stand-in.ts`), and what they made is compared
 * with what the code uses: the table's keys and indexes with the store's own layout, every function's
 * handler with a file that exports it, each function's links, environment and SSM permissions with what
 * its handler's bundle reads, the timeouts with the leases and the crons, the queue with its dead-letter
 * queue, the outputs. (`npm run typecheck:infra` checks the same files against SST's real types.)
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import type { ScheduledEvent } from "aws-lambda"
import { build } from "esbuild"
import { afterEach, describe, expect, test, vi } from "vitest"
import { entryOutput, fromPackage } from "../bench/cold-start/metafile"
import { sstEsbuildOptions } from "../bench/cold-start/sst-esbuild"
import * as timing from "../functions/timing"
import { bundleSettings, lambdaRuntime } from "../infra/bundle"
import { LeaseTtlMs } from "../packages/core/src/control/reconcile"
import { AutoscaleLeaseTtlMs } from "../packages/core/src/control/ticks"
import { tableDefinition } from "../packages/core/src/store/dynamo"
import { deploy, linkNames } from "./support/sst-stand-in"

const root = resolve(import.meta.dirname, "..")

/** A timeout as infra/ writes it (`"130 seconds"`, `"2 minutes"`), in milliseconds. */
const ms = (timeout: unknown) => {
  const [n, unit] = String(timeout).split(" ")
  return Number(n) * (unit?.startsWith("minute") ? 60_000 : 1000)
}

/** A schedule's period, from its `rate(...)` expression, in milliseconds. */
const period = (schedule: unknown) => {
  const [, n, unit] = /^rate\((\d+) (minutes?|hours?)\)$/.exec(String(schedule)) ?? []
  expect(n, `a rate() schedule: ${schedule}`).toBeDefined()
  return Number(n) * (unit!.startsWith("hour") ? 3_600_000 : 60_000)
}

/**
 * What a handler's code can reach, from its bundle as the deploy builds it (infra/bundle.ts settings):
 * the text and the inputs of the outputs its entry loads, at import or behind a dynamic `import()`
 * (esbuild also writes a chunk for every `import()` it parsed, even in code it then dropped; no one
 * loads those). A bundle holds only what its handler can reach, so the bundle of a handler that never
 * reaches for the pepper has no `.ApiPepper` in it; minifying keeps property names.
 */
const bundles = new Map<string, Promise<{ text: string; inputs: string[] }>>()
function bundleOf(handler: string) {
  const entry = join(root, `${handler.split(".")[0]}.ts`)
  let built = bundles.get(entry)
  if (!built) {
    built = build({
      ...sstEsbuildOptions(bundleSettings, entry, join(tmpdir(), "swarmplane-wiring")),
      absWorkingDir: root,
      write: false,
    }).then(({ metafile, outputFiles }) => {
      const reached = new Set<string>()
      const visit = (output: string) => {
        if (reached.has(output) || !metafile!.outputs[output]) return
        reached.add(output)
        for (const i of metafile!.outputs[output]!.imports) if (!i.external) visit(i.path)
      }
      visit(entryOutput(metafile!, relative(root, entry)))
      return {
        text: outputFiles
          .filter((f) => reached.has(relative(root, f.path)))
          .map((f) => f.text)
          .join("\n"),
        inputs: [...reached].flatMap((output) => Object.keys(metafile!.outputs[output]!.inputs)),
      }
    })
    bundles.set(entry, built)
  }
  return built
}

/** The links among `linkable` (component names) that `text` reads. */
const linksIn = (text: string, linkable: string[]) =>
  [...new Set([...text.matchAll(new RegExp(`\\.(${linkable.join("|")})\\b`, "g"))].map((m) => m[1]!))].sort()

/** The variables of ours that `text` reads. */
const variablesIn = (text: string) =>
  [...new Set([...text.matchAll(/\.(SWARMPLANE_[A-Z0-9_]+)\b/g)].map((m) => m[1]!))].sort()

/** What SST can link: the components the app makes that carry properties a handler reads. */
const linkableKinds = ["dynamo", "queue", "secret"]

/** Variables a handler reads that the infra does not provide, each on purpose. */
const optional: Record<string, string> = {
  SWARMPLANE_OPERATOR_PROJECT: "defaults to `default`",
  SWARMPLANE_LOG_LEVEL: "defaults to the function's own log level",
  SWARMPLANE_DYNAMODB_ENDPOINT: "tests only",
  SWARMPLANE_SQS_ENDPOINT: "tests only",
  SWARMPLANE_SSM_ENDPOINT: "tests only",
}

/**
 * The functions whose passes reach EKS clusters, and so get EKS access and are in the `clusterRoles`
 * output. A table, not read from the code: every function that builds backends has the EKS client in
 * its bundle, and what matters is which of them call it. The API does (an `eks` backend's logs, status
 * and cancels), the schedule consumer does (it runs every pass); the reconcile cron only asks each
 * backend whether it has work and sends its ticks, and the autoscale tick acts only on backends that
 * autoscale, worker-daemon backends, which reach no cluster.
 */
const ReachesClusters: Record<string, boolean> = {
  Api: true,
  ScheduleConsumer: true,
  Reconcile: false,
  Autoscale: false,
}

afterEach(() => {
  vi.unstubAllGlobals()
  vi.unstubAllEnvs()
})

describe("the table", () => {
  test("has the store's keys, indexes and TTL attribute, read from the store's layout", async () => {
    const { one } = await deploy()
    const args = one("dynamo", "State") as {
      fields: Record<string, string>
      primaryIndex: { hashKey: string; rangeKey: string }
      globalIndexes: Record<string, { hashKey: string; rangeKey: string; projection: string }>
      ttl: string
    }
    // What the store creates locally (DynamoDB Local, dynalite) is what is deployed.
    const local = tableDefinition("x")
    expect(Object.keys(args.fields).sort()).toEqual(
      local.AttributeDefinitions!.map((a) => a.AttributeName).sort(),
    )
    expect(Object.values(args.fields)).toEqual(local.AttributeDefinitions!.map(() => "string"))
    expect(args.primaryIndex).toEqual({
      hashKey: local.KeySchema!.find((k) => k.KeyType === "HASH")!.AttributeName,
      rangeKey: local.KeySchema!.find((k) => k.KeyType === "RANGE")!.AttributeName,
    })
    expect(args.globalIndexes).toEqual(
      Object.fromEntries(
        local.GlobalSecondaryIndexes!.map((index) => [
          index.IndexName,
          {
            hashKey: index.KeySchema!.find((k) => k.KeyType === "HASH")!.AttributeName,
            rangeKey: index.KeySchema!.find((k) => k.KeyType === "RANGE")!.AttributeName,
            projection: "all",
          },
        ]),
      ),
    )
    expect(args.ttl).toBe("ttl")
  })

  test("is kept when any stage is removed, and protected from deletion in production", async () => {
    for (const stage of ["dev", "production"]) {
      const { one } = await deploy(stage)
      const args = one("dynamo", "State") as {
        deletionProtection: boolean
        transform: { table: (args: object, opts: { retainOnDelete?: boolean }) => void }
      }
      const opts: { retainOnDelete?: boolean } = {}
      args.transform.table({}, opts)
      expect(opts.retainOnDelete, stage).toBe(true)
      expect(args.deletionProtection, stage).toBe(stage === "production")
    }
  })
})

describe("the schedule queue", () => {
  test("has a dead-letter queue after 5 receives, a visibility of six consumer timeouts, and a batch consumer with partial responses", async () => {
    const { one, subscriptions, functions } = await deploy()
    const queue = one("queue", "ScheduleQueue") as {
      visibilityTimeout: string
      dlq: { queue: string; retry: number }
    }
    one("queue", "ScheduleDlq")
    expect(queue.dlq).toEqual({ queue: "arn:aws:queue:us-east-1:123456789012:ScheduleDlq", retry: 5 })
    const timeoutS = Number.parseInt(String(functions.ScheduleConsumer!.timeout), 10)
    expect(queue.visibilityTimeout).toBe(`${timeoutS * 6} seconds`)
    expect(subscriptions).toHaveLength(1)
    expect(subscriptions[0]!.args).toEqual({ batch: { size: 10, partialResponses: true } })
    expect(functions.ScheduleConsumer!.handler).toBe("functions/schedule.handler")
  })
})

describe("the functions", () => {
  test("each runs a handler that its file exports, with the deploy's bundle settings and runtime", async () => {
    const { functions } = await deploy()
    expect(Object.fromEntries(Object.entries(functions).map(([name, f]) => [name, f.handler]))).toEqual({
      Api: "functions/api.handler",
      ScheduleConsumer: "functions/schedule.handler",
      Reconcile: "functions/reconcile.handler",
      Autoscale: "functions/autoscale.handler",
    })
    for (const [name, f] of Object.entries(functions)) {
      const [file, exported] = String(f.handler).split(".")
      const source = join(root, `${file}.ts`)
      expect(existsSync(source), `${name}: ${source}`).toBe(true)
      expect(readFileSync(source, "utf8"), name).toMatch(new RegExp(`export const ${exported}\\b`))
      expect(f.nodejs, name).toEqual(bundleSettings)
      expect(f.runtime, name).toBe(lambdaRuntime)
    }
  })

  test("the crons run the tick handlers every minute, without retries", async () => {
    const { one, functions } = await deploy()
    expect(one("cron", "Reconcile").schedule).toBe("rate(1 minute)")
    expect(one("cron", "Autoscale").schedule).toBe("rate(1 minute)")
    expect(functions.Reconcile!.retries).toBe(0)
    expect(functions.Autoscale!.retries).toBe(0)
  })

  test("each function outlives a whole lease of the passes it runs; the reconcile cron's ticks cover the minute until the next", async () => {
    const { one, functions } = await deploy()
    // The lease lengths infra/ computes with (functions/timing.ts) are core's own.
    expect(timing.ReconcileLeaseMs).toBe(LeaseTtlMs)
    expect(timing.AutoscaleLeaseMs).toBe(AutoscaleLeaseTtlMs)
    expect(timing.EndMarginMs).toBeGreaterThan(0)
    const cron = period(one("cron", "Reconcile").schedule)
    expect(period(one("cron", "Autoscale").schedule)).toBe(cron)
    expect(timing.CronPeriodMs).toBe(cron)
    expect(timing.ReconcileWindowMs).toBeGreaterThanOrEqual(cron)
    // Reconcile runs no pass; it ends before the next cron fires.
    expect(ms(functions.Reconcile!.timeout)).toBeLessThanOrEqual(cron)
    // Autoscale: one pass per invocation, under its lease. The consumer (every reconcile pass): passes
    // side by side, each under a lease.
    expect(ms(functions.Autoscale!.timeout)).toBeGreaterThanOrEqual(AutoscaleLeaseTtlMs + timing.EndMarginMs)
    expect(ms(functions.ScheduleConsumer!.timeout)).toBeGreaterThanOrEqual(LeaseTtlMs + timing.EndMarginMs)
  })

  test("the reconcile handler sends each backend with work a tick every 5 s until the next cron fires, through the queue, and runs no pass", async () => {
    const { one } = await deploy()
    const cron = period(one("cron", "Reconcile").schedule)
    vi.resetModules()
    const { memoryRuntime } = await import("../packages/core/src/control/testing/runtime")
    const { BackendConfig } = await import("../packages/core/src/model/backend")
    const { JobSpec } = await import("../packages/core/src/model/job")
    const { rt, clock } = memoryRuntime()
    await rt.repos.backends.put("p", "busy", BackendConfig.parse({ type: "workers" }))
    await rt.repos.backends.put("p", "idle", BackendConfig.parse({ type: "workers" }))
    await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"], tasks: 1 }), "busy")
    const leases: string[] = []
    const acquire = rt.repos.leases.acquire.bind(rt.repos.leases)
    rt.repos.leases.acquire = async (...args) => {
      leases.push(args[2])
      return acquire(...args)
    }
    vi.doMock("../functions/deps", () => ({ tickRuntime: () => rt }))
    try {
      const { handler } = await import("../functions/reconcile")
      const answer = await handler({} as ScheduledEvent)
      expect(answer).toEqual({ sent: 12, busy: 1, backends: 2 })
      const due = (rt.queue as import("../packages/core/src/queue/memory").MemoryQueue)
        .pending()
        .map((m) => m.visibleAt - clock.now())
      // One tick every interval, the first at once, the last within one interval of the next cron.
      expect(due).toEqual(Array.from({ length: 12 }, (_, i) => i * timing.ReconcileIntervalMs))
      expect(due.at(-1)).toBeGreaterThanOrEqual(cron - timing.ReconcileIntervalMs)
      expect(due.at(-1)).toBeLessThan(cron)
      expect(leases).toEqual([])
    } finally {
      vi.doUnmock("../functions/deps")
    }
  })

  test("each is linked to exactly the resources its handler's bundle reads, and given exactly the variables it reads", async () => {
    const { functions, made } = await deploy()
    const linkable = made.filter((m) => linkableKinds.includes(m.kind)).map((m) => m.name)
    const links: Record<string, string[]> = {}
    for (const [name, f] of Object.entries(functions)) {
      const { text } = await bundleOf(String(f.handler))
      links[name] = linkNames(f)
      expect(links[name], `${name}: its links against what its handler reads`).toEqual(
        linksIn(text, linkable),
      )
      const provided = Object.keys(f.environment as Record<string, string>).sort()
      expect(provided, `${name}: its environment against what its handler reads`).toEqual(
        variablesIn(text).filter((variable) => !(variable in optional)),
      )
    }
    // What that comes to: only the API hashes keys; the API and the reconcile cron send schedule requests.
    expect(links).toEqual({
      Api: ["ApiPepper", "ScheduleQueue", "State"],
      ScheduleConsumer: ["State"],
      Reconcile: ["ScheduleQueue", "State"],
      Autoscale: ["State"],
    })
  }, 60_000)

  test("no other deployed code reads the environment: functions/deps.ts is the only place", () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
      )
    const deployed = [
      ...readdirSync(join(root, "functions"))
        .filter((f) => f.endsWith(".ts"))
        .map((f) => join(root, "functions", f)),
      ...files(join(root, "packages/core/src")),
    ].filter((f) => !/\.test\.ts$|testing|\/local(\.ts|\/)/.test(f))
    const readers = deployed
      .filter((f) => /process\.env|\bResource\./.test(readFileSync(f, "utf8")))
      .map((f) => f.slice(root.length + 1))
    expect(readers).toEqual(["functions/deps.ts"])
  })
})

describe("permissions", () => {
  test("backend secrets: only the SSM calls secrets/ssm.ts makes, on this stage's parameters, for exactly the functions whose bundle reads secrets; no EKS access unless the deploy names clusters", async () => {
    const { functions } = await deploy("prod")
    const ssm = readFileSync(join(root, "packages/core/src/secrets/ssm.ts"), "utf8")
    const calls = [...ssm.matchAll(/new (\w+)Command\(/g)].map((m) => `ssm:${m[1]}`)
    expect(calls.length).toBeGreaterThan(0)
    const reading: string[] = []
    for (const [name, f] of Object.entries(functions)) {
      const { inputs, text } = await bundleOf(String(f.handler))
      const permissions = f.permissions as { actions: string[]; resources: string[] }[]
      if (!fromPackage(inputs, "@aws-sdk/client-ssm")) {
        expect(permissions, name).toEqual([])
        expect(variablesIn(text), name).not.toContain("SWARMPLANE_SECRETS_PREFIX")
        continue
      }
      reading.push(name)
      expect(
        permissions.flatMap((p) => p.actions),
        name,
      ).toEqual([...calls, "kms:Decrypt"])
      expect(permissions[0]!.resources, name).toEqual([
        "arn:aws:ssm:us-east-1:123456789012:parameter/swarmplane/prod/secrets/*",
      ])
      expect((f.environment as Record<string, string>).SWARMPLANE_SECRETS_PREFIX, name).toBe(
        "/swarmplane/prod/secrets",
      )
      expect(f.vpc, name).toBeUndefined()
    }
    expect(reading).toEqual(["Api", "ScheduleConsumer"])
  }, 60_000)

  test("named EKS clusters and roles: DescribeCluster and AssumeRole on exactly those, for exactly the functions that reach clusters, whose roles are the clusterRoles output", async () => {
    const { functions, roles, outputs } = await deploy("prod", {
      SWARMPLANE_EKS_CLUSTERS: "gpu-a, gpu-b",
      SWARMPLANE_EKS_ROLES: "arn:aws:iam::123456789012:role/swarmplane-eks",
    })
    const eks = [
      {
        actions: ["eks:DescribeCluster"],
        resources: [
          "arn:aws:eks:us-east-1:123456789012:cluster/gpu-a",
          "arn:aws:eks:us-east-1:123456789012:cluster/gpu-b",
        ],
      },
      { actions: ["sts:AssumeRole"], resources: ["arn:aws:iam::123456789012:role/swarmplane-eks"] },
    ]
    expect(Object.keys(ReachesClusters).sort()).toEqual(Object.keys(functions).sort())
    for (const [name, f] of Object.entries(functions)) {
      const permissions = f.permissions as { actions: string[]; resources: string[] }[]
      expect(
        permissions.filter((p) => /^(eks|sts):/.test(p.actions[0]!)),
        name,
      ).toEqual(ReachesClusters[name] ? eks : [])
    }
    expect(outputs.clusterRoles).toEqual(
      Object.keys(functions)
        .filter((name) => ReachesClusters[name])
        .map((name) => roles[name]),
    )
  })

  test("private subnets and security groups put every function in the VPC; one without the other is refused", async () => {
    const { functions } = await deploy("prod", {
      SWARMPLANE_VPC_SUBNETS: "subnet-1,subnet-2",
      SWARMPLANE_VPC_SECURITY_GROUPS: "sg-1",
    })
    for (const [name, f] of Object.entries(functions))
      expect(f.vpc, name).toEqual({ privateSubnets: ["subnet-1", "subnet-2"], securityGroups: ["sg-1"] })
    await expect(deploy("prod", { SWARMPLANE_VPC_SUBNETS: "subnet-1" })).rejects.toThrow(
      /SWARMPLANE_VPC_SUBNETS is set without SWARMPLANE_VPC_SECURITY_GROUPS/,
    )
  })
})

test("the app's outputs: the API URL, the table's name, the queue's URL and name, the roles for EKS access entries; production keeps everything", async () => {
  const { outputs, app, roles } = await deploy("production")
  expect(Object.keys(outputs).sort()).toEqual(["api", "clusterRoles", "queue", "queueName", "table"])
  // The stand-in's values: the API's URL, the table's name, the queue's URL and its SQS name.
  expect(outputs).toMatchObject({
    api: "https://Api.example",
    table: "State",
    queue: "https://ScheduleQueue.example",
    queueName: "ScheduleQueueName",
  })
  expect(outputs.clusterRoles).toEqual([roles.Api, roles.ScheduleConsumer])
  expect(app).toMatchObject({ name: "swarmplane", removal: "retain", home: "aws" })
  expect((await deploy("prod")).app.removal).toBe("remove")
})
