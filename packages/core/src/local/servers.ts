/**
 * The embedded AWS stand-ins of the local control plane: dynalite (DynamoDB API, kept on disk in
 * LevelDB so a restart keeps state) and fauxqs (SQS API, in memory: lost schedule requests are
 * recovered by the reconcile tick, which reads the active index).
 */

import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { SQSClient } from "@aws-sdk/client-sqs"

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

export function dynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ endpoint, region: "us-east-1", credentials, maxAttempts: 3 })
}

export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: "us-east-1", credentials, maxAttempts: 3 })
}
