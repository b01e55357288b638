/**
 * `--output s3://bucket/prefix`: the `OutputStore` on S3, a name `N` being the key `prefix/N`. A
 * PutObject is atomic (a reader gets the old object or the new one, never a part), which is what
 * the local folder gets from tmp + fsync + rename. `list` follows ListObjectsV2 continuation tokens
 * (a page holds at most 1,000 keys; a shard can have more parts); S3 lists are strongly consistent, so
 * a shard requeued on another machine sees every part written before. Client setup: s3.ts.
 *
 * S3 errors become one line naming the output, the S3 error code, the call and the object; those a
 * user fixes (a missing bucket, a refusal, bad credentials, the wrong region) are `UsageError`s.
 */
import type { S3Client } from "@aws-sdk/client-s3"
import { UsageError } from "../cli"
import { binaryOrder, type OutputStore } from "./output-port"
import { s3Client, s3ErrorCode } from "./s3"

export interface S3OutputOptions {
  bucket: string
  /** Without a trailing `/`; empty for the bucket's top level. */
  prefix: string
  /** `--output` as given, for messages. */
  location: string
  env: NodeJS.ProcessEnv
}

const Fixes: Record<string, string> = {
  NoSuchBucket: "the bucket does not exist; create it or fix the URL",
  AccessDenied: "check the credentials and the bucket policy (s3:ListBucket, s3:GetObject, s3:PutObject)",
  AllAccessDisabled: "access to the bucket is disabled",
  InvalidAccessKeyId: "check AWS_ACCESS_KEY_ID or the role",
  SignatureDoesNotMatch: "check AWS_SECRET_ACCESS_KEY",
  ExpiredToken: "the credentials expired; renew them",
  InvalidToken: "check AWS_SESSION_TOKEN",
  PermanentRedirect: "the bucket is in another region; set AWS_REGION to it",
  AuthorizationHeaderMalformed: "the bucket is in another region; set AWS_REGION to it",
}

export function S3Output({ bucket, prefix, location, env }: S3OutputOptions): OutputStore {
  let client: Promise<S3Client> | undefined
  const sdk = () => import("@aws-sdk/client-s3")
  const key = (name: string) => (prefix ? `${prefix}/${name}` : name)
  const where = (name: string) => `s3://${bucket}/${key(name)}`

  /** Run one S3 call; its failure is rethrown as one line (see the module header). */
  async function call<T>(action: string, name: string, run: (s3: S3Client) => Promise<T>): Promise<T> {
    client ??= s3Client(env)
    try {
      return await run(await client)
    } catch (error) {
      const code = s3ErrorCode(error)
      const what = `--output ${location}: ${code} on ${action} of ${where(name)}`
      const fix = Fixes[code]
      if (fix) throw new UsageError(`${what}: ${fix}`, { cause: error })
      const message = (error instanceof Error ? error.message : String(error)).split("\n")[0]
      throw new Error(message && message !== code ? `${what}: ${message}` : what, { cause: error })
    }
  }

  return {
    location,
    where,
    list: (dir) => {
      const listed = key(dir ? `${dir}/` : "")
      return call("ListObjectsV2", dir ? `${dir}/` : "", async (s3) => {
        const { ListObjectsV2Command } = await sdk()
        const names: string[] = []
        let token: string | undefined
        do {
          const page = await s3.send(
            new ListObjectsV2Command({ Bucket: bucket, Prefix: listed, ContinuationToken: token }),
          )
          for (const object of page.Contents ?? []) {
            const name = object.Key?.slice(listed.length)
            // Keys further down (`dir/sub/x`) are not in `dir`, as a folder's subfolders are not files.
            if (name && object.Key?.startsWith(listed) && !name.includes("/")) names.push(name)
          }
          if (page.IsTruncated && !page.NextContinuationToken)
            throw new Error("a truncated page without a NextContinuationToken")
          token = page.IsTruncated ? page.NextContinuationToken : undefined
        } while (token)
        return names.sort(binaryOrder)
      })
    },
    read: (name) =>
      call("GetObject", name, async (s3) => {
        const { GetObjectCommand } = await sdk()
        try {
          const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key(name) }))
          return (await out.Body?.transformToString("utf8")) ?? ""
        } catch (error) {
          if (s3ErrorCode(error) === "NoSuchKey") return undefined
          throw error
        }
      }),
    write: (name, text) =>
      call("PutObject", name, async (s3) => {
        const { PutObjectCommand } = await sdk()
        const type = name.endsWith(".jsonl") ? "application/x-ndjson" : "application/json"
        // An explicit length: without it the SDK takes an empty body for a stream of unknown length.
        const length = Buffer.byteLength(text)
        await s3.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key(name),
            Body: text,
            ContentLength: length,
            ContentType: type,
          }),
        )
      }),
    close: () => {
      const pending = client
      client = undefined
      pending?.then((c) => c.destroy()).catch(() => {})
    },
  }
}
