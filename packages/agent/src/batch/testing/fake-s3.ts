/**
 * A fake S3 for tests, over node:http, following the S3 REST contract (path-style) for three calls:
 * - GetObject `GET /<bucket>/<key>`: 200 with the bytes (and Content-Length, ETag, Last-Modified);
 *   a missing key 404 `NoSuchKey`.
 * - PutObject `PUT /<bucket>/<key>`: stores the body whole, 200 with its ETag (the quoted MD5). A
 *   `Content-MD5` or `x-amz-checksum-crc32` that does not match the body is 400 `BadDigest`, an
 *   `x-amz-content-sha256` that does not is 400 `XAmzContentSHA256Mismatch`; an `aws-chunked` body
 *   (what the SDK sends for a stream of unknown length) is not implemented (501).
 * - ListObjectsV2 `GET /<bucket>?list-type=2&prefix=&continuation-token=&start-after=&max-keys=`:
 *   an XML `ListBucketResult` with the keys in UTF-8 binary order, at most `max-keys` (default and
 *   cap 1000, or the `maxKeys` option: a small cap makes tests page for real), `IsTruncated` and
 *   an opaque `NextContinuationToken` when more remain. `delimiter` and `encoding-type` are not
 *   implemented (501 `NotImplemented`), so a caller that starts using them fails loudly.
 * A bucket exists when it is in `buckets` or holds an object; any call on another is 404
 * `NoSuchBucket`. A PutObject into a bucket of `readOnly` is 403 `AccessDenied` (a role that may
 * read and list but not write). Errors are S3's XML `Error` documents; another method is 405 `MethodNotAllowed`.
 * Signatures are not checked.
 */
import { createHash, randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { crc32 } from "node:zlib"

export interface FakeS3 {
  /** The endpoint, for `AWS_ENDPOINT_URL_S3`. */
  url: string
  /** `bucket/key` → bytes; change it freely while the server runs. */
  objects: Map<string, Uint8Array>
  /** Buckets that exist even with no object in them; add to it freely. */
  buckets: Set<string>
  /** Buckets that refuse PutObject with 403 `AccessDenied`; add to it freely. */
  readOnly: Set<string>
  /** `METHOD /path` of every request, in order (the path decoded, without the query). */
  log: string[]
  /** The environment that points the AWS SDK (and so the runner) at this server. */
  env(): Record<string, string>
  close(): Promise<void>
}

export interface FakeS3Options {
  objects?: Map<string, Uint8Array>
  buckets?: Iterable<string>
  /** The most keys one ListObjectsV2 page returns, whatever `max-keys` asks (S3's own cap: 1000). */
  maxKeys?: number
}

const S3MaxKeys = 1000

const xml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

function xmlError(code: string, message: string, resource: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xml(message)}</Message><Resource>${xml(resource)}</Resource><RequestId>${randomBytes(8).toString("hex")}</RequestId></Error>`
}

const etagOf = (bytes: Uint8Array) => `"${createHash("md5").update(bytes).digest("hex")}"`

/** S3 orders keys by their UTF-8 bytes, which is not JavaScript's UTF-16 order past U+FFFF. */
const binaryOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))

class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export async function startFakeS3({
  objects = new Map<string, Uint8Array>(),
  buckets: initialBuckets = [],
  maxKeys: cap = S3MaxKeys,
}: FakeS3Options = {}): Promise<FakeS3> {
  const log: string[] = []
  const buckets = new Set(initialBuckets)
  const readOnly = new Set<string>()
  const modified = new Map<string, Date>()
  const bucketExists = (bucket: string) =>
    buckets.has(bucket) || [...objects.keys()].some((k) => k.startsWith(`${bucket}/`))

  function getObject(bucket: string, key: string, res: ServerResponse) {
    const object = objects.get(`${bucket}/${key}`)
    if (!object) throw new S3Error(404, "NoSuchKey", "The specified key does not exist.")
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": object.length,
      etag: etagOf(object),
      "last-modified": (modified.get(`${bucket}/${key}`) ?? new Date(0)).toUTCString(),
    })
    res.end(Buffer.from(object))
  }

  function putObject(bucket: string, key: string, req: IncomingMessage, body: Buffer, res: ServerResponse) {
    if (req.headers["content-encoding"]?.includes("aws-chunked"))
      throw new S3Error(501, "NotImplemented", "The fake S3 does not decode aws-chunked bodies.")
    const sha256 = req.headers["x-amz-content-sha256"]
    if (typeof sha256 === "string" && /^[0-9a-f]{64}$/.test(sha256))
      if (sha256 !== createHash("sha256").update(body).digest("hex"))
        throw new S3Error(
          400,
          "XAmzContentSHA256Mismatch",
          "The provided 'x-amz-content-sha256' header does not match what was computed.",
        )
    const md5 = req.headers["content-md5"]
    if (typeof md5 === "string" && md5 !== createHash("md5").update(body).digest("base64"))
      throw new S3Error(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
    const crc = req.headers["x-amz-checksum-crc32"]
    const expected = Buffer.alloc(4)
    expected.writeUInt32BE(crc32(body))
    if (typeof crc === "string" && crc !== expected.toString("base64"))
      throw new S3Error(400, "BadDigest", "The CRC32 you specified did not match the calculated checksum.")
    const bytes = new Uint8Array(body)
    objects.set(`${bucket}/${key}`, bytes)
    modified.set(`${bucket}/${key}`, new Date())
    res.writeHead(200, {
      etag: etagOf(bytes),
      ...(typeof crc === "string" ? { "x-amz-checksum-crc32": crc } : {}),
      "content-length": 0,
    })
    res.end()
  }

  function listObjectsV2(bucket: string, query: URLSearchParams, res: ServerResponse) {
    for (const unsupported of ["delimiter", "encoding-type"])
      if (query.has(unsupported))
        throw new S3Error(501, "NotImplemented", `The fake S3 does not implement ${unsupported}.`)
    const prefix = query.get("prefix") ?? ""
    const asked = query.get("max-keys")
    const maxKeys = asked === null ? S3MaxKeys : Number(asked)
    if (!Number.isInteger(maxKeys) || maxKeys < 0)
      throw new S3Error(400, "InvalidArgument", "Provided max-keys not an integer or within integer range")
    const token = query.get("continuation-token")
    if (token === "")
      throw new S3Error(400, "InvalidArgument", "The continuation token provided is incorrect")
    const startAfter = query.get("start-after") ?? ""
    // The token is opaque to clients; here it is the last key of the previous page.
    const after = token === null ? startAfter : Buffer.from(token, "base64url").toString()
    const keys = [...objects.keys()]
      .filter((k) => k.startsWith(`${bucket}/`))
      .map((k) => k.slice(bucket.length + 1))
      .filter((k) => k.startsWith(prefix) && binaryOrder(k, after) > 0)
      .sort(binaryOrder)
    const page = keys.slice(0, Math.min(maxKeys, cap))
    const truncated = page.length < keys.length
    const last = page.at(-1)
    const contents = page.map((key) => {
      const bytes = objects.get(`${bucket}/${key}`) as Uint8Array
      const at = modified.get(`${bucket}/${key}`) ?? new Date(0)
      return `<Contents><Key>${xml(key)}</Key><LastModified>${at.toISOString()}</LastModified><ETag>${xml(etagOf(bytes))}</ETag><Size>${bytes.length}</Size><StorageClass>STANDARD</StorageClass></Contents>`
    })
    const body = [
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`,
      `<Name>${xml(bucket)}</Name><Prefix>${xml(prefix)}</Prefix>`,
      token === null ? "" : `<ContinuationToken>${xml(token)}</ContinuationToken>`,
      query.has("start-after") ? `<StartAfter>${xml(startAfter)}</StartAfter>` : "",
      `<KeyCount>${page.length}</KeyCount><MaxKeys>${maxKeys}</MaxKeys><IsTruncated>${truncated}</IsTruncated>`,
      ...contents,
      truncated && last !== undefined
        ? `<NextContinuationToken>${Buffer.from(last).toString("base64url")}</NextContinuationToken>`
        : "",
      "</ListBucketResult>",
    ].join("")
    res.writeHead(200, { "content-type": "application/xml", "content-length": Buffer.byteLength(body) })
    res.end(body)
  }

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://s3")
    const path = decodeURIComponent(url.pathname)
    log.push(`${req.method} ${path}`)
    const [, bucket = "", ...rest] = path.split("/")
    const key = rest.join("/")
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    try {
      if (!bucketExists(bucket)) throw new S3Error(404, "NoSuchBucket", "The specified bucket does not exist")
      if (req.method === "GET" && key) return getObject(bucket, key, res)
      if (req.method === "PUT" && readOnly.has(bucket))
        throw new S3Error(403, "AccessDenied", "Access Denied")
      if (req.method === "PUT" && key) return putObject(bucket, key, req, Buffer.concat(chunks), res)
      if (req.method === "GET" && url.searchParams.get("list-type") === "2")
        return listObjectsV2(bucket, url.searchParams, res)
      if (req.method === "GET") throw new S3Error(501, "NotImplemented", "Only ListObjectsV2 lists a bucket.")
      throw new S3Error(405, "MethodNotAllowed", "The specified method is not allowed.")
    } catch (error) {
      const e = error instanceof S3Error ? error : new S3Error(500, "InternalError", String(error))
      const body = xmlError(e.code, e.message, path)
      res.writeHead(e.status, {
        "content-type": "application/xml",
        "content-length": Buffer.byteLength(body),
      })
      res.end(body)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    env: () => ({
      AWS_ENDPOINT_URL_S3: url,
      AWS_REGION: "eu-west-1",
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
    }),
    objects,
    buckets,
    readOnly,
    log,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
