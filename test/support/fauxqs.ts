/**
 * Test support: fauxqs (an SQS emulator) in this process, and SQS clients pointed at it. fauxqs
 * listens on every interface and keeps everything in memory; `stop()` drops all queues.
 */
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs"
import { startFauxqs as startServer } from "fauxqs"

export interface Fauxqs {
  /** `http://127.0.0.1:<port>`; pass it to `sqsClient`. */
  endpoint: string
  stop(): Promise<void>
}

export async function startFauxqs(): Promise<Fauxqs> {
  const server = await startServer({ port: 0, logger: false })
  return { endpoint: server.address, stop: () => server.stop() }
}

/**
 * An SQS client for fauxqs. The explicit `endpoint` matters: without it the SDK sends each call to
 * the host in the queue URL (`sqs.us-east-1.localhost`), which does not resolve.
 */
export function sqsClient(endpoint: string, config: SQSClientConfig = {}): SQSClient {
  return new SQSClient({
    region: "us-east-1",
    endpoint,
    credentials: { accessKeyId: "fauxqs", secretAccessKey: "fauxqs" },
    ...config,
  })
}
