/**
 * Upstreams of the standalone router learned from address files that change while it runs. On Slurm
 * each replica writes its `host:port` to a file once healthy (atomically: a tmp file, then `mv`) and
 * the file is removed or rewritten when Slurm requeues it elsewhere; re-reading the files lets the
 * router follow without a restart, so its clients never notice. A file that is missing, empty or
 * unparsable contributes no upstream and never stops the router.
 */
import { open } from "node:fs/promises"
import { isIP } from "node:net"
import type { Logger } from "./logger"
import type { Router } from "./router"

/** Where one upstream comes from, in the order the flags were given. */
export type UpstreamSource = { readonly url: string } | { readonly file: string } | { readonly list: string }

/** A list file's largest size: far beyond the replicas of any swarm, one `host:port` per line. */
const MaxListBytes = 256 * 1024

/** Longer than any address; a bigger file is not an address file, and is not read whole each tick. */
const MaxAddressBytes = 1024

/**
 * One address file's text as an upstream base URL: `host:port` (a bare IPv6 host may go without
 * brackets, the port being the part after the last colon) becomes `http://host:port`; an
 * `http(s)://` URL is kept. Surrounding whitespace is ignored. Pure; `undefined` for anything else.
 */
export function parseAddress(text: string): string | undefined {
  const s = text.trim()
  if (/^https?:\/\//i.test(s)) {
    if (!URL.canParse(s)) return undefined
    const url = new URL(s)
    return url.hostname !== "" && url.username === "" && url.password === "" ? s : undefined
  }
  const m = /^(.+):(\d{1,5})$/.exec(s)
  const [host = "", digits = ""] = m ? [m[1], m[2]] : []
  const port = Number(digits)
  if (!m || port < 1 || port > 65535) return undefined
  const bracketed = /^\[([0-9A-Fa-f:.]+)\]$/.exec(host)?.[1]
  if (bracketed !== undefined) return isIP(bracketed) === 6 ? `http://${host}:${port}` : undefined
  if (isIP(host) === 6) return `http://[${host}]:${port}`
  const url = `http://${host}:${port}`
  // The router skips what URL cannot parse (999.0.0.1, say), so such a file must hold no address.
  return /^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$/.test(host) && URL.canParse(url) ? url : undefined
}

/** A file's address, or `undefined` when it is missing, unreadable, too big, empty or unparsable. */
export async function readAddressFile(path: string): Promise<string | undefined> {
  try {
    const handle = await open(path, "r")
    try {
      const buffer = Buffer.alloc(MaxAddressBytes + 1)
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0)
      return bytesRead > MaxAddressBytes ? undefined : parseAddress(buffer.toString("utf8", 0, bytesRead))
    } finally {
      await handle.close()
    }
  } catch {
    return undefined
  }
}

/**
 * A list file's addresses (one `host:port` or URL per line; a line that does not parse is skipped), or
 * none when it is missing, unreadable or too big. On Slurm the control plane writes it: the replicas
 * the router should send requests to, which an update or a scale changes while the router runs.
 */
export async function readAddressList(path: string): Promise<string[]> {
  try {
    const handle = await open(path, "r")
    try {
      const buffer = Buffer.alloc(MaxListBytes + 1)
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0)
      if (bytesRead > MaxListBytes) return []
      return buffer
        .toString("utf8", 0, bytesRead)
        .split("\n")
        .flatMap((line) => {
          const url = line.trim() ? parseAddress(line) : undefined
          return url ? [url] : []
        })
    } finally {
      await handle.close()
    }
  } catch {
    return []
  }
}

/**
 * Read every source once: a URL as given, a file as its current address, a list as its addresses. Returns the upstreams in
 * source order without repeats (two files naming one replica do not double its share). No timers.
 */
export async function readUpstreams(sources: readonly UpstreamSource[]): Promise<string[]> {
  const found = await Promise.all(
    sources.map((s) =>
      "url" in s ? [s.url] : "list" in s ? readAddressList(s.list) : readAddressFile(s.file),
    ),
  )
  return [...new Set(found.flat().filter((u) => u !== undefined))]
}

export interface UpstreamFileWatch {
  /** Re-read the sources now and apply a change; resolves once the router has the result. */
  reload(): Promise<void>
  /** Stop the timer. Idempotent; a read still in flight is not applied. */
  stop(): void
}

export interface WatchOptions {
  /** Time between re-reads. */
  everyMs: number
  log: Logger
}

/**
 * Keep `router`'s upstreams equal to what `sources` say: re-read every `everyMs` when there are
 * files (an unref'd timer, so it never keeps the process alive) and on `reload()`. A change calls
 * `setUpstreams` and logs one line, `upstreams now A, B` (under the logger name `router`). Reads run
 * one at a time: a tick while one is in flight is skipped (a slow file system does not pile reads
 * up), while `reload()` always reads again after it, so what it applies is never stale.
 */
export function watchUpstreamFiles(
  router: Pick<Router, "setUpstreams" | "upstreams">,
  sources: readonly UpstreamSource[],
  options: WatchOptions,
): UpstreamFileWatch {
  let stopped = false
  let inFlight = 0
  let chain: Promise<void> = Promise.resolve()
  const readAndApply = async () => {
    const upstreams = await readUpstreams(sources)
    if (stopped || upstreams.join(" ") === router.upstreams().join(" ")) return
    router.setUpstreams(upstreams)
    options.log.info(`upstreams now ${upstreams.length ? upstreams.join(", ") : "none"}`)
  }
  const reload = () => {
    inFlight++
    const run = chain.then(readAndApply).finally(() => inFlight--)
    chain = run.catch(() => {}) // One failed read must not stop the ones after it.
    return run
  }
  const tick = () => {
    if (inFlight > 0) return
    reload().catch((error: unknown) =>
      options.log.error(`reading upstream files failed: ${error instanceof Error ? error.message : error}`),
    )
  }
  // Only files change; with none, `reload()` alone (the first read) is enough.
  const timer = sources.some((s) => !("url" in s)) ? setInterval(tick, options.everyMs).unref() : undefined
  return {
    reload,
    stop: () => {
      stopped = true
      clearInterval(timer)
    },
  }
}
