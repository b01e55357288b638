/** Lambda entry of the HTTPS API (Function URL / API Gateway v2 events). */
import { createApp } from "@swarmplane/core/api/app"
import type { LambdaContext, LambdaEvent } from "hono/aws-lambda"
import { handle } from "hono/aws-lambda"
import { runtime } from "./deps"

let app: ReturnType<typeof handle> | undefined

export const handler = (event: LambdaEvent, context: LambdaContext) => {
  app ??= handle(createApp(runtime()))
  return app(event, context)
}
