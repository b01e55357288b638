/** The real `swarmplane-agent` bin, run as a child process. */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { once } from "node:events"
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { createEchoServer } from "./echo-server"
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

function agent(args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  children.push(child)
  return child
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
    const child = agent(["worker", "--api", fake.url, "--backend", "local-workers", "--name", "bin-test"], {
      SWARMPLANE_TOKEN: fake.token,
    })
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
})
