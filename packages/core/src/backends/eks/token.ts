/**
 * The Kubernetes bearer token of an EKS cluster (backend-contracts.md Part B.2), made the way
 * `aws eks get-token` and aws-iam-authenticator make it: an STS `GetCallerIdentity` URL presigned with
 * SigV4, with the cluster's name in the signed header `x-k8s-aws-id`, encoded as
 * `k8s-aws-v1.` + base64url (no padding). No call to STS is made here: the cluster's authenticator
 * makes it when it checks the token.
 *
 * The token is a credential: it is returned to the caller and never logged or put in a message.
 */
import type { AwsCredentialIdentity, HttpRequest } from "@smithy/types"

export const TokenPrefix = "k8s-aws-v1."

/** STS accepts the presigned URL for 15 minutes after its `X-Amz-Date`, whatever `X-Amz-Expires` says. */
export const TokenValidityMs = 15 * 60_000

/** What aws-iam-authenticator and the AWS CLI put in `X-Amz-Expires`. */
export const PresignExpiresSeconds = 60

export interface SignedToken {
  token: string
  /** When it was signed (its `X-Amz-Date`), ms since the epoch. */
  signedAt: number
}

/** The STS host of a region; `sts.amazonaws.com` also works, but the regional one needs no global STS. */
export const stsHost = (region: string) => `sts.${region}.amazonaws.com`

/** Signs a fresh token for `clusterName` with `credentials`, dated `now`. */
export async function signToken(input: {
  clusterName: string
  region: string
  credentials: AwsCredentialIdentity
  now: number
}): Promise<SignedToken> {
  // Loaded here, not at the top: a function that never talks to a cluster does not load the signer.
  const [{ SignatureV4 }, { Hash }] = await Promise.all([
    import("@smithy/signature-v4"),
    import("@smithy/hash-node"),
  ])
  const host = stsHost(input.region)
  const request: HttpRequest = {
    method: "GET",
    protocol: "https:",
    hostname: host,
    path: "/",
    query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
    // Both stay headers (only `x-amz-*` ones are hoisted into the query), so both are signed headers;
    // the authenticator refuses a token whose X-Amz-SignedHeaders lacks x-k8s-aws-id.
    headers: { host, "x-k8s-aws-id": input.clusterName },
  }
  const signer = new SignatureV4({
    credentials: input.credentials,
    region: input.region,
    service: "sts",
    sha256: Hash.bind(null, "sha256"),
  })
  const signed = await signer.presign(request, {
    expiresIn: PresignExpiresSeconds,
    signingDate: new Date(input.now),
  })
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(signed.query ?? {}))
    for (const one of Array.isArray(value) ? value : [value]) if (one !== null) query.append(key, one)
  const url = `https://${host}${signed.path}?${query.toString()}`
  // X-Amz-Date has whole seconds: the validity counts from the second the signature names.
  const signedAt = Math.floor(input.now / 1000) * 1000
  return { token: TokenPrefix + Buffer.from(url).toString("base64url"), signedAt }
}
