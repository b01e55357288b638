/**
 * Test support: run `sst.config.ts` and `infra/*` without AWS, against a recording stand-in for SST's
 * globals (`sst.aws.*`, `sst.Secret`, `aws.*`, `$app`, `$interpolate`, `$config`), and hand back what
 * they made: every component with its arguments, every function of the app by name with its arguments
 * and execution role, the app's settings and outputs. Used by `test/infra-wiring.test.ts` (the wiring)
 * and `test/lambda-bundles.test.ts` (each bundle runs with the environment its function is given).
 * `npm run typecheck:infra` checks the same files against SST's real types.
 */
import { join, resolve } from "node:path"
import { expect, vi } from "vitest"

const root = resolve(import.meta.dirname, "../..")

/** What `infra/functions.ts` reads from the deploy's environment. */
export const DeploySettings = [
  "SWARMPLANE_VPC_SUBNETS",
  "SWARMPLANE_VPC_SECURITY_GROUPS",
  "SWARMPLANE_EKS_CLUSTERS",
  "SWARMPLANE_EKS_ROLES",
]

export interface Made {
  kind: string
  name: string
  args: Record<string, unknown>
}

/** A linked component as the stand-in makes it: what SST would put in the link's properties. */
export interface Linked {
  kind: string
  name: string
  arn: string
  url: string
}

/** The execution role the stand-in gives a function made under `name`. */
export const roleArn = (name: string) => `arn:aws:iam::123456789012:role/${name}Role`

/** A Pulumi output of `value`, as far as infra/ uses one. */
const output = <T>(value: T) => ({ apply: <U>(f: (v: T) => U) => f(value) })

/** A made function's `nodes`, as far as infra/ reads them (`nodes.role.arn`). */
const functionNodes = (name: string) => ({ role: { arn: roleArn(name) } })

/** Install the stand-in; returns what the infra code makes through it. */
function standIn(stage: string) {
  const made: Made[] = []
  const subscriptions: { queue: string; fn: Record<string, unknown>; args: Record<string, unknown> }[] = []
  const record = (kind: string) =>
    class {
      readonly kind = kind
      readonly name: string
      readonly arn: string
      readonly url: string
      readonly nodes: Record<string, unknown>
      constructor(name: string, args: Record<string, unknown> = {}) {
        this.name = name
        this.arn = `arn:aws:${kind}:us-east-1:123456789012:${name}`
        this.url = `https://${name}.example`
        this.nodes = {
          ...(kind === "function" ? functionNodes(name) : {}),
          ...(kind === "cron" ? { function: output({ nodes: functionNodes(`${name}Function`) }) } : {}),
          ...(kind === "queue" ? { queue: { name: `${name}Name` } } : {}),
        }
        made.push({ kind, name, args })
      }
      subscribe(fn: Record<string, unknown>, args: Record<string, unknown> = {}) {
        subscriptions.push({ queue: this.name, fn, args })
        return { nodes: { function: output({ nodes: functionNodes(`${this.name}Subscriber`) }) } }
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

/** A function of the app: its arguments, and the execution role it runs as. */
export interface AppFunction {
  args: Record<string, unknown>
  role: string
}

/**
 * Run the app as `sst deploy --stage <stage>` would, with `env` as the deploy's environment. The
 * caller undoes the stubs (`vi.unstubAllGlobals()`, `vi.unstubAllEnvs()`).
 */
export async function deploy(stage = "test", env: Record<string, string> = {}) {
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
  const consumer = recorded.subscriptions.find((s) => s.queue === "ScheduleQueue")
  expect(consumer, "the ScheduleQueue's subscriber").toBeDefined()
  // Every function of the app, by name: the API, the queue's consumer, the crons' functions.
  const each: Record<string, AppFunction> = {
    Api: { args: one("function", "Api"), role: roleArn("Api") },
    ScheduleConsumer: { args: consumer!.fn, role: roleArn("ScheduleQueueSubscriber") },
    Reconcile: {
      args: one("cron", "Reconcile").function as Record<string, unknown>,
      role: roleArn("ReconcileFunction"),
    },
    Autoscale: {
      args: one("cron", "Autoscale").function as Record<string, unknown>,
      role: roleArn("AutoscaleFunction"),
    },
  }
  const pick = <K extends keyof AppFunction>(key: K) =>
    Object.fromEntries(Object.entries(each).map(([name, f]) => [name, f[key]])) as Record<
      string,
      AppFunction[K]
    >
  return { ...recorded, app, outputs, one, functions: pick("args"), roles: pick("role") }
}

/** The names a function is linked to. */
export const linkNames = (f: Record<string, unknown>) =>
  ((f.link ?? []) as Linked[]).map((l) => l.name).sort()
