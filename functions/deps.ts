/**
 * The deployed composition root: the one place that reads the environment, SST's linked resources
 * and secrets. Built once per Lambda container (cold start) and reused by every invocation. Only the
 * clients every invocation uses are loaded at import; the SSM client loads when a secret is first read.
 *
 *   Resource.State.name, Resource.ScheduleQueue.url, Resource.ApiPepper.value   (SST links)
 *   SWARMPLANE_SECRETS_PREFIX   SSM path of backend secrets (default /swarmplane/<stage>/secrets)
 *   SWARMPLANE_OPERATOR_PROJECT project whose admin keys may create projects (default `default`)
 *   SWARMPLANE_LOG_LEVEL (or Lambda's AWS_LAMBDA_LOG_LEVEL)  debug, info (default), warn, error, silent
 *   SWARMPLANE_DYNAMODB_ENDPOINT, SWARMPLANE_SQS_ENDPOINT, SWARMPLANE_SSM_ENDPOINT  overrides (tests)
 */

import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { SQSClient } from "@aws-sdk/client-sqs"
import type { SSMClient } from "@aws-sdk/client-ssm"
import { SqsQueue } from "@swarmplane/core/queue/sqs"
import { createRuntime, type Runtime } from "@swarmplane/core/runtime"
import { SsmSecrets } from "@swarmplane/core/secrets/ssm"
import { DynamoStore } from "@swarmplane/core/store/dynamo"
import { jsonLogger, parseLogLevel } from "@swarmplane/core/util/logger"
import { Resource } from "sst"

let cached: Runtime | undefined

export function runtime(env: NodeJS.ProcessEnv = process.env): Runtime {
  if (cached) return cached
  const endpoint = (name: string) => (env[name] ? { endpoint: env[name] } : {})
  const stage = env.SWARMPLANE_STAGE ?? "dev"
  const dynamo = new DynamoDBClient({ ...endpoint("SWARMPLANE_DYNAMODB_ENDPOINT") })
  const sqs = new SQSClient({ ...endpoint("SWARMPLANE_SQS_ENDPOINT") })
  // Loaded when a secret is first read (a backend config's sshKeySecret or tokenSecret), not at every cold start.
  const ssm = async (): Promise<SSMClient> => {
    const { SSMClient } = await import("@aws-sdk/client-ssm")
    return new SSMClient({ ...endpoint("SWARMPLANE_SSM_ENDPOINT") })
  }
  cached = createRuntime({
    store: DynamoStore({ client: dynamo, tableName: Resource.State.name }),
    queue: SqsQueue({ client: sqs, queueUrl: Resource.ScheduleQueue.url }),
    logger: jsonLogger({
      service: "swarmplane",
      // Ours, else the function's own log-level setting (Lambda's advanced logging controls).
      level: parseLogLevel(env.SWARMPLANE_LOG_LEVEL) ?? parseLogLevel(env.AWS_LAMBDA_LOG_LEVEL),
    }),
    pepper: Resource.ApiPepper.value,
    secrets: SsmSecrets({
      client: ssm,
      prefix: env.SWARMPLANE_SECRETS_PREFIX ?? `/swarmplane/${stage}/secrets`,
    }),
    ...(env.SWARMPLANE_OPERATOR_PROJECT ? { operatorProject: env.SWARMPLANE_OPERATOR_PROJECT } : {}),
  })
  return cached
}

/** Forget the cached runtime (tests that change the environment between cases). */
export function resetRuntime(): void {
  cached = undefined
}
