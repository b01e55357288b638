/** Completion scripts: bash run for real on sample command lines; zsh checked for its shape. */
import { execFileSync } from "node:child_process"
import { expect, test } from "vitest"
import { run } from "../testing"

async function script(shell: string): Promise<string> {
  const res = await run(["completion", shell])
  expect(res.code).toBe(0)
  return res.stdout
}

/** What bash offers after `words` (the last one is the word being completed). */
function complete(source: string, words: string[]): string[] {
  const program = `${source}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}
_swarmplane; printf '%s\\n' "\${COMPREPLY[@]}"`
  return execFileSync("bash", ["-c", program], { encoding: "utf8" }).split("\n").filter(Boolean)
}

test("bash completes commands, subcommands, options and option values", async () => {
  const source = await script("bash")
  expect(complete(source, ["swarmplane", ""])).toEqual(
    expect.arrayContaining(["up", "down", "job", "backend", "config"]),
  )
  expect(complete(source, ["swarmplane", "job", "s"])).toEqual(["submit", "status"])
  expect(complete(source, ["swarmplane", "--profile", "x", "job", "logs", "--f"])).toEqual(["--follow"])
  expect(complete(source, ["swarmplane", "status", "-o", ""])).toEqual(["table", "json", "yaml"])
  expect(complete(source, ["swarmplane", "config", "validate", "--kind", "s"])).toEqual(["swarm"])
})

test("zsh gets a compdef script with descriptions", async () => {
  const source = await script("zsh")
  expect(source).toMatch(/^#compdef swarmplane\n/)
  expect(source).toContain("'job submit') reply=(")
  expect(source).toContain("'up:create a swarm from a file")
})
