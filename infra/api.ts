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
 * Every function in infra/ pins `runtime: "nodejs22.x"` rather than taking SST's default (24),
 * so an SST upgrade cannot move it, and so it stays the nearest Lambda runtime to the Node 20
 * the project is developed and tested on.
 */
import { bundleSettings } from "./bundle"
import { queue } from "./queue"
import { functionEnvironment, pepper, secretsPermissions } from "./secrets"
import { table } from "./storage"

export const api = new sst.aws.Function("Api", {
  handler: "functions/api.handler",
  runtime: "nodejs22.x",
  nodejs: bundleSettings,
  // CORS, if needed at all (the dashboard is same-origin), is the Hono app's job; URL-level
  // CORS on top would send its headers twice.
  url: { cors: false },
  link: [table, queue, pepper],
  timeout: "30 seconds",
  memory: "512 MB",
  environment: functionEnvironment,
  permissions: secretsPermissions,
})
