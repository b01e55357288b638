/**
 * A fake S3 for tests: GetObject only, over node:http, following the S3 REST contract for it:
 * path-style `GET /<bucket>/<key>` answers 200 with the bytes (and Content-Length, ETag,
 * Last-Modified), a missing key 404 with an XML `NoSuchKey` error body, a missing bucket 404
 * `NoSuchBucket`; any other method 405 `MethodNotAllowed`. Signatures are not checked.
 */
import { createHash, randomBytes } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeS3 {
  /** The endpoint, for `AWS_ENDPOINT_URL_S3`. */
  url: string
  /** `bucket/key` → bytes; change it freely while the server runs. */
  objects: Map<string, Uint8Array>
  /** `METHOD /path` of every request, in order. */
  log: string[]
  close(): Promise<void>
}

function xmlError(code: string, message: string, resource: string): string {
  const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xml(message)}</Message><Resource>${xml(resource)}</Resource><RequestId>${randomBytes(8).toString("hex")}</RequestId></Error>`
}

export async function startFakeS3(objects = new Map<string, Uint8Array>()): Promise<FakeS3> {
  const log: string[] = []
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://s3").pathname)
    log.push(`${req.method} ${path}`)
    const [, bucket = "", ...rest] = path.split("/")
    const key = rest.join("/")
    const fail = (status: number, code: string, message: string) => {
      const body = xmlError(code, message, path)
      res.writeHead(status, { "content-type": "application/xml", "content-length": Buffer.byteLength(body) })
      res.end(body)
    }
    req.resume()
    if (req.method !== "GET") return fail(405, "MethodNotAllowed", "The specified method is not allowed.")
    const object = objects.get(`${bucket}/${key}`)
    if (!object) {
      const bucketExists = [...objects.keys()].some((k) => k.startsWith(`${bucket}/`))
      if (!bucketExists) return fail(404, "NoSuchBucket", "The specified bucket does not exist")
      return fail(404, "NoSuchKey", "The specified key does not exist.")
    }
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": object.length,
      etag: `"${createHash("md5").update(object).digest("hex")}"`,
      "last-modified": new Date(0).toUTCString(),
    })
    res.end(Buffer.from(object))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    objects,
    log,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
