/** The real `swarmplane-agent` bin, run as a child process. */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { once } from "node:events"
import { readFileSync } from "node:fs"
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { createEchoServer } from "./echo-server"
import { commandLine, livingProcesses, processStat } from "./process-group"
import { type FakeControlPlane, startFakeControlPlane } from "./testing/fake-control-plane"
import { livingSleeps, sleepMarker, waitFor } from "./testing/wait"

const bin = fileURLToPath(new URL("../bin/swarmplane-agent.mjs", import.meta.url))
const children: ChildProcess[] = []
let cp: FakeControlPlane | undefined

afterEach(async () => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  await cp?.close()
  cp = undefined
})

function agent(args: string[], env: Record<string, string> = {}, stdin?: string): ChildProcess {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...env },
    stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  })
  if (stdin !== undefined) child.stdin?.end(stdin)
  children.push(child)
  return child
}

/** Everything the child writes on stderr, as it comes. */
function stderrOf(child: ChildProcess): () => string {
  let text = ""
  child.stderr?.on("data", (chunk: Buffer) => {
    text += chunk.toString()
  })
  return () => text
}

/** Resolve with the first line of stdout that starts with `listening on`, as the URL it names. */
async function listeningUrl(child: ChildProcess): Promise<string> {
  let seen = ""
  child.stdout?.setEncoding("utf8")
  for await (const chunk of child.stdout as AsyncIterable<string>) {
    seen += chunk
    const url = /listening on (http:\/\/\S+)/.exec(seen)?.[1]
    if (url) return url
  }
  throw new Error(`exited without listening; stdout: ${seen}`)
}

describe("swarmplane-agent bin", () => {
  it("exits 2 with a one-line message for a usage error", () => {
    const result = spawnSync(process.execPath, [bin, "worker", "--backend", "b"], { encoding: "utf8" })
    expect(result.status).toBe(2)
    expect(result.stderr.trim().split("\n")).toHaveLength(1)
    expect(result.stderr).toContain("--api is required")
  })

  it("serves the echo server and the router, and exits 0 on SIGTERM", async () => {
    const echo = agent(["echo-server", "--port", "0"])
    const echoUrl = await listeningUrl(echo)
    expect(echoUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const router = agent(["router", "--host", "127.0.0.1", "--upstream", echoUrl])
    const routerUrl = await listeningUrl(router)
    const res = await fetch(`${routerUrl}/v1/completions`, {
      method: "POST",
      body: '{"prompt":"via the bin"}',
    })
    expect((await res.json()).choices[0].text).toBe("echo: via the bin")
    for (const child of [router, echo]) {
      const exited = once(child, "exit")
      child.kill("SIGTERM")
      expect(await exited).toEqual([0, null])
    }
  })

  it("routes to the address in an --upstream-file, and follows it when it changes", async () => {
    const [a, b] = [createEchoServer(), createEchoServer()]
    const [portA, portB] = [await a.listen(0), await b.listen(0)]
    const dir = await mkdtemp(join(tmpdir(), "router-bin-"))
    const file = join(dir, "replica_0.addr")
    const point = async (port: number) => {
      await writeFile(`${file}.tmp`, `127.0.0.1:${port}\n`)
      await rename(`${file}.tmp`, file)
    }
    try {
      await point(portA)
      const router = agent(["router", "--host", "127.0.0.1", "--upstream-file", file, "--reload-ms", "100"])
      let stderr = ""
      router.stderr?.on("data", (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const url = await listeningUrl(router)
      expect((await fetch(`${url}/v1/models`)).status).toBe(200)
      expect(a.stats.requests).toBe(1)
      await point(portB)
      await waitFor("the router to move to B", async () => {
        await (await fetch(`${url}/v1/models`)).text()
        return b.stats.requests > 0
      })
      // stderr is another pipe than the answers: its lines may arrive after them.
      for (const port of [portA, portB])
        await waitFor("the router's log line", () =>
          stderr.includes(`router: upstreams now http://127.0.0.1:${port}`),
        )
      const exited = once(router, "exit")
      router.kill("SIGTERM")
      expect(await exited).toEqual([0, null])
    } finally {
      await Promise.all([a.close(), b.close(), rm(dir, { recursive: true, force: true })])
    }
  })

  it("on SIGTERM stops its attempts, sends a last heartbeat and exits 0", async () => {
    const fake = await startFakeControlPlane()
    cp = fake
    const marker = sleepMarker()
    fake.setDesired([
      {
        attemptUid: "t-1",
        action: "run",
        kind: "task",
        jobId: "j",
        taskIndex: 0,
        command: ["sh", "-c", `sleep ${marker} & sleep ${marker}`],
      },
      {
        attemptUid: "r-1",
        action: "run",
        kind: "replica",
        jobId: "s",
        taskIndex: 0,
        command: ["swarmplane-agent", "echo-server"],
        healthPath: "/health",
      },
    ])
    const state = await mkdtemp(join(tmpdir(), "agent-state-"))
    const child = agent(
      ["worker", "--api", fake.url, "--backend", "local-workers", "--name", "bin-test", "--state-dir", state],
      { SWARMPLANE_TOKEN: fake.token },
    )
    let stderr = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const ready = await fake.waitForReport("r-1", (a) => a.ready === true)
    await waitFor("the task's sleeps", () => livingSleeps(marker).length === 2)
    expect(fake.registrations[0]?.body).toMatchObject({ name: "bin-test", agentVersion: "0.1.0" })

    const exited = once(child, "exit")
    const last = fake.waitForHeartbeat(
      (b) => b.attempts.length === 2 && b.attempts.every((a) => a.state === "KILLED"),
    )
    child.kill("SIGTERM")
    expect(await exited, stderr).toEqual([0, null])
    await last
    expect(livingSleeps(marker)).toEqual([])
    await expect(fetch(`${ready.endpoint}/health`)).rejects.toThrow()
    expect(stderr).toContain("SIGTERM")
    expect(fake.violations).toEqual([])
  })

  it("takes its token on stdin: in neither its command line nor its environment; says its isolation", async () => {
    const fake = await startFakeControlPlane({ token: `sp-token-${Math.random().toString(36).slice(2)}` })
    cp = fake
    const state = await mkdtemp(join(tmpdir(), "agent-state-"))
    const child = agent(
      ["worker", "--api", fake.url, "--backend", "b", "--token-file", "-", "--state-dir", state],
      {},
      `${fake.token}\n`,
    )
    const stderr = stderrOf(child)
    await fake.waitForHeartbeat(() => true)
    const pid = child.pid ?? 0
    expect(commandLine(pid)).not.toContain(fake.token)
    expect(readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain(fake.token)
    const body = fake.registrations[0]?.body as { attributes: Record<string, string> } | undefined
    const isolation = body?.attributes.isolation
    expect(["namespaces", "none"]).toContain(isolation)
    expect(stderr()).toMatch(
      isolation === "namespaces"
        ? new RegExp(`tasks run in a private mount\\+pid namespace; hidden: ${state}`)
        : /no namespace isolation available \(.+\): tasks run as \S+ with your files/,
    )
    expect(fake.violations).toEqual([])
  })

  it("a restarted agent reaps the task its predecessor left running when the watcher died with it", async () => {
    const fake = await startFakeControlPlane()
    cp = fake
    const state = await mkdtemp(join(tmpdir(), "agent-state-"))
    const marker = sleepMarker()
    fake.setDesired([
      {
        attemptUid: "t-left",
        action: "run",
        kind: "task",
        jobId: "j",
        taskIndex: 0,
        command: ["sh", "-c", `sleep ${marker} & sleep ${marker}`],
      },
    ])
    const args = ["worker", "--api", fake.url, "--backend", "b", "--state-dir", state]
    const first = agent(args, { SWARMPLANE_TOKEN: fake.token })
    await waitFor("the task's sleeps", () => livingSleeps(marker).length === 2)
    const pgid = processStat(livingSleeps(marker)[0] ?? 0)?.pgrp
    // The agent and the task's watcher die together (kill -9 of both, an OOM kill of the lot).
    const watchers = livingProcesses((s) => commandLine(s.pid).endsWith(`swarmplane-watch ${pgid}`))
    expect(watchers).toHaveLength(1)
    for (const w of watchers) process.kill(w.pid, "SIGKILL")
    const exited = once(first, "exit")
    first.kill("SIGKILL")
    await exited
    // Nothing else would ever stop it.
    expect(livingSleeps(marker)).toHaveLength(2)

    fake.setDesired([])
    const second = agent(args, { SWARMPLANE_TOKEN: fake.token })
    const stderr = stderrOf(second)
    await waitFor("the leftover to be reaped", () => livingSleeps(marker).length === 0, { timeoutMs: 15_000 })
    await waitFor("the agent to say so", () =>
      stderr().includes(`reaped the leftover process group ${pgid} of attempt t-left`),
    )
  })
})
