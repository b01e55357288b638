/**
 * Hostile values, generated, in every field that reaches a Slurm script or a login-node command (the
 * hand-written cases are in hostile.test.ts). Each script or command is built from fast-check's values,
 * bypassing the API's validation (as an old stored item or a direct store write would), and run by a
 * real shell with fakes of `sbatch`, `squeue`, `curl`, `apptainer`... on the PATH. Whatever the
 * values: each is refused with an `UnsafeValueError` naming its field, or it reaches its program
 * byte-exact (argv and environment, as a spy records them), no `#SBATCH` option is added, and the
 * canary file that every payload would `touch` is never made.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import fc from "fast-check"
import { afterAll, afterEach, describe, expect, test } from "vitest"
import type { BackendConfigOf } from "../../model/backend"
import { oneLine, programText } from "../../model/slurm-grammar"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { logsCommand } from "./logs"
import {
  cancelCommand,
  parseSubmitBatch,
  reconcileCommand,
  submitBatchCommand,
  submitOrAdoptCommand,
} from "./remote"
import { outputDirOf, type Submission, sbatchScript, UnsafeValueError } from "./script"
import {
  cancelNamesCommand,
  observeCommand,
  observeSections,
  replicaScript,
  routeCommand,
  routerScript,
} from "./serving"
import { slurmConfig } from "./testing"

type SlurmConfig = BackendConfigOf<"slurm">

const work = mkdtempSync(join(tmpdir(), "swarmplane-hostile-prop-"))
const canary = join(work, "CANARY")
const spyDir = join(work, "spy")
const bin = join(work, "bin")
mkdirSync(bin)
mkdirSync(spyDir)

/** A program that records each call's argv (its count, then each word, NUL-separated) and its environment, then succeeds. */
const spy = (name: string, then = "") =>
  `#!/bin/sh\nprintf '%s\\0' "$#" "$@" >> "$SPY_DIR/${name}.argv"\nenv -0 > "$SPY_DIR/${name}.env"\n${then}`
const fakes: Record<string, string> = {
  spy: spy("spy"),
  apptainer: spy("apptainer"),
  enroot: spy("enroot"),
  sbatch: spy("sbatch", 'cat > "$SPY_DIR/sbatch.stdin"\necho 4242\n'),
  squeue: spy("squeue", '[ -z "$SQUEUE_OUT" ] || printf \'%s\\n\' "$SQUEUE_OUT"\n'),
  sacct: spy("sacct", "echo 'JobID|JobName|State|ExitCode|End'\n"),
  scontrol: spy("scontrol"),
  scancel: spy("scancel"),
  tail: spy("tail"),
  curl: spy("curl", "echo 200\n"),
  // The free port of a replica, without a Python start (the real one picks any free port).
  python3: "#!/bin/sh\necho 34567\n",
}
for (const [name, body] of Object.entries(fakes)) {
  writeFileSync(join(bin, name), body)
  chmodSync(join(bin, name), 0o755)
}

afterAll(() => rmSync(work, { recursive: true, force: true }))

afterEach(() => {
  const ran = existsSync(canary)
  rmSync(canary, { force: true })
  expect(ran, "a hostile value ran a command").toBe(false)
})

/**
 * Run a script or command under a real shell, as Slurm or sshd would, with the fakes first on the PATH.
 * A canary made is an injected command that ran: the run fails with the script, so fast-check shrinks to it.
 */
function run(shell: "sh" | "bash", script: string, env: Record<string, string> = {}, stdin = ""): string {
  rmSync(spyDir, { recursive: true, force: true })
  mkdirSync(spyDir)
  let out: string
  try {
    out = execFileSync(shell, ["-c", script], {
      cwd: work,
      encoding: "utf8",
      input: stdin,
      timeout: 10_000,
      stdio: ["pipe", "pipe", "pipe"],
      env: { PATH: `${bin}:${process.env.PATH}`, HOME: work, SPY_DIR: spyDir, ...env },
    })
  } catch (error) {
    expectNoCanary(script)
    throw error
  }
  expectNoCanary(script)
  return out
}

function expectNoCanary(script: string): void {
  const ran = existsSync(canary)
  rmSync(canary, { force: true })
  if (ran) throw new Error(`an injected command ran:\n${script}`)
}

/** What the spy named `name` was given, word by word, in each of its calls. */
function callsOf(name: string): string[][] {
  const file = join(spyDir, `${name}.argv`)
  if (!existsSync(file)) return []
  const words = readFileSync(file, "utf8").split("\0").slice(0, -1)
  const calls: string[][] = []
  for (let i = 0; i < words.length; ) {
    const count = Number(words[i])
    calls.push(words.slice(i + 1, i + 1 + count))
    i += 1 + count
  }
  return calls
}

/** The argv of the one call of the spy named `name`. */
function argvOf(name: string): string[] {
  const calls = callsOf(name)
  expect(calls, `${name} ran once`).toHaveLength(1)
  return calls[0]!
}

function envOf(name: string): Map<string, string> {
  const text = readFileSync(join(spyDir, `${name}.env`), "utf8")
  return new Map(
    text
      .split("\0")
      .filter(Boolean)
      .map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
  )
}

/** Pieces a payload is made of: a shell's metacharacters and commands that would make the canary. */
const payloads = [
  `\ntouch ${canary}\n`,
  `; touch ${canary};`,
  `$(touch ${canary})`,
  `\`touch ${canary}\``,
  `' ; touch ${canary}; '`,
  `" ; touch ${canary}; "`,
  `\r\ntouch ${canary}\r\n`,
  `\\$(touch ${canary})`,
  `'$(touch ${canary})'`,
  `"$(touch ${canary})"`,
  `&& touch ${canary}`,
  `| touch ${canary}`,
  `\n#SBATCH --wrap="touch ${canary}"\n`,
  ` --output=${work}/stolen`,
  ` --wrap=touch$IFS${canary}`,
]
const metachars = [
  "$",
  "(",
  ")",
  "`",
  "'",
  '"',
  "\\",
  ";",
  "&",
  "|",
  "<",
  ">",
  "\n",
  "\r",
  "\t",
  " ",
  "*",
  "?",
  "[",
  "]",
  "{",
  "}",
  "~",
  "#",
  "!",
  "=",
  "%",
  ",",
  "-",
  "\0",
  "\ud800",
  "\u2028",
  "é",
]

/** Text that a shell might take for something else: payloads in a word, metacharacters, any Unicode. */
const hostile: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...payloads) },
  {
    weight: 4,
    arbitrary: fc
      .array(
        fc.oneof(
          fc.constantFrom(...metachars),
          fc.constantFrom(...payloads),
          fc.string({ unit: "binary", maxLength: 6 }),
          fc.constantFrom("x", "gpu", "debug", "sp-s-1", "a.b"),
        ),
        { minLength: 1, maxLength: 6 },
      )
      .map((parts) => parts.join("")),
  },
  { weight: 1, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 20 }) },
)

/**
 * A field's value: valid for it, or (one time in `odds`) hostile, so that most cases have one or two
 * hostile fields and get past the refusals to the shell.
 */
function field<T>(name: string, valid: fc.Arbitrary<T>, bad: fc.Arbitrary<T>, odds = 12) {
  return fc.oneof(
    { weight: odds - 1, arbitrary: valid.map((value) => ({ name, value, hostile: false })) },
    { weight: 1, arbitrary: bad.map((value) => ({ name, value, hostile: true })) },
  )
}
type Drawn<T> = { name: string; value: T; hostile: boolean }

const slurmName = fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,12}$/)
const word = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("a b", "it's", '"q"', "*", "~", "$HOME"))
const EnvName = /^[A-Za-z_][A-Za-z0-9_]*$/
/** Environment names of the user's own (not PATH, IFS or the shell's other variables). */
const envName = fc.stringMatching(/^[A-Z][A-Z0-9_]{0,8}$/).map((k) => `V_${k}`)
const hostileEnvName = hostile.map((k) => (EnvName.test(k) ? `V_${k}` : k))

/** `expect(fn).toThrow(UnsafeValueError)`, naming a field that drew a hostile value. */
function expectRefusal(error: unknown, drawn: Drawn<unknown>[], what: string) {
  expect(error, what).toBeInstanceOf(UnsafeValueError)
  const named = (error as UnsafeValueError).field
  const hostileFields = drawn.filter((d) => d.hostile).map((d) => d.name)
  expect(
    hostileFields.some(
      (f) =>
        named === f || named.startsWith(`${f}.`) || named.startsWith(`${f} `) || named.startsWith(`${f}[`),
    ),
    `${what}: refused ${named}, which is not one of the hostile fields ${hostileFields.join(", ")}`,
  ).toBe(true)
  expect((error as Error).message).toContain(named)
}

/**
 * The sbatch options a script sets, as sbatch reads them: the words of `#SBATCH` lines up to the first
 * command, split on blanks outside quotes.
 */
function sbatchOptions(script: string): string[] {
  const out: string[] = []
  for (const line of script.split("\n").slice(1)) {
    if (line.startsWith("#SBATCH")) out.push(...words(line.slice("#SBATCH".length)))
    else if (line.trim() !== "" && !line.startsWith("#")) break
  }
  return out
}

function words(text: string): string[] {
  const out: string[] = []
  let current = ""
  let quote = ""
  for (const c of text) {
    if (quote) {
      if (c === quote) quote = ""
      else current += c
    } else if (c === '"' || c === "'") quote = c
    else if (c === " " || c === "\t") {
      if (current) out.push(current)
      current = ""
    } else current += c
  }
  if (current) out.push(current)
  return out
}

const runs = (n: number) => ({ numRuns: Number(process.env.HOSTILE_RUNS ?? n) })
/** Each property starts a shell per case: room for a busy machine. */
const shellTimeout = 120_000

/** An output folder under the test's own, absolute or relative to the submit folder (no `..` out of it). */
const outputDir = fc.oneof(
  fc.constantFrom("out", `${work}/out`, "~/out"),
  hostile.map((s) => `${work}/out/${s.replaceAll("..", "_")}`),
)

describe("a task's sbatch script", () => {
  const cases = fc.record({
    partition: field("partition", slurmName, hostile),
    account: field("account", slurmName, hostile),
    qos: field("qos", slurmName, hostile),
    timeLimit: field("timeLimit", fc.constantFrom("60", "01:00:00", "2-00:00:00", "UNLIMITED"), hostile),
    gresGpuName: field("gresGpuName", slurmName, hostile),
    outputDir: field("outputDir", fc.constantFrom("out", `${work}/out`), outputDir),
    extraSbatch: field(
      "extraSbatch[0]",
      fc.constantFrom("--exclusive", '--comment="a b --output=x"', "#SBATCH --mail-type=END", "-p debug"),
      fc.oneof(
        hostile.map((v) => `--comment=${v}`),
        hostile.map((v) => `#SBATCH${v}--exclusive`),
        // Another option after the first, which sbatch would read too.
        fc
          .tuple(
            fc.constantFrom("--exclusive", "--comment=a", '--comment="a"', "-x y"),
            fc.constantFrom(" ", "\t", "  "),
          )
          .map(([first, gap]) => `${first}${gap}--array=0-99`),
      ),
      4,
    ),
    // Shell by design, so only what makes more than one line: refused.
    setup: field(
      "setup[0]",
      fc.constant("true"),
      hostile.filter((v) => !oneLine(v, { tab: true })),
    ),
    launcher: fc.constantFrom("none", "apptainer", "enroot") as fc.Arbitrary<"none" | "apptainer" | "enroot">,
    extraArgs: field(
      "container.extraArgs",
      fc.array(word, { maxLength: 2 }),
      fc.array(hostile, { minLength: 1, maxLength: 2 }),
    ),
    agentCommand: field(
      "agentCommand",
      fc.array(word, { maxLength: 2 }),
      fc.array(hostile, { minLength: 1, maxLength: 2 }),
    ),
    useAgent: fc.boolean(),
    name: field(
      "job name",
      fc.constantFrom("sp-s-01abc", "sp-s-x.y_z"),
      hostile.map((v) => `sp-${v}`),
    ),
    attemptUid: field("attemptUid", fc.constantFrom("a-1", "att_01"), hostile),
    gpuType: field("resources.gpuType", fc.option(slurmName, { nil: undefined }), hostile),
    gpu: fc.nat(2),
    featurePartition: field("constraint partition", fc.option(slurmName, { nil: undefined }), hostile),
    feature: field("constraint feature", fc.option(slurmName, { nil: undefined }), hostile),
    envName: field("env name", envName, hostileEnvName),
    envValue: field("env", word, hostile),
    args: field(
      "command",
      fc.array(word, { maxLength: 3 }),
      fc.array(hostile, { minLength: 1, maxLength: 3 }),
    ),
    image: field(
      "image",
      fc.option(fc.constantFrom("nvcr.io/nvidia/pytorch:24.01", "docker://x/y"), { nil: undefined }),
      hostile,
    ),
    index: fc.nat(3),
  })

  test(
    "every field is refused naming it, or reaches the program byte-exact; no option is added, nothing runs",
    () => {
      fc.assert(
        fc.property(cases, (c) => {
          const drawn = (Object.values(c) as unknown[]).filter(
            (v): v is Drawn<unknown> => typeof v === "object" && v !== null && "hostile" in v,
          )
          const config: SlurmConfig = {
            ...slurmConfig(),
            partition: c.partition.value,
            account: c.account.value,
            qos: c.qos.value,
            timeLimit: c.timeLimit.value,
            gresGpuName: c.gresGpuName.value,
            outputDir: c.outputDir.value,
            extraSbatch: [c.extraSbatch.value],
            setup: [c.setup.value],
            container: { launcher: c.launcher, extraArgs: c.extraArgs.value },
            agentCommand: ["spy", ...c.agentCommand.value],
          }
          const sub: Submission = {
            name: c.name.value,
            entries: [{ index: c.index, shard: c.index + 1, attemptUid: c.attemptUid.value }],
            nshards: 5,
            resources: {
              cpu: 1,
              memoryMiB: 64,
              gpu: c.gpu,
              ...(c.gpuType.value !== undefined ? { gpuType: c.gpuType.value } : {}),
            },
            env: { [c.envName.value]: c.envValue.value },
            command: [c.useAgent ? "swarmplane-agent" : "spy", ...c.args.value],
            features: c.feature.value !== undefined ? [c.feature.value] : [],
            ...(c.featurePartition.value !== undefined ? { partition: c.featurePartition.value } : {}),
            ...(c.image.value !== undefined ? { image: c.image.value } : {}),
          }
          const what = JSON.stringify(c)
          let script: string
          try {
            script = sbatchScript(config, sub)
          } catch (error) {
            expectRefusal(error, drawn, what)
            return
          }
          // sbatch sees the options swarmplane sets, once each, and the user's one; nothing a value smuggled in.
          const options = sbatchOptions(script)
          for (const name of ["--job-name", "--output", "--array", "--open-mode", "--time", "--partition"])
            expect(
              options.filter((o) => o.startsWith(`${name}=`)),
              `${what}: ${name}`,
            ).toHaveLength(1)
          expect(
            options.filter((o) => /^--(wrap|requeue|error|chdir)\b/.test(o)),
            what,
          ).toEqual([])
          expect(options, what).toContain(`--partition=${c.featurePartition.value ?? c.partition.value}`)

          mkdirSync(join(work, outputDirOf(config).replace(new RegExp(`^${work}/?`), "")), {
            recursive: true,
          })
          console.log(
            `stat ran ${drawn
              .filter((d) => d.hostile)
              .map((d) => d.name)
              .join(",")}`,
          )
          run("bash", script, {
            SLURM_ARRAY_TASK_ID: String(c.index),
            SLURM_SUBMIT_DIR: work,
            SLURM_JOB_NAME: sub.name,
          })
          const inner = [...(c.useAgent ? config.agentCommand : ["spy"]), ...c.args.value]
          const argv =
            sub.image === undefined || c.launcher === "none"
              ? inner
              : c.launcher === "apptainer"
                ? [
                    "apptainer",
                    "exec",
                    ...c.extraArgs.value,
                    sub.image.includes("://") ? sub.image : `docker://${sub.image}`,
                    ...inner,
                  ]
                : ["enroot", "start", ...c.extraArgs.value, sub.image, ...inner]
          expect(argvOf(argv[0]!), what).toEqual(argv.slice(1))
          const env = envOf(argv[0]!)
          expect(env.get(c.envName.value), what).toBe(c.envValue.value)
          expect(env.get("ATTEMPT_UID"), what).toBe(c.attemptUid.value)
          expect(env.get("SHARD_ID"), what).toBe(String(c.index + 1))
          const dir = outputDirOf(config)
          const exit = join(dir.startsWith("/") ? dir : join(work, dir), `${sub.name}_${c.index}.exit`)
          expect(
            readFileSync(exit, "utf8"),
            `${what}: the exit code is written where reconcile reads it`,
          ).toBe("0\n")
        }),
        runs(100),
      )
    },
    shellTimeout,
  )
})

/** A swarm as the store holds one, over `spec`. */
function swarmOf(spec: Record<string, unknown>, extra: Partial<Swarm> = {}): Swarm {
  return {
    ...SwarmSpec.parse({ name: "s", model: "echo" }),
    ...spec,
    project: "p",
    phase: "PENDING",
    desired: "running",
    generation: 1,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 1, items: [] },
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
    ...extra,
  } as Swarm
}

describe("a swarm's replica and router scripts", () => {
  const cases = fc.record({
    model: field("model", fc.constantFrom("echo", "meta-llama/Llama-3.1-8B", "m b"), hostile),
    command: fc.option(
      field("command", fc.array(word, { maxLength: 2 }), fc.array(hostile, { minLength: 1, maxLength: 2 })),
      {
        nil: undefined,
      },
    ),
    args: field("args", fc.array(word, { maxLength: 2 }), fc.array(hostile, { minLength: 1, maxLength: 2 })),
    envName: field("env name", envName, hostileEnvName),
    envValue: field("env", word, hostile),
    healthPath: field(
      "healthPath",
      fc.constantFrom("/health", "/v1/models?x=1&y='2'"),
      hostile.map((v) => `/${v}`),
    ),
    partition: field("serving.slurm.partition", fc.option(slurmName, { nil: undefined }), hostile),
    timeLimit: field(
      "serving.slurm.timeLimit",
      fc.option(fc.constantFrom("60", "7-00:00:00"), { nil: undefined }),
      hostile,
    ),
    name: field(
      "job name",
      fc.constantFrom("sp-srv-p.s.abc123-router-g1"),
      hostile.map((v) => `sp-srv-${v}`),
    ),
    // The routing and counters files: under the output folder, named from the project and the swarm.
    routing: field(
      "routing file",
      fc.constant(`${work}/router/sp-srv-p.s.abc123.routing`),
      hostile.map((v) => `${work}/router/r-${v.replaceAll("/", "_")}`),
    ),
    counters: field(
      "counters file",
      fc.constant(`${work}/router/sp-srv-p.s.abc123.counters`),
      hostile.map((v) => `${work}/router/c-${v.replaceAll("/", "_")}`),
    ),
    routerCommand: fc.option(
      field(
        "routerCommand",
        fc.array(word, { maxLength: 2 }),
        fc.array(hostile, { minLength: 1, maxLength: 2 }),
      ),
      {
        nil: undefined,
      },
    ),
  })

  test(
    "the replica's server gets its command, model and environment byte-exact; nothing else runs",
    () => {
      fc.assert(
        fc.property(cases, (c) => {
          const drawn = [
            c.model,
            c.command,
            c.args,
            c.envName,
            c.envValue,
            c.healthPath,
            c.partition,
            c.timeLimit,
            c.name,
          ].filter((d): d is Drawn<never> => d !== undefined)
          const config = { ...slurmConfig({ outputDir: `${work}/srv` }), agentCommand: ["spy", "agent"] }
          const swarm = swarmOf({
            model: c.model.value,
            ...(c.command ? { command: ["spy", ...c.command.value] } : {}),
            args: c.args.value,
            env: { [c.envName.value]: c.envValue.value },
            healthPath: c.healthPath.value,
            serving: {
              slurm: {
                ...(c.partition.value !== undefined ? { partition: c.partition.value } : {}),
                ...(c.timeLimit.value !== undefined ? { timeLimit: c.timeLimit.value } : {}),
              },
            },
          })
          const what = JSON.stringify(c)
          let script: string
          try {
            script = replicaScript(config, swarm, c.name.value)
          } catch (error) {
            expectRefusal(error, drawn, what)
            return
          }
          const options = sbatchOptions(script)
          for (const name of ["--job-name", "--output", "--time", "--partition"])
            expect(
              options.filter((o) => o.startsWith(`${name}=`)),
              `${what}: ${name}`,
            ).toHaveLength(1)
          expect(
            options.filter((o) => o.startsWith("--array")),
            `${what}: a replica is a job of its own`,
          ).toEqual([])
          mkdirSync(join(work, "srv"), { recursive: true })
          // vLLM is the spy too, when the swarm has no command of its own and no echo model.
          writeFileSync(join(bin, "vllm"), spy("vllm"))
          chmodSync(join(bin, "vllm"), 0o755)
          run("bash", script, { SLURM_ARRAY_TASK_ID: "0", SLURM_JOB_NAME: c.name.value })
          const server = c.command
            ? ["spy", ...c.command.value, ...c.args.value]
            : c.model.value === "echo"
              ? ["spy", "agent", "echo-server", ...c.args.value]
              : ["vllm", "serve", c.model.value, "--host", "0.0.0.0", "--port", "34567", ...c.args.value]
          expect(argvOf(server[0]!), what).toEqual(server.slice(1))
          const env = envOf(server[0]!)
          expect(env.get(c.envName.value), what).toBe(c.envValue.value)
          expect(env.get("MODEL"), what).toBe(c.model.value)
          expect(argvOf("curl").at(-1), `${what}: the health check asks for the path as given`).toBe(
            `http://127.0.0.1:34567${c.healthPath.value}`,
          )
        }),
        runs(30),
      )
    },
    shellTimeout,
  )

  test(
    "the router gets its command, its routing and counters files byte-exact; nothing else runs",
    () => {
      fc.assert(
        fc.property(cases, fc.boolean(), (c, wake) => {
          const drawn = [c.name, c.routing, c.counters, c.routerCommand].filter(
            (d): d is Drawn<never> => d !== undefined,
          )
          const dir = join(work, "router")
          const config = {
            ...slurmConfig({ outputDir: dir }),
            ...(c.routerCommand
              ? { routerCommand: ["spy", ...c.routerCommand.value] }
              : { agentCommand: ["spy", "agent"] }),
          }
          const swarm = swarmOf(
            wake ? { autoscaling: { minReplicas: 0, maxReplicas: 2, wakeTimeoutS: 30 } } : {},
          )
          const what = JSON.stringify(c)
          let script: string
          try {
            script = routerScript(config, swarm, c.name.value, {
              routing: c.routing.value,
              counters: c.counters.value,
            })
          } catch (error) {
            expectRefusal(error, drawn, what)
            return
          }
          rmSync(dir, { recursive: true, force: true })
          mkdirSync(dir, { recursive: true })
          run("bash", script, { SLURM_JOB_NAME: c.name.value })
          const command = c.routerCommand ? c.routerCommand.value : ["agent", "router"]
          expect(argvOf("spy"), what).toEqual([
            ...command,
            "--upstream-list",
            c.routing.value,
            "--counters-file",
            c.counters.value,
            ...(wake ? ["--wake-hold-s", "30"] : []),
            "--port",
            "34567",
          ])
          expect(existsSync(c.routing.value), `${what}: the routing file is there before the router`).toBe(
            true,
          )
        }),
        runs(25),
      )
    },
    shellTimeout,
  )
})

/**
 * Stored values that reach a login-node command: what a shell might take for something else. Not NUL or
 * a lone surrogate: no field they come from can hold one (the API refuses both, swarmplane mints the
 * rest), and a command cannot carry them to the shell at all (an exec's argument ends at a NUL).
 */
const storedHostile = hostile.filter((v) => programText(v))

describe("login-node commands", () => {
  const shell = fc.constantFrom("sh", "bash") as fc.Arbitrary<"sh" | "bash">
  const name = fc.oneof(fc.constantFrom("sp-s-01abc", "sp-srv-p.s.abc-g1"), storedHostile)
  // The backend's output folder, as its config's schema allows it.
  const dir = fc.oneof(
    fc.constantFrom(`${work}/cmd`, "cmd"),
    fc.stringMatching(/^[A-Za-z0-9_.+@-]{1,12}$/).map((v) => `${work}/cmd/${v.replaceAll("..", "_")}`),
  )

  test(
    "submit-or-adopt: the job name reaches squeue and sacct as one word, the script reaches sbatch",
    () => {
      fc.assert(
        fc.property(shell, name, dir, (sh, n, d) => {
          const script = `#!/bin/bash\necho ${n.length}\n`
          run(sh, submitOrAdoptCommand(n, d), {}, script)
          expect(
            callsOf("squeue").map((a) => a.find((w) => w.startsWith("--name="))),
            n,
          ).toEqual([`--name=${n}`])
          expect(callsOf("sacct")[0], n).toContain(`--name=${n}`)
          expect(readFileSync(join(spyDir, "sbatch.stdin"), "utf8")).toBe(script)
        }),
        runs(30),
      )
    },
    shellTimeout,
  )

  test(
    "a batch of submissions: hostile names and script lines stay data, each script reaches sbatch whole",
    () => {
      fc.assert(
        fc.property(shell, name, dir, storedHostile, (sh, n, d, line) => {
          // A script line may be anything a stored value holds: the here-document is quoted.
          const script = `#!/bin/bash\necho ${n.length}\n${line}\n`
          const out = run(
            sh,
            submitBatchCommand([{ name: n, firstTry: false, script }], d, "SWARMPLANE_EOF_9f"),
          )
          expect(
            callsOf("squeue").map((a) => a.find((w) => w.startsWith("--name="))),
            n,
          ).toEqual([`--name=${n}`])
          expect(readFileSync(join(spyDir, "sbatch.stdin"), "utf8")).toBe(script)
          expect(parseSubmitBatch(out).get(0)?.code, n).toBe(0)
        }),
        runs(30),
      )
    },
    shellTimeout,
  )

  test(
    "reconcile, logs and cancel: stored names, paths and ids are data, never commands",
    () => {
      const stored = fc.record({
        names: fc.array(name, { maxLength: 3 }),
        arrayIds: fc.array(fc.oneof(fc.constantFrom("101", "102"), storedHostile), { maxLength: 2 }),
        progress: fc.array(fc.record({ key: storedHostile, path: storedHostile }), { maxLength: 2 }),
        dir,
        ids: fc.array(fc.oneof(fc.constantFrom("101_0"), storedHostile), { minLength: 1, maxLength: 3 }),
        paths: fc.array(storedHostile, { minLength: 1, maxLength: 3 }),
      })
      fc.assert(
        fc.property(shell, stored, (sh, s) => {
          run(sh, reconcileCommand(s.names, s.arrayIds, s.progress, { outputDir: s.dir }), {
            SQUEUE_OUT: "101_0|101|0|sp-s-01abc|COMPLETED|None|0:05|10:00|debug|vm|1|1|1G|N/A",
          })
          run(sh, logsCommand(s.paths, 5))
          expect(callsOf("tail").map((a) => a.at(-1))).toEqual(s.paths)
          run(sh, cancelCommand(s.ids))
          expect(callsOf("scancel")[0]).toEqual(s.ids)
        }),
        runs(25),
      )
    },
    shellTimeout,
  )

  test(
    "reading a swarm: stored job names, its health path and its files are data, each name probed once",
    () => {
      const stored = fc.record({
        replicas: fc.uniqueArray(name, { maxLength: 3 }),
        router: fc.option(name, { nil: undefined }),
        legacy: fc.array(name, { maxLength: 2 }),
        healthPath: fc.oneof(fc.constant("/health"), storedHostile),
        routing: storedHostile,
        counters: storedHostile,
      })
      fc.assert(
        fc.property(shell, stored, (sh, s) => {
          const dir = `${work}/cmd`
          rmSync(dir, { recursive: true, force: true })
          mkdirSync(dir, { recursive: true })
          // The address files of the jobs (where a name makes a file name), for the probes to read.
          const fileable = (n: string) => !n.includes("/") && !n.includes("\0") && n !== "." && n !== ".."
          for (const n of [...s.replicas, ...(s.router ? [s.router] : [])])
            if (fileable(n)) writeFileSync(join(dir, `${n}_0.addr`), "10.0.0.1:8000")
          const routing = `${dir}/r-${s.routing.replaceAll("/", "_")}`
          writeFileSync(routing, "http://10.0.0.1:8000\n")
          const out = run(
            sh,
            observeCommand({
              dir,
              replicas: s.replicas,
              ...(s.router ? { router: s.router } : {}),
              healthPath: s.healthPath,
              files: { routing, counters: `${dir}/c-${s.counters.replaceAll("/", "_")}` },
              legacy: s.legacy,
            }),
          )
          const names = [...s.replicas, ...(s.router ? [s.router] : [])]
          expect(callsOf("squeue").map((a) => a.find((w) => w.startsWith("--name=")))).toEqual(
            names.length ? [`--name=${names.join(",")}`] : [],
          )
          expect(callsOf("scancel").map((a) => a.at(-1))).toEqual(s.legacy.map((n) => `--name=${n}`))
          const probed = s.replicas.filter(fileable)
          expect(
            callsOf("curl")
              .map((a) => a.at(-1))
              .slice(0, probed.length),
          ).toEqual(probed.map(() => `http://10.0.0.1:8000${s.healthPath}`))
          const parts = observeSections(out)
          if (!names.some((n) => n.includes("@@"))) expect(parts.routed).toEqual(["http://10.0.0.1:8000"])
        }),
        runs(25),
      )
    },
    shellTimeout,
  )

  test(
    "routing and cancelling: replica addresses become the routing file's lines, names reach scancel whole",
    () => {
      fc.assert(
        fc.property(
          shell,
          fc.array(fc.oneof(fc.constant("http://10.0.0.1:8000"), storedHostile), { maxLength: 3 }),
          fc.array(name, { maxLength: 3 }),
          (sh, urls, names) => {
            const dir = `${work}/route`
            run(sh, routeCommand(dir, `${dir}/s.routing`, urls))
            expect(readFileSync(`${dir}/s.routing`, "utf8")).toBe(
              `${urls.map((u) => u.replaceAll("\n", "")).join("\n")}\n`,
            )
            run(sh, cancelNamesCommand(names))
            expect(callsOf("scancel").map((a) => a.at(-1))).toEqual(names.map((n) => `--name=${n}`))
          },
        ),
        runs(25),
      )
    },
    shellTimeout,
  )
})

/** What these properties found, shrunk, kept as fixed cases: each failed before its fix. */
describe("found by the properties above", () => {
  const sub: Submission = {
    name: "sp-s-01abc",
    entries: [{ index: 0, shard: 0, attemptUid: "a-1" }],
    nshards: 1,
    resources: { cpu: 1, memoryMiB: 64, gpu: 0 },
    env: {},
    command: ["spy"],
    features: [],
  }
  const refused = (build: () => unknown, field: string) => {
    let error: unknown
    try {
      build()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(UnsafeValueError)
    expect((error as UnsafeValueError).field).toBe(field)
  }

  test("a lone surrogate in a command word is refused (the program would get U+FFFD)", () => {
    refused(
      () => sbatchScript(slurmConfig(), { ...sub, command: ["spy", "\ud800$", "\u0001"] }),
      "command[1]",
    )
    refused(() => sbatchScript(slurmConfig(), { ...sub, env: { A: "x\ud83d" } }), "env.A")
  })

  test("an extra sbatch option with a second option after it is refused, by the schema and the script", () => {
    expect(() => slurmConfig({ extraSbatch: ["--exclusive --array=0-99"] })).toThrow(/one sbatch option/)
    expect(() => slurmConfig({ extraSbatch: ["#SBATCH\n--exclusive"] })).toThrow(/one sbatch option/)
    refused(
      () => sbatchScript({ ...slurmConfig(), extraSbatch: ["--exclusive --array=0-99"] }, sub),
      "extraSbatch[0]",
    )
    // One option whose value has spaces, quoted whole, is still one option.
    expect(
      sbatchOptions(sbatchScript(slurmConfig({ extraSbatch: ['--comment="a --output=x"'] }), sub)),
    ).toContain("--comment=a --output=x")
  })

  test("a replica's command word with a NUL is refused where the script is written", () => {
    refused(
      () => replicaScript(slurmConfig(), swarmOf({ command: ["\u0000x"] }), "sp-srv-p.s.abc-g1"),
      "command[0]",
    )
  })

  test("a routing file whose path has a NUL is refused where the router's script is written", () => {
    refused(
      () =>
        routerScript(slurmConfig(), swarmOf({}), "sp-srv-p.s.abc-router-g1", {
          routing: "out/r\u0000x",
          counters: "out/c",
        }),
      "routing file",
    )
  })

  test("submit-or-adopt: a job name goes to sacct as it is, inside double quotes or not", () => {
    for (const name of ["$", `$(touch ${canary})`]) {
      run("sh", submitOrAdoptCommand(name, `${work}/cmd`), {}, "#!/bin/bash\n")
      expect(callsOf("sacct")[0]).toContain(`--name=${name}`)
    }
  })

  test("reading a swarm whose stored job name has a quote: the command still runs", () => {
    for (const shell of ["sh", "bash"] as const)
      run(
        shell,
        observeCommand({
          dir: `${work}/cmd`,
          replicas: ['"x'],
          router: "sp-s-01abc",
          healthPath: "/health",
          files: { routing: `${work}/cmd/r`, counters: `${work}/cmd/c` },
        }),
      )
  })
})
