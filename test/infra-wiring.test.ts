/**
 * The infrastructure's wiring, checked without AWS: `sst.config.ts` and `infra/*` run against a
 * recording stand-in for SST's globals (`sst.aws.*`, `sst.Secret`, `aws.*`, `$app`, `$interpolate`,
 * `$config`), and what they made is compared with what the code uses: the table's keys and indexes with
 * the store's own layout, every function's handler with a file that exports it, links and environment
 * with what `functions/deps.ts` reads, the crons with the tick handlers, the queue with its dead-letter
 * queue. (`npm run typecheck:infra` checks the same files against SST's real types.)
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { afterEach, describe, expect, test, vi } from "vitest"
import { bundleSettings, lambdaRuntime } from "../infra/bundle"
import { LeaseTtlMs } from "../packages/core/src/control/reconcile"
import { tableDefinition } from "../packages/core/src/store/dynamo"

const root = resolve(import.meta.dirname, "..")

/** What `infra/functions.ts` reads from the deploy's environment. */
const DeploySettings = [
  "SWARMPLANE_VPC_SUBNETS",
  "SWARMPLANE_VPC_SECURITY_GROUPS",
  "SWARMPLANE_EKS_CLUSTERS",
  "SWARMPLANE_EKS_ROLES",
]

interface Made {
  kind: string
  name: string
  args: Record<string, unknown>
}

/** Install the stand-in; returns what the infra code makes through it. */
function standIn(stage: string) {
  const made: Made[] = []
  const subscriptions: { queue: string; fn: Record<string, unknown>; args: Record<string, unknown> }[] = []
  const record = (kind: string) =>
    class {
      readonly name: string
      readonly arn: string
      readonly url: string
      constructor(name: string, args: Record<string, unknown> = {}) {
        this.name = name
        this.arn = `arn:aws:${kind}:us-east-1:123456789012:${name}`
        this.url = `https://${name}.example`
        made.push({ kind, name, args })
      }
      subscribe(fn: Record<string, unknown>, args: Record<string, unknown> = {}) {
        subscriptions.push({ queue: this.name, fn, args })
      }
    }
  const globals = {
    $app: { name: "swarmplane", stage },
    $config: (config: unknown) => config,
    $interpolate: (strings: TemplateStringsArray, ...values: unknown[]) =>
      strings.reduce((out, s, i) => out + s + (i < values.length ? String(values[i]) : ""), ""),
    aws: {
      getRegionOutput: () => ({ region: "us-east-1" }),
      getCallerIdentityOutput: () => ({ accountId: "123456789012" }),
      getPartitionOutput: () => ({ partition: "aws", dnsSuffix: "amazonaws.com" }),
    },
    sst: {
      Secret: record("secret"),
      aws: {
        Dynamo: record("dynamo"),
        Queue: record("queue"),
        Function: record("function"),
        CronV2: record("cron"),
      },
    },
  }
  for (const [key, value] of Object.entries(globals)) vi.stubGlobal(key, value)
  return { made, subscriptions }
}

/** Run the app as `sst deploy --stage <stage>` would, with `env` as the deploy's environment. */
async function deploy(stage = "test", env: Record<string, string> = {}) {
  vi.resetModules()
  for (const name of DeploySettings) vi.stubEnv(name, env[name] ?? "")
  const recorded = standIn(stage)
  // By path, so the repo's type-check does not follow it into SST's platform types (that is
  // `npm run typecheck:infra`'s job).
  const config = (await import(/* @vite-ignore */ join(root, "sst.config.ts"))).default as {
    app: (input: { stage: string }) => Record<string, unknown>
    run: () => Promise<Record<string, unknown>>
  }
  const app = config.app({ stage })
  const outputs = await config.run()
  const one = (kind: string, name: string) => {
    const found = recorded.made.filter((m) => m.kind === kind && m.name === name)
    expect(found, `${kind} ${name}`).toHaveLength(1)
    return found[0]!.args
  }
  // Every function of the app, by name: the API, the queue's consumer, the crons' functions.
  const functions: Record<string, Record<string, unknown>> = {
    Api: one("function", "Api"),
    ScheduleConsumer: recorded.subscriptions.find((s) => s.queue === "ScheduleQueue")!.fn,
    Reconcile: one("cron", "Reconcile").function as Record<string, unknown>,
    Autoscale: one("cron", "Autoscale").function as Record<string, unknown>,
  }
  return { ...recorded, app, outputs, one, functions }
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

  test("the crons run the tick handlers every minute; the reconcile function outlives a pass's lease", async () => {
    const { one, functions } = await deploy()
    expect(one("cron", "Reconcile").schedule).toBe("rate(1 minute)")
    expect(one("cron", "Autoscale").schedule).toBe("rate(1 minute)")
    const seconds = (timeout: unknown) => {
      const [n, unit] = String(timeout).split(" ")
      return Number(n) * (unit?.startsWith("minute") ? 60 : 1)
    }
    // The tick loop stops 20 s before the deadline (functions/reconcile.ts); a pass holds its lease
    // for up to 60 s: the function lasts past one whole lease, and the cron's next minute.
    expect(seconds(functions.Reconcile!.timeout)).toBeGreaterThan(LeaseTtlMs / 1000)
    expect(functions.Reconcile!.retries).toBe(0)
    expect(functions.Autoscale!.retries).toBe(0)
  })

  test("each is linked to exactly what functions/deps.ts reads through SST's Resource, and given the environment it reads", async () => {
    const { functions, made } = await deploy()
    const deps = readFileSync(join(root, "functions/deps.ts"), "utf8")
    const resources = [...new Set([...deps.matchAll(/Resource\.(\w+)\./g)].map((m) => m[1]))].sort()
    const read = new Set([
      ...[...deps.matchAll(/\benv\.([A-Z0-9_]+)/g)].map((m) => m[1]!),
      ...[...deps.matchAll(/endpoint\("([A-Z0-9_]+)"\)/g)].map((m) => m[1]!),
    ])
    // Read but not provided by the infra, each on purpose.
    const optional: Record<string, string> = {
      SWARMPLANE_OPERATOR_PROJECT: "defaults to `default`",
      SWARMPLANE_LOG_LEVEL: "defaults to the function's own log level",
      AWS_LAMBDA_LOG_LEVEL: "set by Lambda itself",
      SWARMPLANE_DYNAMODB_ENDPOINT: "tests only",
      SWARMPLANE_SQS_ENDPOINT: "tests only",
      SWARMPLANE_SSM_ENDPOINT: "tests only",
    }
    const linkNames = (f: Record<string, unknown>) => (f.link as { name: string }[]).map((l) => l.name).sort()
    for (const [name, f] of Object.entries(functions)) {
      expect(linkNames(f), name).toEqual(resources)
      const provided = Object.keys(f.environment as Record<string, string>)
      for (const variable of read)
        expect(provided.includes(variable) || variable in optional, `${name} reads ${variable}`).toBe(true)
      // Nothing provided that nobody reads.
      for (const variable of provided) expect(read.has(variable), `${name} is given ${variable}`).toBe(true)
    }
    // The links name things the app makes.
    expect(resources.every((r) => made.some((m) => m.name === r))).toBe(true)
  })

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
  test("backend secrets: read-only, under this stage's prefix; no EKS access unless the deploy names clusters", async () => {
    const { functions } = await deploy("prod")
    for (const [name, f] of Object.entries(functions)) {
      const permissions = f.permissions as { actions: string[]; resources: string[] }[]
      expect(
        permissions.flatMap((p) => p.actions),
        name,
      ).toEqual(["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "kms:Decrypt"])
      expect(permissions[0]!.resources, name).toEqual([
        "arn:aws:ssm:us-east-1:123456789012:parameter/swarmplane/prod/secrets",
        "arn:aws:ssm:us-east-1:123456789012:parameter/swarmplane/prod/secrets/*",
      ])
      expect((f.environment as Record<string, string>).SWARMPLANE_SECRETS_PREFIX).toBe(
        "/swarmplane/prod/secrets",
      )
      expect(f.vpc, name).toBeUndefined()
    }
  })

  test("named EKS clusters and roles: DescribeCluster on exactly those, AssumeRole on exactly those", async () => {
    const { functions } = await deploy("prod", {
      SWARMPLANE_EKS_CLUSTERS: "gpu-a, gpu-b",
      SWARMPLANE_EKS_ROLES: "arn:aws:iam::123456789012:role/swarmplane-eks",
    })
    const permissions = functions.Reconcile!.permissions as { actions: string[]; resources: string[] }[]
    expect(
      permissions.filter((p) => p.actions[0]!.startsWith("eks:") || p.actions[0]!.startsWith("sts:")),
    ).toEqual([
      {
        actions: ["eks:DescribeCluster"],
        resources: [
          "arn:aws:eks:us-east-1:123456789012:cluster/gpu-a",
          "arn:aws:eks:us-east-1:123456789012:cluster/gpu-b",
        ],
      },
      { actions: ["sts:AssumeRole"], resources: ["arn:aws:iam::123456789012:role/swarmplane-eks"] },
    ])
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

test("the app's outputs are the API URL, the table and the queue", async () => {
  const { outputs, app } = await deploy("production")
  expect(Object.keys(outputs).sort()).toEqual(["api", "queue", "table"])
  expect(app).toMatchObject({ name: "swarmplane", removal: "retain", home: "aws" })
})
