/**
 * S3 access shared by inputs and outputs: `s3://` URLs, the client, and error codes. Inputs
 * (`s3://bucket/key`) are one GetObject per read; outputs (`s3://bucket/prefix`) are in
 * s3-output.ts. The region comes from `AWS_REGION` (else
 * `us-east-1`); `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, points the client at another
 * S3-compatible server (MinIO, a test fake), addressed path-style (`GET /bucket/key`). Credentials
 * are `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` of the given environment when set, else the SDK's
 * default chain (profile, web identity, instance role). The SDK is imported on first use, so local
 * inputs and outputs never load it.
 */
import { createWriteStream } from "node:fs"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import type { S3Client } from "@aws-sdk/client-s3"
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

/**
 * `s3://bucket` or `s3://bucket/prefix` (trailing slashes dropped) → bucket and prefix; undefined
 * for anything else.
 */
export function parseS3Prefix(location: string): { bucket: string; prefix: string } | undefined {
  const match = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(location)
  if (!match?.[1]) return undefined
  return { bucket: match[1], prefix: (match[2] ?? "").replace(/\/+$/, "") }
}

/** A client configured from `env` as the module header says; `destroy()` it when done. */
export async function s3Client(env: NodeJS.ProcessEnv): Promise<S3Client> {
  const { S3Client } = await import("@aws-sdk/client-s3")
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined
  const accessKeyId = env.AWS_ACCESS_KEY_ID
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY
  const sessionToken = env.AWS_SESSION_TOKEN || undefined
  return new S3Client({
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    ...(accessKeyId && secretAccessKey
      ? { credentials: { accessKeyId, secretAccessKey, sessionToken } }
      : {}),
  })
}

/**
 * The S3 error code of an SDK error (`NoSuchBucket`, `AccessDenied`, ...), else the Node error code
 * (`ECONNREFUSED`) or the error's name.
 */
export function s3ErrorCode(error: unknown): string {
  if (!(error instanceof Error)) return "Error"
  const e = error as Error & { Code?: unknown; code?: unknown }
  if (typeof e.Code === "string" && e.Code) return e.Code
  if ("$fault" in e && e.name) return e.name // an answer of S3's that the SDK models (NoSuchBucket, NoSuchKey)
  if (typeof e.code === "string" && e.code) return e.code
  return e.name || "Error"
}

/** The object's body as a stream; a missing bucket or key, or a refusal, is a `UsageError`. */
export async function s3Stream(where: S3Location, env: NodeJS.ProcessEnv): Promise<Readable> {
  const { GetObjectCommand } = await import("@aws-sdk/client-s3")
  const client = await s3Client(env)
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
