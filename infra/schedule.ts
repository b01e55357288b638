/**
 * The schedule consumer: `functions/schedule.handler` on batches of up to 10 schedule requests, with
 * partial batch responses (a failed request comes back alone; the batch's others are done). A batch
 * runs one pass per backend it names, side by side, so its timeout is one pass's lease and a margin
 * (`functions/timing.ts`).
 *
 * What it uses (`controlRuntime()` in `functions/deps.ts`): the table; backend secrets and EKS
 * clusters (its passes reach the backends' systems). It sends no schedule requests, so it is not
 * linked to the queue: SST gives a subscriber what it needs to receive and delete its own messages.
 */
import { functionArgs } from "./functions"
import { consumerTimeoutS, queue } from "./queue"
import { table } from "./storage"

export const consumer = queue.subscribe(
  {
    ...functionArgs({ link: [table], secrets: true, clusters: true }),
    handler: "functions/schedule.handler",
    timeout: `${consumerTimeoutS} seconds`,
    memory: "512 MB",
  },
  { batch: { size: 10, partialResponses: true } },
)
