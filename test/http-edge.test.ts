/**
 * The API's edge over a real socket (the local control plane's node server): what a client that sends
 * too much sees.
 */
import { request } from "node:http"
import { afterAll, beforeAll, expect, test } from "vitest"
import { type Plane, startPlane } from "./support/plane"

let p: Plane
beforeAll(async () => {
  p = await startPlane()
}, 60_000)
afterAll(() => p?.stop())

test("a body past the limit is answered 413 at once and the connection closes, instead of kept and then dropped", async () => {
  const url = new URL(p.plane.url)
  const body = Buffer.alloc(4 * 1024 * 1024, "a")
  const answer = await new Promise<{ status?: number; connection?: string; code?: string }>(
    (resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: "/v1/jobs",
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": body.length,
            authorization: `Bearer ${p.plane.adminKey}`,
          },
        },
        (res) => {
          let text = ""
          res.on("data", (chunk) => {
            text += chunk
          })
          res.on("end", () =>
            resolve({
              status: res.statusCode,
              connection: res.headers.connection,
              code: JSON.parse(text).error?.code,
            }),
          )
        },
      )
      req.on("error", reject)
      req.write(body.subarray(0, 2 * 1024 * 1024))
      req.end(body.subarray(2 * 1024 * 1024))
    },
  )
  expect(answer).toEqual({ status: 413, connection: "close", code: "request.too_large" })
  // The plane goes on answering.
  expect((await p.call("GET", "/v1/me")).status).toBe(200)
})
