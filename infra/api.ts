/**
 * The HTTPS API: one Lambda running the Hono app (`functions/api.handler`, built with
 * `hono/aws-lambda`'s `handle()`) behind a Lambda Function URL. It also serves the dashboard,
 * `/openapi.json` and `/docs`.
 *
 * Why a Function URL and not `sst.aws.ApiGatewayV2`: Hono does all routing, auth and CORS
 * itself, so a gateway would only add a second router, a per-request charge and a 30-second
 * integration limit. A Function URL sends payload format 2.0, which `handle()` understands,
 * costs nothing beyond the Lambda invocation, and waits up to the function's own timeout. Put an
 * `sst.aws.Router` in front (`url.router`) when a custom domain is needed.
 *
 * 30 s timeout: an API call is a few store calls; the longest, a cancel of a large job, kills in pages
 * and leaves the rest to the reconcile pass. 512 MB: Lambda's CPU share grows with memory, and the
 * cold start measured in `npm run bench -- cold-start` is CPU-bound.
 *
 * What it uses (`runtime()` in `functions/deps.ts`): the table; the pepper (key and worker credential
 * hashes, sealed idempotent responses); the schedule queue (a write enqueues a schedule request);
 * backend secrets and EKS clusters (logs, status and cancels reach the backends' systems).
 */
import { functionArgs } from "./functions"
import { queue } from "./queue"
import { pepper } from "./secrets"
import { table } from "./storage"

export const api = new sst.aws.Function("Api", {
  ...functionArgs({ link: [table, queue, pepper], secrets: true, clusters: true }),
  handler: "functions/api.handler",
  // CORS, if needed at all (the dashboard is same-origin), is the Hono app's job; URL-level
  // CORS on top would send its headers twice.
  url: { cors: false },
  timeout: "30 seconds",
  memory: "512 MB",
})
