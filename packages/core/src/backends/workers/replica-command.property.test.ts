/**
 * A vLLM replica on a `workers` backend runs `sh -c 'exec vllm serve "$MODEL" ... "$@"'`: whatever model
 * and arguments the API accepts reach vLLM byte-exact, and none is run as a command. Run here by a real
 * `sh` with a fake `vllm` that records its argv.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import fc from "fast-check"
import { afterAll, expect, test } from "vitest"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { replicaCommand } from "./serving"

const work = mkdtempSync(join(tmpdir(), "swarmplane-replica-prop-"))
const canary = join(work, "CANARY")
const bin = join(work, "bin")
mkdirSync(bin)
writeFileSync(join(bin, "vllm"), `#!/bin/sh\nprintf '%s\\0' "$@" > "${work}/vllm.argv"\n`)
chmodSync(join(bin, "vllm"), 0o755)

afterAll(() => rmSync(work, { recursive: true, force: true }))

const payloads = [
  `$(touch ${canary})`,
  `\`touch ${canary}\``,
  `; touch ${canary}`,
  `' ; touch ${canary}; '`,
  '"$@"',
]
const word = fc.oneof(
  fc.constantFrom(...payloads),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 16 }).filter((s) => !s.includes("\0")),
)

test("the model and arguments reach vLLM as they are; none is run", () => {
  fc.assert(
    fc.property(word, fc.array(word, { maxLength: 4 }), (model, args) => {
      // The API's schema says what a model and arguments may be.
      const spec = SwarmSpec.safeParse({ name: "s", model, args })
      if (!spec.success || model === "echo") return
      const argv = replicaCommand({ ...spec.data, project: "p" } as Swarm)
      rmSync(join(work, "vllm.argv"), { force: true })
      execFileSync(argv[0]!, argv.slice(1), {
        env: { PATH: `${bin}:${process.env.PATH}`, MODEL: model, PORT: "8001" },
        timeout: 10_000,
      })
      const ran = existsSync(canary)
      rmSync(canary, { force: true })
      expect(ran, "a word ran as a command").toBe(false)
      const seen = readFileSync(join(work, "vllm.argv"), "utf8").split("\0").slice(0, -1)
      expect(seen).toEqual(["serve", model, "--host", "0.0.0.0", "--port", "8001", ...args])
    }),
    { numRuns: Number(process.env.HOSTILE_RUNS ?? 40) },
  )
})
