/**
 * Test support: fauxqs (an SQS emulator) in this process, and SQS clients pointed at it. fauxqs
 * listens on every interface and keeps everything in memory; `stop()` drops all queues.
 */

export type { Embedded as Fauxqs } from "../../functions/local/servers"
export { sqsClient, startFauxqs } from "../../functions/local/servers"
