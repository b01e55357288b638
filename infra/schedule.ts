/**
 * The schedule consumer: `functions/schedule.handler` on batches of up to 10 schedule requests, with
 * partial batch responses (a failed request comes back alone; the batch's others are done). A batch
 * runs one pass per backend it names.
 */
import { functionDefaults } from "./functions"
import { consumerTimeoutS, queue } from "./queue"

queue.subscribe(
  {
    ...functionDefaults,
    handler: "functions/schedule.handler",
    timeout: `${consumerTimeoutS} seconds`,
    memory: "512 MB",
  },
  { batch: { size: 10, partialResponses: true } },
)
