/**
 * The embedded AWS stand-ins the local control plane runs on `SWARMPLANE_LOCAL_STORE=dynalite` (its
 * default is the journal store, in process), and tests and benchmarks use: dynalite (DynamoDB API,
 * kept on disk in LevelDB so a restart keeps state) and fauxqs (SQS API, in memory: lost schedule
 * requests are recovered by the reconcile tick, which reads the active index).
 *
 * dynalite leaves a LevelDB iterator open whenever a query stops before the end of its range (at its
 * `Limit`, or at a 1 MB page): the iterator stays attached to the database and holds a LevelDB
 * snapshot, so the memtables and table files it saw are never freed. Every paged read while writes
 * went on kept a few more megabytes: the local plane's RSS went from 265 MB to 2.7 GB over a few load
 * runs and stayed. `closeIdleIterators` closes the iterators nobody has read for a while.
 */

import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb"
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs"

// Letters and digits only: DynamoDB Local refuses other characters in an access key id.
const credentials = { accessKeyId: "local", secretAccessKey: "local" }

export interface Embedded {
  endpoint: string
  stop(): Promise<void>
}

interface DynaliteServer {
  listen(port: number, host: string, cb: (err?: Error) => void): void
  close(cb: (err?: Error) => void): void
  address(): AddressInfo | string | null
  on(event: "error", cb: (err: Error) => void): void
}

/** A LevelDB iterator, as abstract-level makes them. */
interface LevelIterator {
  next(...args: unknown[]): Promise<unknown>
  nextv?(...args: unknown[]): Promise<unknown>
  close(): Promise<void>
}

/** An iterator nobody read for this long was left by a query that stopped early: it is closed. */
export const IteratorIdleMs = 5_000

/** Open iterators, with when each was last read. */
const openIterators = new Map<LevelIterator, number>()
let sweeper: NodeJS.Timeout | undefined
let running = 0
const watched = Symbol.for("swarmplane.watchedIterators")

/** Close the iterators idle for longer than `idleMs`; returns how many. */
export function closeIdleIterators(idleMs = IteratorIdleMs, now = Date.now()): number {
  let closed = 0
  for (const [iterator, lastRead] of openIterators)
    if (now - lastRead > idleMs) {
      openIterators.delete(iterator)
      void iterator.close().catch(() => undefined)
      closed++
    }
  return closed
}

/** Iterators open now (for tests). */
export const openIteratorCount = () => openIterators.size

/**
 * Keep track of every iterator dynalite's LevelDB opens (both its on-disk and in-memory databases
 * derive from abstract-level's `AbstractLevel`): when it was last read, and its close.
 */
function watchIterators(): void {
  const fromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"))
  const { AbstractLevel } = fromDynalite("abstract-level") as {
    AbstractLevel: { prototype: Record<string | symbol, unknown> }
  }
  const proto = AbstractLevel.prototype
  if (proto[watched]) return
  proto[watched] = true
  for (const name of ["iterator", "keys", "values"]) {
    const original = proto[name] as (...args: unknown[]) => LevelIterator
    proto[name] = function (this: unknown, ...args: unknown[]) {
      const iterator = original.apply(this, args)
      const read = (method: "next" | "nextv") => {
        const call = iterator[method]
        if (!call) return
        iterator[method] = (...a: unknown[]) => {
          openIterators.set(iterator, Date.now())
          return call.apply(iterator, a).finally(() => {
            if (openIterators.has(iterator)) openIterators.set(iterator, Date.now())
          })
        }
      }
      read("next")
      read("nextv")
      const close = iterator.close
      iterator.close = () => {
        openIterators.delete(iterator)
        return close.apply(iterator)
      }
      openIterators.set(iterator, Date.now())
      return iterator
    }
  }
}

export async function startDynalite(path: string | undefined): Promise<Embedded> {
  watchIterators()
  const dynalite = createRequire(import.meta.url)("dynalite") as (opts: object) => DynaliteServer
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...(path ? { path } : {}) })
  await new Promise<void>((resolve, reject) => {
    server.on("error", reject)
    server.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve()))
  })
  const { port } = server.address() as AddressInfo
  if (running++ === 0) {
    sweeper = setInterval(() => closeIdleIterators(), IteratorIdleMs / 2)
    sweeper.unref()
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) =>
        server.close(() => {
          if (--running === 0) clearInterval(sweeper)
          resolve()
        }),
      ),
  }
}

export async function startFauxqs(): Promise<Embedded> {
  const { startFauxqs: start } = await import("fauxqs")
  const server = await start({ port: 0, logger: false })
  return { endpoint: server.address, stop: () => server.stop() }
}

/** A DynamoDB client for a local server: static fake credentials, few retries so failures show quickly. */
export function dynamoClient(endpoint: string, config: DynamoDBClientConfig = {}): DynamoDBClient {
  return new DynamoDBClient({ endpoint, region: "us-east-1", credentials, maxAttempts: 3, ...config })
}

/**
 * An SQS client for fauxqs. The explicit `endpoint` matters: without it the SDK sends each call to the
 * host in the queue URL (`sqs.us-east-1.localhost`), which does not resolve.
 */
export function sqsClient(endpoint: string, config: SQSClientConfig = {}): SQSClient {
  return new SQSClient({ endpoint, region: "us-east-1", credentials, maxAttempts: 3, ...config })
}
