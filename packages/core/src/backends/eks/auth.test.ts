/**
 * EKS cluster access: the bearer token's format and signature (checked by recomputing SigV4 here with
 * node:crypto, not with the signer that made it), its cache against a fake clock, and DescribeCluster
 * through the real `@aws-sdk/client-eks` against a small local HTTP server that answers as EKS does
 * (restJson, errors named by `x-amzn-ErrorType`).
 */
import { createHash, createHmac } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, test } from "vitest"
import { FakeClock } from "../../util/clock"
import { accessOptionsOf, createAccessCache, EksAuthError, eksAccess } from "./auth"
import { TokenPrefix } from "./token"

const Secret = "wJalrXUtnFEMI-K7MDENG-SECRET"
const Creds = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: Secret }
const CaPem = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

/** The presigned URL inside a token. */
function urlOf(token: string): URL {
  expect(token.startsWith(TokenPrefix)).toBe(true)
  const encoded = token.slice(TokenPrefix.length)
  expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/) // base64url, no padding
  return new URL(Buffer.from(encoded, "base64url").toString("utf8"))
}

const rfc3986 = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest()
const sha256 = (data: string) => createHash("sha256").update(data).digest("hex")

/** SigV4 of a presigned GET with an empty body, computed from the URL alone (as STS does). */
function expectedSignature(url: URL, headers: Record<string, string>, secret: string): string {
  const query = [...url.searchParams.entries()]
    .filter(([key]) => key !== "X-Amz-Signature")
    .map(([key, value]) => [rfc3986(key), rfc3986(value)])
    .sort(([a], [b]) => (a! < b! ? -1 : a! > b! ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`)
    .join("&")
  const signed = url.searchParams.get("X-Amz-SignedHeaders")!.split(";")
  const canonicalHeaders = signed.map((name) => `${name}:${headers[name]}\n`).join("")
  const canonical = ["GET", url.pathname, query, canonicalHeaders, signed.join(";"), sha256("")].join("\n")
  const [, date, region, service] = url.searchParams.get("X-Amz-Credential")!.split("/")
  const scope = `${date}/${region}/${service}/aws4_request`
  const toSign = ["AWS4-HMAC-SHA256", url.searchParams.get("X-Amz-Date"), scope, sha256(canonical)].join("\n")
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), region!), service!), "aws4_request")
  return createHmac("sha256", key).update(toSign).digest("hex")
}

describe("token", () => {
  test("is k8s-aws-v1. + base64url of an STS GetCallerIdentity URL presigned with x-k8s-aws-id signed", async () => {
    const clock = new FakeClock(Date.parse("2026-08-01T10:00:00Z"))
    const access = eksAccess({
      clusterName: "gpu-prod",
      region: "us-west-2",
      credentials: { ...Creds, sessionToken: "session-tok" },
      now: () => clock.now(),
      cache: createAccessCache(),
    })
    const url = urlOf(await access.token())
    expect(url.protocol).toBe("https:")
    expect(url.host).toBe("sts.us-west-2.amazonaws.com")
    expect(url.pathname).toBe("/")
    const q = url.searchParams
    expect(q.get("Action")).toBe("GetCallerIdentity")
    expect(q.get("Version")).toBe("2011-06-15")
    expect(q.get("X-Amz-Algorithm")).toBe("AWS4-HMAC-SHA256")
    expect(q.get("X-Amz-Credential")).toBe("AKIDEXAMPLE/20260801/us-west-2/sts/aws4_request")
    expect(q.get("X-Amz-Date")).toBe("20260801T100000Z")
    expect(q.get("X-Amz-Expires")).toBe("60")
    expect(q.get("X-Amz-SignedHeaders")!.split(";")).toEqual(["host", "x-k8s-aws-id"])
    expect(q.get("X-Amz-Security-Token")).toBe("session-tok")
    // Only the parameters the cluster's authenticator allows.
    const allowed = [
      "action",
      "version",
      "x-amz-algorithm",
      "x-amz-credential",
      "x-amz-date",
      "x-amz-expires",
      "x-amz-security-token",
      "x-amz-signature",
      "x-amz-signedheaders",
    ]
    for (const key of q.keys()) expect(allowed).toContain(key.toLowerCase())
    const headers = { host: "sts.us-west-2.amazonaws.com", "x-k8s-aws-id": "gpu-prod" }
    expect(q.get("X-Amz-Signature")).toBe(expectedSignature(url, headers, Secret))
    // Signed for this cluster only: another cluster name does not verify.
    expect(q.get("X-Amz-Signature")).not.toBe(
      expectedSignature(url, { ...headers, "x-k8s-aws-id": "other" }, Secret),
    )
    expect(url.toString()).not.toContain(Secret)
  })

  test("is reused until a minute before its 15 minutes end, then signed again; refresh forces a new one", async () => {
    const clock = new FakeClock(Date.parse("2026-08-01T10:00:00Z"))
    const cache = createAccessCache()
    const make = () =>
      eksAccess({
        clusterName: "gpu-prod",
        region: "us-west-2",
        credentials: Creds,
        now: () => clock.now(),
        cache,
      })
    const first = await make().token()
    clock.advance(13 * 60_000 + 59_000)
    // A new access object (the next invocation of a warm Lambda) shares the process cache.
    expect(await make().token()).toBe(first)
    clock.advance(2_000)
    const second = await make().token()
    expect(second).not.toBe(first)
    expect(urlOf(second).searchParams.get("X-Amz-Date")).toBe("20260801T101401Z")
    clock.advance(1_000)
    const forced = await make().token({ refresh: true })
    expect(forced).not.toBe(second)
    expect(await make().token()).toBe(forced)
  })

  test("signed with temporary credentials, it is replaced before they expire", async () => {
    const clock = new FakeClock(Date.parse("2026-08-01T10:00:00Z"))
    const access = eksAccess({
      clusterName: "c",
      region: "eu-west-1",
      credentials: { ...Creds, sessionToken: "s", expiration: new Date(clock.now() + 5 * 60_000) },
      now: () => clock.now(),
      cache: createAccessCache(),
    })
    const first = await access.token()
    clock.advance(3 * 60_000 + 59_000)
    expect(await access.token()).toBe(first)
    clock.advance(2_000)
    expect(await access.token()).not.toBe(first)
  })

  test("is cached per credentials, cluster and region", async () => {
    const clock = new FakeClock()
    const cache = createAccessCache()
    let creds: { accessKeyId: string; secretAccessKey: string } = Creds
    const access = (clusterName: string, region = "us-west-2") =>
      eksAccess({ clusterName, region, credentials: async () => creds, now: () => clock.now(), cache })
    const a = await access("a").token()
    expect(await access("b").token()).not.toBe(a)
    expect(await access("a", "us-east-1").token()).not.toBe(a)
    creds = { accessKeyId: "AKIDOTHER", secretAccessKey: "other" }
    const other = await access("a").token()
    expect(urlOf(other).searchParams.get("X-Amz-Credential")).toMatch(/^AKIDOTHER\//)
  })

  test("roleArn: the token is signed with the role's temporary credentials from STS AssumeRole, cached until shortly before they expire", async () => {
    const clock = new FakeClock(Date.parse("2026-08-01T10:00:00Z"))
    let issued = 0
    const sts = await fakeSts(() => {
      issued++
      return {
        status: 200,
        body: assumeRoleAnswer(`ASIAROLE${issued}`, new Date(clock.now() + 3600_000)),
      }
    })
    const access = eksAccess({
      ...accessOptionsOf({
        clusterName: "c",
        region: "us-west-2",
        roleArn: "arn:aws:iam::111122223333:role/eks",
        endpoint: undefined,
      }),
      stsEndpoint: sts.endpoint,
      credentials: Creds,
      now: () => clock.now(),
      cache: createAccessCache(),
    })
    const first = urlOf(await access.token())
    expect(first.searchParams.get("X-Amz-Credential")).toMatch(/^ASIAROLE1\//)
    expect(first.searchParams.get("X-Amz-Security-Token")).toBe("role-session-1")
    expect(sts.bodies).toHaveLength(1)
    const asked = new URLSearchParams(sts.bodies[0])
    expect(asked.get("Action")).toBe("AssumeRole")
    expect(asked.get("RoleArn")).toBe("arn:aws:iam::111122223333:role/eks")
    expect(asked.get("RoleSessionName")).toBe("swarmplane")
    // A token lives 15 minutes; the role's credentials an hour: new tokens, the same credentials.
    clock.advance(20 * 60_000)
    expect(urlOf(await access.token()).searchParams.get("X-Amz-Credential")).toMatch(/^ASIAROLE1\//)
    expect(sts.bodies).toHaveLength(1)
    // Within the margin of their end the role is assumed again.
    clock.advance(40 * 60_000)
    expect(urlOf(await access.token()).searchParams.get("X-Amz-Credential")).toMatch(/^ASIAROLE2\//)
    expect(sts.bodies).toHaveLength(2)
  })

  test("roleArn refused by STS: an EksAuthError naming the role, never a credential, and not kept", async () => {
    let deny = true
    const sts = await fakeSts(() =>
      deny
        ? { status: 403, body: stsError("AccessDenied", "User is not authorized to perform: sts:AssumeRole") }
        : { status: 200, body: assumeRoleAnswer("ASIALATER", new Date(Date.now() + 3600_000)) },
    )
    const access = eksAccess({
      clusterName: "c",
      region: "us-west-2",
      roleArn: "arn:aws:iam::111122223333:role/eks",
      stsEndpoint: sts.endpoint,
      credentials: Creds,
      cache: createAccessCache(),
    })
    const error = await access.token().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(EksAuthError)
    expect((error as EksAuthError).message).toMatch(/may not assume arn:aws:iam::111122223333:role\/eks/)
    expect((error as EksAuthError).message).not.toContain(Secret)
    deny = false
    expect(urlOf(await access.token()).searchParams.get("X-Amz-Credential")).toMatch(/^ASIALATER\//)
  })
})

/** An STS stand-in (awsQuery: form-encoded POST, XML answers); the request bodies are recorded. */
async function fakeSts(answer: () => { status: number; body: string }) {
  const bodies: string[] = []
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => {
      body += chunk
    })
    req.on("end", () => {
      bodies.push(body)
      const reply = answer()
      res.writeHead(reply.status, { "content-type": "text/xml" })
      res.end(reply.body)
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies }
}

const assumeRoleAnswer = (keyId: string, expiration: Date) =>
  `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials>` +
  `<AccessKeyId>${keyId}</AccessKeyId><SecretAccessKey>role-secret</SecretAccessKey>` +
  `<SessionToken>role-session-${keyId.slice(-1)}</SessionToken><Expiration>${expiration.toISOString()}</Expiration>` +
  `</Credentials><AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/eks/swarmplane</Arn>` +
  `<AssumedRoleId>AROAEXAMPLE:swarmplane</AssumedRoleId></AssumedRoleUser></AssumeRoleResult>` +
  `<ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata></AssumeRoleResponse>`

const stsError = (code: string, message: string) =>
  `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>` +
  `<Code>${code}</Code><Message>${message}</Message></Error><RequestId>req-2</RequestId></ErrorResponse>`

type EksAnswer = { status: number; body: unknown; errorType?: string }

const servers: Server[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** An EKS API stand-in: `GET /clusters/{name}` answers `answer()`; the paths asked are recorded. */
async function fakeEks(answer: () => EksAnswer) {
  const paths: string[] = []
  const server = createServer((req, res) => {
    paths.push(req.url ?? "")
    const { status, body, errorType } = answer()
    res.writeHead(status, {
      "content-type": "application/json",
      ...(errorType ? { "x-amzn-errortype": errorType } : {}),
    })
    res.end(JSON.stringify(body))
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths }
}

const cluster = (status: string, extra: Record<string, unknown> = {}) => ({
  cluster: {
    name: "gpu-prod",
    arn: "arn:aws:eks:us-west-2:111122223333:cluster/gpu-prod",
    status,
    version: "1.31",
    createdAt: 1720000000.0,
    ...(status === "ACTIVE"
      ? {
          endpoint: "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
          certificateAuthority: { data: Buffer.from(CaPem).toString("base64") },
        }
      : {}),
    ...extra,
  },
})

describe("cluster (DescribeCluster)", () => {
  test("gives the endpoint and the CA as PEM, asks once per TTL, and once for concurrent callers", async () => {
    const eks = await fakeEks(() => ({ status: 200, body: cluster("ACTIVE") }))
    const clock = new FakeClock()
    const access = eksAccess({
      clusterName: "gpu-prod",
      region: "us-west-2",
      eksEndpoint: eks.endpoint,
      credentials: Creds,
      now: () => clock.now(),
      clusterTtlMs: 60_000,
      cache: createAccessCache(),
    })
    const [one, two] = await Promise.all([access.cluster(), access.cluster()])
    expect(one).toEqual({
      name: "gpu-prod",
      endpoint: "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
      caPem: CaPem,
      status: "ACTIVE",
      version: "1.31",
    })
    expect(two).toEqual(one)
    expect(eks.paths).toEqual(["/clusters/gpu-prod"])
    clock.advance(59_000)
    await access.cluster()
    expect(eks.paths).toHaveLength(1)
    clock.advance(2_000)
    await access.cluster()
    expect(eks.paths).toHaveLength(2)
  })

  const cases: Record<string, { answer: EksAnswer; code: string; retryable: boolean; message: RegExp }> = {
    "404 ResourceNotFoundException": {
      answer: {
        status: 404,
        errorType: "ResourceNotFoundException",
        body: { message: "No cluster found for name: gpu-prod.", clusterName: "gpu-prod" },
      },
      code: "ResourceNotFoundException",
      retryable: true,
      message: /EKS cluster "gpu-prod" in us-west-2: not found; check the backend's clusterName and region/,
    },
    "400 ClientException": {
      answer: { status: 400, errorType: "ClientException", body: { message: "bad request" } },
      code: "ClientException",
      retryable: false,
      message: /DescribeCluster failed: ClientException: bad request/,
    },
    "403 AccessDeniedException": {
      answer: {
        status: 403,
        errorType: "AccessDeniedException",
        body: { message: "User is not authorized" },
      },
      code: "AccessDeniedException",
      retryable: true,
      message: /needs eks:DescribeCluster/,
    },
    "503 ServiceUnavailableException": {
      answer: { status: 503, errorType: "ServiceUnavailableException", body: { message: "try later" } },
      code: "ServiceUnavailableException",
      retryable: true,
      message: /ServiceUnavailableException/,
    },
    "a CREATING cluster": {
      answer: { status: 200, body: cluster("CREATING") },
      code: "ClusterNotActive",
      retryable: true,
      message: /EKS cluster "gpu-prod" in us-west-2 is CREATING, not ACTIVE/,
    },
    "a FAILED cluster": {
      answer: { status: 200, body: cluster("FAILED") },
      code: "ClusterNotActive",
      retryable: false,
      message: /is FAILED, not ACTIVE/,
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(`${name} is an EksAuthError with its code, and is not cached`, async () => {
      const eks = await fakeEks(() => tc.answer)
      const access = eksAccess({
        clusterName: "gpu-prod",
        region: "us-west-2",
        eksEndpoint: eks.endpoint,
        credentials: Creds,
        cache: createAccessCache(),
      })
      const error = await access.cluster().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(EksAuthError)
      const failure = error as EksAuthError
      expect(failure.code).toBe(tc.code)
      expect(failure.retryable).toBe(tc.retryable)
      expect(failure.message).toMatch(tc.message)
      expect(failure.message).not.toContain(Secret)
      const asked = eks.paths.length
      await access.cluster().catch(() => undefined)
      expect(eks.paths.length).toBeGreaterThan(asked)
    })

  test("an UPDATING cluster still serves its API and is used", async () => {
    const body = cluster("ACTIVE")
    body.cluster.status = "UPDATING"
    const eks = await fakeEks(() => ({ status: 200, body }))
    const access = eksAccess({
      clusterName: "gpu-prod",
      region: "us-west-2",
      eksEndpoint: eks.endpoint,
      credentials: Creds,
      cache: createAccessCache(),
    })
    expect((await access.cluster()).status).toBe("UPDATING")
  })
})
