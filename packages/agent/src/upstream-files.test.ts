import { once } from "node:events"
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Logger } from "./logger"
import { createRouter, RouterStatusPath } from "./router"
import { waitFor } from "./testing/wait"
import { parseAddress, readAddressList, readUpstreams, watchUpstreamFiles } from "./upstream-files"

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "upstream-files-"))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** Write as the Slurm replica script does: a tmp file, then a rename over the address file. */
async function writeAtomically(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text)
  await rename(`${path}.tmp`, path)
}

/** A logger that keeps its lines, to see what the watch said. */
function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = []
  return {
    lines,
    info: (m) => lines.push(m),
    warn: (m) => lines.push(`warn: ${m}`),
    error: (m) => lines.push(`error: ${m}`),
  }
}

describe("parseAddress", () => {
  const cases: Record<string, [text: string, expected: string | undefined]> = {
    "host:port as the replica script writes it": ["10.0.0.5:41234\n", "http://10.0.0.5:41234"],
    "a host name, with whitespace around": ["  node-07.cluster:8000 \t\n", "http://node-07.cluster:8000"],
    "an http URL, kept": ["http://10.0.0.5:8000", "http://10.0.0.5:8000"],
    "an https URL with a path, kept": [
      "https://gpu.example.com:8443/v1base\n",
      "https://gpu.example.com:8443/v1base",
    ],
    "a bracketed IPv6 host": ["[fd00::5]:8000", "http://[fd00::5]:8000"],
    "a bare IPv6 host (the port is after the last colon)": ["fd00::5:8000", "http://[fd00::5]:8000"],
    "an empty file": ["", undefined],
    "only whitespace": [" \n\n", undefined],
    "no port": ["10.0.0.5", undefined],
    "port 0": ["10.0.0.5:0", undefined],
    "an IPv4 address out of range": ["999.0.0.1:8000", undefined],
    "a port out of range": ["10.0.0.5:70000", undefined],
    "a port that is not a number": ["10.0.0.5:http", undefined],
    "two addresses": ["10.0.0.5:1\n10.0.0.6:2", undefined],
    "a path after host:port": ["10.0.0.5:1/x", undefined],
    "user info": ["me@10.0.0.5:1", undefined],
    "another scheme": ["ftp://10.0.0.5:21", undefined],
    "a URL without a host": ["http://:8000", undefined],
    "a bracketed host that is not IPv6": ["[node]:8000", undefined],
  }
  for (const [name, [text, expected]] of Object.entries(cases))
    it(`${expected ? "takes" : "refuses"} ${name}`, () => {
      expect(parseAddress(text)).toBe(expected)
    })
})

describe("readUpstreams", () => {
  it("keeps the sources' order, skips what holds no address, and drops repeats", async () => {
    const file = (name: string) => join(dir, name)
    await writeAtomically(file("a.addr"), "10.0.0.1:8000\n")
    await writeAtomically(file("b.addr"), "http://10.0.0.2:8000")
    await writeAtomically(file("same-as-a.addr"), "10.0.0.1:8000")
    await writeFile(file("empty.addr"), "")
    await writeFile(file("junk.addr"), "not an address")
    await writeFile(file("huge.addr"), `10.0.0.9:8000${" ".repeat(4096)}`)
    await mkdir(file("a-directory.addr"), { recursive: true })
    expect(
      await readUpstreams([
        { file: file("b.addr") },
        { url: "http://static:1" },
        { file: file("missing.addr") },
        { file: file("empty.addr") },
        { file: file("junk.addr") },
        { file: file("huge.addr") },
        { file: file("a-directory.addr") },
        { file: file("a.addr") },
        { file: file("same-as-a.addr") },
      ]),
    ).toEqual(["http://10.0.0.2:8000", "http://static:1", "http://10.0.0.1:8000"])
  })
})

describe("a router over an address file", () => {
  /** A replica that answers every request with its own name. */
  async function named(name: string): Promise<{ address: string; close(): void }> {
    const server: Server = createServer((_req, res) => res.end(name))
    server.listen(0, "127.0.0.1")
    await once(server, "listening")
    return {
      address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => {
        server.closeAllConnections()
        server.close()
      },
    }
  }

  it("follows the file as the replica moves, and has no upstream while it is gone", async () => {
    const [a, b] = await Promise.all([named("A"), named("B")])
    const file = join(dir, "replica_0.addr")
    await writeAtomically(file, `${a.address}\n`)
    const router = createRouter()
    const log = recordingLogger()
    // A long period: the test moves the router on with reload(), never with the timer.
    const watch = watchUpstreamFiles(router, [{ file }], { everyMs: 3_600_000, log })
    const base = `http://127.0.0.1:${await router.listen(0)}`
    const answer = async () => {
      const res = await fetch(`${base}/v1/models`)
      return [res.status, await res.text()]
    }
    const status = async () => (await fetch(`${base}${RouterStatusPath}`)).json()
    try {
      await watch.reload()
      expect(await answer()).toEqual([200, "A"])
      expect(await status()).toMatchObject({ upstreams: [`http://${a.address}`], ready: true })

      // Slurm requeues the replica elsewhere; its new address replaces the file.
      await writeAtomically(file, `${b.address}\n`)
      await watch.reload()
      for (let i = 0; i < 3; i++) expect(await answer()).toEqual([200, "B"])
      expect(await status()).toMatchObject({ upstreams: [`http://${b.address}`], ready: true })

      // A reload that finds nothing new changes nothing and says nothing.
      await watch.reload()
      expect(log.lines).toEqual([`upstreams now http://${a.address}`, `upstreams now http://${b.address}`])

      await rm(file)
      await watch.reload()
      const [code, body] = await answer()
      expect(code).toBe(503)
      expect(JSON.parse(String(body)).error.code).toBe("router.no_upstream")
      expect(await status()).toEqual({ upstreams: [], ready: false, coolingDown: [] })
      expect(log.lines.at(-1)).toBe("upstreams now none")
    } finally {
      watch.stop()
      await router.close()
      a.close()
      b.close()
    }
  })

  it("re-reads the files on its timer", async () => {
    const file = join(dir, "timed.addr")
    const router = createRouter()
    const watch = watchUpstreamFiles(router, [{ url: "http://static:1" }, { file }], {
      everyMs: 100,
      log: recordingLogger(),
    })
    try {
      await watch.reload()
      expect(router.upstreams()).toEqual(["http://static:1"])
      await writeAtomically(file, "10.0.0.7:8000")
      await waitFor("the timer to read the new file", () => router.upstreams().length === 2)
      expect(router.upstreams()).toEqual(["http://static:1", "http://10.0.0.7:8000"])
    } finally {
      watch.stop()
    }
  })
})

describe("a list file (the replicas the control plane says to route to)", () => {
  it("reads one address per line, skips blank and unparsable lines, and follows the file as it changes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "swarmplane-list-"))
    const list = join(dir, "swarm.routing")
    try {
      expect(await readAddressList(list)).toEqual([])
      await writeFile(list, "10.0.0.5:8000\n\nnot an address\nhttp://10.0.0.6:8001\n")
      expect(await readAddressList(list)).toEqual(["http://10.0.0.5:8000", "http://10.0.0.6:8001"])
      const router = createRouter()
      const logs: string[] = []
      const log = { info: (m: string) => logs.push(m), error: () => {}, warn: () => {} } as unknown as Logger
      const watch = watchUpstreamFiles(router, [{ list }], { everyMs: 20, log })
      await watch.reload()
      expect(router.upstreams()).toEqual(["http://10.0.0.5:8000", "http://10.0.0.6:8001"])
      // An update: one leaves, one joins (written as the control plane does: a new file, renamed).
      await writeFile(`${list}.tmp`, "10.0.0.6:8001\n10.0.0.7:8002\n")
      await rename(`${list}.tmp`, list)
      await waitFor("the list to be read again", () => router.upstreams().includes("http://10.0.0.7:8002"))
      expect(router.upstreams()).toEqual(["http://10.0.0.6:8001", "http://10.0.0.7:8002"])
      watch.stop()
      await router.close()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
