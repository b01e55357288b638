/**
 * `s3://bucket/key` inputs: one GetObject per read. The region comes from `AWS_REGION` (else
 * `us-east-1`); `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, points the client at another
 * S3-compatible server (MinIO, a test fake), addressed path-style (`GET /bucket/key`). Credentials
 * are `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` of the given environment when set, else the SDK's
 * default chain (profile, web identity, instance role). The SDK is imported on first use, so local inputs never load it.
 */
import { createWriteStream } from "node:fs"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { UsageError } from "../cli"

export interface S3Location {
  bucket: string
  key: string
}

/** `s3://bucket/key` → its parts; undefined for anything that is not an s3:// URL. */
export function parseS3Url(location: string): S3Location | undefined {
  const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(location)
  if (!match?.[1] || !match[2]) return undefined
  return { bucket: match[1], key: match[2] }
}

/** The object's body as a stream; a missing bucket or key, or a refusal, is a `UsageError`. */
export async function s3Stream(where: S3Location, env: NodeJS.ProcessEnv): Promise<Readable> {
  const { GetObjectCommand, S3Client } = await import("@aws-sdk/client-s3")
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined
  const accessKeyId = env.AWS_ACCESS_KEY_ID
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY
  const sessionToken = env.AWS_SESSION_TOKEN || undefined
  const client = new S3Client({
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    ...(accessKeyId && secretAccessKey
      ? { credentials: { accessKeyId, secretAccessKey, sessionToken } }
      : {}),
  })
  try {
    const out = await client.send(new GetObjectCommand({ Bucket: where.bucket, Key: where.key }))
    const body = out.Body
    if (!(body instanceof Readable)) throw new Error("GetObject returned no readable body")
    // The client's sockets close with the body; destroy the client once it has been read.
    body.once("close", () => client.destroy())
    return body
  } catch (error) {
    client.destroy()
    const name = error instanceof Error ? error.name : ""
    const url = `s3://${where.bucket}/${where.key}`
    if (name === "NoSuchKey" || name === "NotFound")
      throw new UsageError(`--input: ${url} does not exist (NoSuchKey)`)
    if (name === "NoSuchBucket") throw new UsageError(`--input: bucket ${where.bucket} does not exist`)
    if (name === "AccessDenied" || name === "Forbidden")
      throw new UsageError(`--input: access to ${url} is denied; check the credentials and the bucket policy`)
    throw new Error(`reading ${url}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/** Download the object to `file` (Parquet needs random access, so it is read from a local copy). */
export async function s3Download(where: S3Location, file: string, env: NodeJS.ProcessEnv): Promise<void> {
  await pipeline(await s3Stream(where, env), createWriteStream(file))
}
