/** Lambda entry of the schedule consumer: an SQS batch, answered with partial batch failures. */
import { handleScheduleBatch } from "@swarmplane/core/control/schedule"
import type { SQSBatchResponse, SQSEvent } from "aws-lambda"
import { controlRuntime } from "./deps"

export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  const { retry } = await handleScheduleBatch(
    controlRuntime(),
    event.Records.map((r) => ({
      id: r.messageId,
      body: r.body,
      receiveCount: Number(r.attributes.ApproximateReceiveCount ?? 1),
    })),
  )
  return { batchItemFailures: retry.map((itemIdentifier) => ({ itemIdentifier })) }
}
