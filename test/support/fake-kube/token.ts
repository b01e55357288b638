/**
 * The EKS bearer token check (Part B.2), done as the aws-iam-authenticator server does it but offline:
 * `k8s-aws-v1.` + base64url of a presigned STS `GetCallerIdentity` URL, its host, path and query
 * allow-list, a signed `x-k8s-aws-id` naming this cluster, `0 <= X-Amz-Expires <= 900`, `X-Amz-Date`
 * at most 15 minutes old by the fake's clock, and the SigV4 signature recomputed with the secret of
 * the access key the test configured (instead of asking STS). The caller is that key's IAM ARN.
 */
import { Hash } from "@smithy/hash-node"
import { SignatureV4 } from "@smithy/signature-v4"

export interface FakeIamUser {
  accessKeyId: string
  secretAccessKey: string
  /** What Kubernetes calls the user in a 403 message. Default `arn:aws:iam::111122223333:user/<key>`. */
  arn?: string
}

export type TokenCheck = { ok: true; user: string } | { ok: false; why: string }

const prefix = "k8s-aws-v1."
const allowedParams = new Set([
  "action",
  "version",
  "x-amz-algorithm",
  "x-amz-credential",
  "x-amz-date",
  "x-amz-expires",
  "x-amz-security-token",
  "x-amz-signature",
  "x-amz-signedheaders",
])
const stsHost = /^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$/
const validForMs = 15 * 60_000

/** `20260801T100000Z` as epoch ms. */
function amzDate(raw: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(raw)
  if (!m) return undefined
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]))
}

/** Tokens whose signature already checked out: the user, by token (the other checks run every time). */
const verified = new Map<string, string>()

export async function checkToken(
  authorization: string | undefined,
  clusterName: string,
  users: FakeIamUser[],
  now: number,
): Promise<TokenCheck> {
  const bearer = authorization?.startsWith("Bearer ") ? authorization.slice("Bearer ".length).trim() : ""
  if (bearer.length === 0) return { ok: false, why: "no bearer token" }
  if (bearer.length > 4096) return { ok: false, why: "token is too large" }
  if (!bearer.startsWith(prefix)) return { ok: false, why: 'token is missing expected "k8s-aws-v1." prefix' }
  let url: URL
  try {
    url = new URL(Buffer.from(bearer.slice(prefix.length), "base64url").toString("utf8"))
  } catch {
    return { ok: false, why: "token is not a base64url-encoded URL" }
  }
  if (url.protocol !== "https:") return { ok: false, why: "unexpected scheme" }
  if (!stsHost.test(url.hostname)) return { ok: false, why: `unexpected hostname "${url.hostname}"` }
  if (url.pathname !== "/") return { ok: false, why: "unexpected path" }
  const q = new Map<string, string>()
  for (const [k, v] of url.searchParams) {
    if (!allowedParams.has(k.toLowerCase()))
      return { ok: false, why: `non-whitelisted query parameter "${k}"` }
    q.set(k.toLowerCase(), v)
  }
  if (q.get("action") !== "GetCallerIdentity") return { ok: false, why: "unexpected action parameter" }
  if (q.get("version") !== "2011-06-15") return { ok: false, why: "unexpected version parameter" }
  const signed = (q.get("x-amz-signedheaders") ?? "").split(";")
  if (!signed.includes("x-k8s-aws-id"))
    return { ok: false, why: "client did not sign the x-k8s-aws-id header in the pre-signed URL" }
  const expires = Number(q.get("x-amz-expires"))
  if (!Number.isInteger(expires) || expires < 0 || expires > 900)
    return { ok: false, why: "invalid X-Amz-Expires parameter in pre-signed URL" }
  const date = amzDate(q.get("x-amz-date") ?? "")
  if (date === undefined) return { ok: false, why: "error parsing X-Amz-Date parameter" }
  if (now > date + validForMs)
    return { ok: false, why: "X-Amz-Date parameter is expired (15 minute expiration)" }
  if (date > now + validForMs) return { ok: false, why: "X-Amz-Date parameter is in the future" }
  const cached = verified.get(`${clusterName}\n${bearer}`)
  if (cached !== undefined && users.some((u) => cached === userName(u))) return { ok: true, user: cached }
  // Credential: AKID/20260801/us-west-2/sts/aws4_request
  const [accessKeyId, , region, service] = (q.get("x-amz-credential") ?? "").split("/")
  const user = users.find((u) => u.accessKeyId === accessKeyId)
  if (!user || !region || service !== "sts")
    return { ok: false, why: "sts getCallerIdentity failed: InvalidClientTokenId" }
  // Recompute the presigned URL's signature for the same request, clock and credentials.
  const query: Record<string, string> = {}
  for (const [k, v] of url.searchParams) if (!k.toLowerCase().startsWith("x-amz-")) query[k] = v
  const sessionToken = url.searchParams.get("X-Amz-Security-Token") ?? undefined
  const signer = new SignatureV4({
    credentials: { accessKeyId: user.accessKeyId, secretAccessKey: user.secretAccessKey, sessionToken },
    region,
    service: "sts",
    sha256: Hash.bind(null, "sha256"),
  })
  const expected = await signer.presign(
    {
      method: "GET",
      protocol: "https:",
      hostname: url.hostname,
      path: "/",
      query,
      headers: { host: url.host, "x-k8s-aws-id": clusterName },
    },
    { signingDate: new Date(date), expiresIn: expires },
  )
  if (expected.query?.["X-Amz-Signature"] !== q.get("x-amz-signature"))
    return {
      ok: false,
      why: "sts getCallerIdentity failed: SignatureDoesNotMatch (or the token is for another cluster)",
    }
  if (verified.size > 10_000) verified.clear()
  verified.set(`${clusterName}\n${bearer}`, userName(user))
  return { ok: true, user: userName(user) }
}

const userName = (u: FakeIamUser) => u.arn ?? `arn:aws:iam::111122223333:user/${u.accessKeyId}`

/**
 * A token as `aws eks get-token` makes it (B.2), for tests and kubeconfigs; the backend makes its own.
 * `signingDate` lets a test make one that is already old.
 */
export async function makeToken(options: {
  clusterName: string
  region: string
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }
  signingDate?: Date
  expiresIn?: number
  /** Sign without the `x-k8s-aws-id` header (what the server must refuse). */
  omitClusterHeader?: boolean
}): Promise<string> {
  const hostname = `sts.${options.region}.amazonaws.com`
  const signer = new SignatureV4({
    credentials: options.credentials,
    region: options.region,
    service: "sts",
    sha256: Hash.bind(null, "sha256"),
  })
  const headers: Record<string, string> = { host: hostname }
  if (!options.omitClusterHeader) headers["x-k8s-aws-id"] = options.clusterName
  const signed = await signer.presign(
    {
      method: "GET",
      protocol: "https:",
      hostname,
      path: "/",
      query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
      headers,
    },
    { expiresIn: options.expiresIn ?? 60, signingDate: options.signingDate ?? new Date() },
  )
  const query = new URLSearchParams(signed.query as Record<string, string>).toString()
  return `${prefix}${Buffer.from(`https://${hostname}/?${query}`).toString("base64url")}`
}
