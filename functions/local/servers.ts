/**
 * The embedded AWS stand-ins of the local control plane: dynalite (DynamoDB API, kept on disk in
 * LevelDB so a restart keeps state) and fauxqs (SQS API, in memory: lost schedule requests are
 * recovered by the reconcile tick, which reads the active index).
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

export async function startDynalite(path: string | undefined): Promise<Embedded> {
  const dynalite = createRequire(import.meta.url)("dynalite") as (opts: object) => DynaliteServer
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...(path ? { path } : {}) })
  await new Promise<void>((resolve, reject) => {
    server.on("error", reject)
    server.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve()))
  })
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
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
