/**
 * An attempt's argv and environment, generated: whatever text the API accepts (anything but NUL and a
 * lone surrogate) reaches the program byte-exact, through the gate's shell and, where this machine has
 * them, the namespaces' setup shell; no word of it is ever run as a command, and the agent's token
 * never reaches the attempt. fast-check prints the seed and the shrunk case of a failure.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import fc from "fast-check"
import { afterAll, describe, expect, test } from "vitest"
import { ProcessRun } from "./process-runner"
import { detectSandbox, plainSandbox, type Sandbox } from "./sandbox"

const work = mkdtempSync(join(tmpdir(), "swarmplane-runner-prop-"))
const canary = join(work, "CANARY")
const out = join(work, "spy.out")
const spy = join(work, "spy")
// Records its argv (the count, then each word, NUL-separated) and its environment.
writeFileSync(spy, `#!/bin/sh\nprintf '%s\\0' "$#" "$@" > "$SPY_OUT"\nenv -0 > "$SPY_OUT.env"\n`)
chmodSync(spy, 0o755)

afterAll(() => rmSync(work, { recursive: true, force: true }))

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
/** What the API lets into a command or an environment value. */
const accepted = (text: string) => !text.includes("\0") && !loneSurrogate.test(text)

const payloads = [
  `$(touch ${canary})`,
  `\`touch ${canary}\``,
  `; touch ${canary}`,
  `\ntouch ${canary}\n`,
  `' ; touch ${canary}; '`,
  `" ; touch ${canary}; "`,
  `"$@"`,
  "$1",
  "-c",
  "--",
  "*",
  "~",
  "run",
  "",
]
const word = fc.oneof(
  fc.constantFrom(...payloads),
  fc.string({ unit: "binary", maxLength: 16 }).filter(accepted),
  fc
    .array(fc.constantFrom(...payloads, "$", "'", '"', "\\", " ", "\n"), { minLength: 2, maxLength: 4 })
    .map((parts) => parts.join("")),
)
/** The user's own variable names (the API's rule), not ones the agent or the shell set. */
const envName = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/).map((k) => `V_${k}`)

function spied(): { argv: string[]; env: Map<string, string> } {
  const [, ...argv] = readFileSync(out, "utf8").split("\0").slice(0, -1)
  const env = new Map(
    readFileSync(`${out}.env`, "utf8")
      .split("\0")
      .filter(Boolean)
      .map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
  )
  return { argv, env }
}

const runs = (n: number) => ({ numRuns: Number(process.env.HOSTILE_RUNS ?? n) })

/** The sandboxes to try: as the agent's user, and namespaces where this machine allows them. */
const namespaces = detectSandbox({ mode: "auto", hide: [join(work, "hidden $(touch CANARY)")] })
const sandboxes: [string, Sandbox, number][] = [
  ["the gate alone", plainSandbox("test"), 40],
  ...(namespaces.isolation === "namespaces"
    ? [["namespaces", namespaces, 15] as [string, Sandbox, number]]
    : []),
]

describe("an attempt's argv and environment, generated", () => {
  for (const [name, sandbox, n] of sandboxes)
    test(`${name}: every word arrives byte-exact and none is run`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(word, { maxLength: 5 }),
          fc.dictionary(envName, word, { maxKeys: 4 }),
          async (args, env) => {
            rmSync(out, { force: true })
            const run = new ProcessRun(
              { attemptUid: "att-1", argv: [spy, ...args], env: { ...env, SPY_OUT: out }, sandbox },
              { PATH: process.env.PATH ?? "/usr/bin:/bin", SWARMPLANE_TOKEN: "agent-secret" },
            )
            const outcome = await run.done
            const ran = existsSync(canary)
            rmSync(canary, { force: true })
            expect(ran, "a word of the attempt ran as a command").toBe(false)
            expect(outcome, run.logs.text()).toMatchObject({ state: "SUCCEEDED", exitCode: 0 })
            const seen = spied()
            expect(seen.argv).toEqual(args)
            for (const [k, v] of Object.entries(env)) expect(seen.env.get(k), k).toBe(v)
            expect(seen.env.get("ATTEMPT_UID")).toBe("att-1")
            expect(seen.env.has("SWARMPLANE_TOKEN")).toBe(false)
          },
        ),
        runs(n),
      )
    }, 120_000)
})
