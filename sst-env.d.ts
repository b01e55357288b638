/**
 * Types for the linked resources that handlers read through `import { Resource } from "sst"`.
 *
 * Hand-written to match what `sst dev`/`sst deploy` generate from sst.config.ts (those commands
 * need AWS and the real Pulumi CLI, so the file is kept in the repo); a deploy may rewrite it
 * with the same content. Keep it in step with infra/*.ts: every `sst.aws.*`/`sst.Secret` that
 * can be linked appears here under its component name.
 */

import "sst"

declare module "sst" {
  export interface Resource {
    /** The HTTPS API function (infra/api.ts); `url` is its Function URL. */
    Api: {
      name: string
      type: "sst.aws.Function"
      url: string
    }
    /** HMAC pepper for API key hashes (infra/secrets.ts). */
    ApiPepper: {
      type: "sst.sst.Secret"
      value: string
    }
    /** Dead-letter queue of ScheduleQueue (infra/queue.ts). */
    ScheduleDlq: {
      type: "sst.aws.Queue"
      url: string
    }
    /** Schedule requests (infra/queue.ts). */
    ScheduleQueue: {
      type: "sst.aws.Queue"
      url: string
    }
    /** The single DynamoDB table (infra/storage.ts). */
    State: {
      name: string
      type: "sst.aws.Dynamo"
    }
  }
}

export {}
