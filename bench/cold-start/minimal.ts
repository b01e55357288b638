/**
 * The smallest Lambda handler on swarmplane's stack, the cold-start bench's floor: Hono with
 * zod-openapi and zod 4, the DynamoDB and SQS clients constructed, one `/health` route, wrapped for
 * Lambda by `hono/aws-lambda`. The API handler is measured against this, built the same way.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { SQSClient } from "@aws-sdk/client-sqs"
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi"
import { handle } from "hono/aws-lambda"

const dynamo = new DynamoDBClient({})
const sqs = new SQSClient({})

const Health = z.object({ status: z.literal("ok"), time: z.string() })

const app = new OpenAPIHono()
app.openapi(
  createRoute({
    method: "get",
    path: "/health",
    responses: { 200: { description: "up", content: { "application/json": { schema: Health } } } },
  }),
  (c) => c.json({ status: "ok" as const, time: new Date().toISOString() }, 200),
)

/** The clients are held so a bundler cannot drop them. */
export const clients = { dynamo, sqs }
export const handler = handle(app)
