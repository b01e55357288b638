/**
 * The fake S3 answers as S3 does, as far as the AWS SDK v3 can tell: its own client parses every
 * answer (PutObject's ETag, ListObjectsV2 pages, error codes) the way it parses real S3's.
 */
import { createHash } from "node:crypto"
import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  paginateListObjectsV2,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeS3, startFakeS3 } from "./fake-s3"

let s3: FakeS3
let client: S3Client
beforeAll(async () => {
  s3 = await startFakeS3({ buckets: ["out"], maxKeys: 4 })
  client = new S3Client({
    region: "eu-west-1",
    endpoint: s3.url,
    forcePathStyle: true,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  })
})
afterAll(async () => {
  client.destroy()
  await s3.close()
})

/** The SDK's error for `send`, with its S3 code and HTTP status. */
async function s3Failure(send: Promise<unknown>): Promise<{ name: string; status?: number }> {
  const error = await send.then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!(error instanceof S3ServiceException)) throw new Error(`expected an S3 error, got ${String(error)}`)
  return { name: error.name, status: error.$metadata.httpStatusCode }
}

describe("fake S3", () => {
  it("PutObject stores the body whole and answers its ETag; GetObject gives it back", async () => {
    const body = "línea 1\nline 2\n"
    const put = await client.send(new PutObjectCommand({ Bucket: "out", Key: "p/a b/ü.jsonl", Body: body }))
    expect(put.ETag).toBe(`"${createHash("md5").update(body).digest("hex")}"`)
    expect(put.$metadata.httpStatusCode).toBe(200)
    const got = await client.send(new GetObjectCommand({ Bucket: "out", Key: "p/a b/ü.jsonl" }))
    expect(await got.Body?.transformToString()).toBe(body)
    expect(got.ETag).toBe(put.ETag)
    expect(s3.log).toContain("PUT /out/p/a b/ü.jsonl")
  })

  it("lists a page of ListObjectsV2 with every field, and pages on with the continuation token", async () => {
    for (const name of ["c", "a", "b", "e", "d", "f"])
      await client.send(new PutObjectCommand({ Bucket: "out", Key: `list/${name}`, Body: name.repeat(3) }))
    await client.send(new PutObjectCommand({ Bucket: "out", Key: "listed-elsewhere", Body: "x" }))
    const first = await client.send(new ListObjectsV2Command({ Bucket: "out", Prefix: "list/", MaxKeys: 2 }))
    expect(first).toMatchObject({
      Name: "out",
      Prefix: "list/",
      KeyCount: 2,
      MaxKeys: 2,
      IsTruncated: true,
    })
    expect(first.Contents?.map((c) => c.Key)).toEqual(["list/a", "list/b"])
    const [a] = first.Contents ?? []
    expect(a).toMatchObject({
      Size: 3,
      StorageClass: "STANDARD",
      ETag: `"${createHash("md5").update("aaa").digest("hex")}"`,
    })
    expect(a?.LastModified).toBeInstanceOf(Date)
    expect(first.NextContinuationToken).toEqual(expect.any(String))

    const second = await client.send(
      new ListObjectsV2Command({
        Bucket: "out",
        Prefix: "list/",
        ContinuationToken: first.NextContinuationToken,
      }),
    )
    // max-keys defaults to 1000, but this fake caps a page at 4.
    expect(second).toMatchObject({ KeyCount: 4, MaxKeys: 1000, IsTruncated: false })
    expect(second.ContinuationToken).toBe(first.NextContinuationToken)
    expect(second.NextContinuationToken).toBeUndefined()
    expect(second.Contents?.map((c) => c.Key)).toEqual(["list/c", "list/d", "list/e", "list/f"])

    const empty = await client.send(new ListObjectsV2Command({ Bucket: "out", Prefix: "nothing/" }))
    expect(empty).toMatchObject({ KeyCount: 0, IsTruncated: false })
    expect(empty.Contents).toBeUndefined()
  })

  it("orders keys by their UTF-8 bytes, through the SDK's own paginator", async () => {
    // UTF-16 order puts U+1F600 (a surrogate pair, 0xD83D...) before U+FFFD; UTF-8 order after it.
    const keys = ["order/z", "order/\u{1F600}", "order/\uFFFD", "order/é", "order/A", "order/a"]
    for (const key of keys) await client.send(new PutObjectCommand({ Bucket: "out", Key: key, Body: key }))
    const listed: string[] = []
    for await (const page of paginateListObjectsV2({ client }, { Bucket: "out", Prefix: "order/" }))
      for (const c of page.Contents ?? []) listed.push(c.Key ?? "")
    expect(listed).toEqual(["order/A", "order/a", "order/z", "order/é", "order/\uFFFD", "order/\u{1F600}"])
    expect([...listed].sort()).not.toEqual(listed)
  })

  it("answers S3's error codes: NoSuchBucket, NoSuchKey, AccessDenied, BadDigest", async () => {
    expect(await s3Failure(client.send(new ListObjectsV2Command({ Bucket: "nope" })))).toEqual({
      name: "NoSuchBucket",
      status: 404,
    })
    expect(
      await s3Failure(client.send(new PutObjectCommand({ Bucket: "nope", Key: "k", Body: "x" }))),
    ).toEqual({ name: "NoSuchBucket", status: 404 })
    expect(await s3Failure(client.send(new GetObjectCommand({ Bucket: "out", Key: "missing" })))).toEqual({
      name: "NoSuchKey",
      status: 404,
    })
    s3.buckets.add("frozen")
    s3.readOnly.add("frozen")
    expect(
      await s3Failure(client.send(new PutObjectCommand({ Bucket: "frozen", Key: "k", Body: "x" }))),
    ).toEqual({ name: "AccessDenied", status: 403 })
    const wrongCrc = new PutObjectCommand({ Bucket: "out", Key: "k", Body: "x", ChecksumCRC32: "AAAAAA==" })
    expect(await s3Failure(client.send(wrongCrc))).toEqual({ name: "BadDigest", status: 400 })
    expect(s3.objects.has("out/k")).toBe(false)
  })
})
