/**
 * Access to an EKS cluster from a stateless handler (backend-contracts.md Part B): where its API
 * server is and which CA signs its certificate (`DescribeCluster`), and the bearer token it accepts
 * (a presigned STS URL, token.ts).
 *
 * Both are cached in a process-wide cache, so the warm invocations of a Lambda reuse them: the
 * cluster for a short TTL (its endpoint and CA rarely change), the token per cluster, region and
 * credentials until shortly before its 15-minute validity ends (or its temporary credentials do).
 * Concurrent callers share one `DescribeCluster` and one signing. With a `roleArn`, the cluster is
 * reached as that role: STS `AssumeRole` with the function's own credentials, its temporary
 * credentials cached until shortly before they expire (and the token signed with them lives no longer).
 * `@aws-sdk/client-eks`, `@aws-sdk/client-sts` and the credential chain are loaded on first use, so a
 * function that never talks to EKS does not load them.
 *
 * Failures are `EksAuthError`s: they name the cluster, the region and AWS's error code, never a
 * credential or a token.
 */
import { createHash } from "node:crypto"
// Types only: erased at build time, so the SDK itself is still loaded on first use.
import type { DescribeClusterCommandOutput } from "@aws-sdk/client-eks"
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from "@smithy/types"
import type { z } from "zod"
import type { EksBackendConfig } from "../../model/backend"
import { BackendError } from "../../util/errors"
import { signToken, TokenValidityMs } from "./token"

/** Where a cluster's API server is, and how to trust it. */
export interface ClusterEndpoint {
  name: string
  /** `https://…`, the Kubernetes API server. */
  endpoint: string
  /** The cluster CA bundle, PEM (decoded from DescribeCluster's base64). */
  caPem: string
  status: string
  version?: string
}

/** A failed cluster lookup or token: AWS's error code (absent when none came) and the HTTP status. */
export class EksAuthError extends BackendError {
  constructor(
    message: string,
    retryable: boolean,
    readonly code?: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, retryable, options)
    this.name = "EksAuthError"
  }
}

/** What `eksAccess` keeps between calls; one per process by default (`sharedAccessCache`). */
export interface EksAccessCache {
  clusters: Map<string, { value: Promise<ClusterEndpoint>; until: number }>
  tokens: Map<string, { value: Promise<{ token: string; until: number }> }>
  /** Temporary credentials of an assumed role, per role and base credentials. */
  roles: Map<string, { value: Promise<AwsCredentialIdentity> }>
}

export const createAccessCache = (): EksAccessCache => ({
  clusters: new Map(),
  tokens: new Map(),
  roles: new Map(),
})

/** The session name an assumed role's calls carry (CloudTrail shows it). */
export const RoleSessionName = "swarmplane"
/** How long an assumed role's credentials are asked for (STS's default; a role may allow no more). */
export const RoleSessionSeconds = 3600

/** The process's cache: what a warm Lambda reuses across invocations. */
export const sharedAccessCache: EksAccessCache = createAccessCache()

export interface EksAccessOptions {
  clusterName: string
  region: string
  /** Override of the EKS API endpoint (config `endpoint`: private endpoints, tests). */
  eksEndpoint?: string
  /** Config `roleArn`: the cluster is reached as this role (STS AssumeRole with `credentials`). */
  roleArn?: string
  /** Override of the STS endpoint for AssumeRole (private endpoints, tests). */
  stsEndpoint?: string
  /** Static credentials or a provider; the default Node provider chain (the function's role) when absent. */
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider
  /** Milliseconds since the epoch. */
  now?: () => number
  /** A token is replaced this long before its 15-minute validity ends; 60 s by default. */
  tokenMarginMs?: number
  /** How long a `DescribeCluster` answer is reused; 5 minutes by default. */
  clusterTtlMs?: number
  /** Timeout of one `DescribeCluster` (its SDK retries included), ms. */
  timeoutMs?: number
  cache?: EksAccessCache
}

/** What the Kubernetes client needs from EKS (client.ts `KubeAccess`). */
export interface EksAccess {
  /** The cluster's API server and CA; an `EksAuthError` when the cluster cannot be used. */
  cluster(): Promise<ClusterEndpoint>
  /** A bearer token; `refresh` signs a new one (after a 401). */
  token(options?: { refresh?: boolean }): Promise<string>
}

/** The access options a backend config names. */
export function accessOptionsOf(
  config: Pick<z.infer<typeof EksBackendConfig>, "clusterName" | "region" | "endpoint" | "roleArn">,
): EksAccessOptions {
  return {
    clusterName: config.clusterName,
    region: config.region,
    eksEndpoint: config.endpoint,
    roleArn: config.roleArn,
  }
}

/** A cluster may be used while it serves its API: ACTIVE, and UPDATING (a version or config update keeps it up). */
const Usable = new Set(["ACTIVE", "UPDATING"])

/** AWS error codes that mean the request itself is wrong: another try cannot pass. */
const BadRequest = new Set(["ClientException", "InvalidParameterException", "InvalidRequestException"])

let chain: Promise<AwsCredentialIdentityProvider> | undefined
/** The default Node credential chain, built once per process (it memoizes what it resolves). */
function defaultCredentials(): Promise<AwsCredentialIdentityProvider> {
  chain ??= import("@aws-sdk/credential-provider-node").then(({ defaultProvider }) => defaultProvider())
  return chain
}

/** Tokens are cached per credentials; the key holds a digest of them, never the secret itself. */
function fingerprint(credentials: AwsCredentialIdentity): string {
  return createHash("sha256")
    .update(`${credentials.accessKeyId}\0${credentials.secretAccessKey}\0${credentials.sessionToken ?? ""}`)
    .digest("hex")
    .slice(0, 32)
}

export function eksAccess(options: EksAccessOptions): EksAccess {
  const now = options.now ?? Date.now
  const cache = options.cache ?? sharedAccessCache
  const margin = options.tokenMarginMs ?? 60_000
  const clusterTtl = options.clusterTtlMs ?? 5 * 60_000
  const timeoutMs = options.timeoutMs ?? 20_000
  const { clusterName, region } = options
  const where = `EKS cluster "${clusterName}" in ${region}`

  /** The function's own credentials (or those given). */
  async function baseCredentials(): Promise<AwsCredentialIdentity> {
    const given = options.credentials ?? (await defaultCredentials())
    try {
      return typeof given === "function" ? await given() : given
    } catch (error) {
      const why = error instanceof Error ? error.name : "unknown error"
      throw new EksAuthError(
        `${where}: no AWS credentials (${why})`,
        true,
        "CredentialsProviderError",
        undefined,
        {
          cause: error,
        },
      )
    }
  }

  /** The role's temporary credentials: cached until `margin` before they expire; a failure is not kept. */
  async function assumed(roleArn: string): Promise<AwsCredentialIdentity> {
    const base = await baseCredentials()
    const key = `${roleArn}|${region}|${options.stsEndpoint ?? ""}|${fingerprint(base)}`
    const hit = cache.roles.get(key)
    if (hit) {
      const held = await hit.value.catch(() => undefined)
      if (held && (!held.expiration || now() < held.expiration.getTime() - margin)) return held
    }
    const value = assumeRole(roleArn, base)
    cache.roles.set(key, { value })
    value.catch(() => {
      if (cache.roles.get(key)?.value === value) cache.roles.delete(key)
    })
    return value
  }

  async function assumeRole(roleArn: string, base: AwsCredentialIdentity): Promise<AwsCredentialIdentity> {
    const { STSClient, AssumeRoleCommand } = await import("@aws-sdk/client-sts")
    const client = new STSClient({
      region,
      credentials: base,
      ...(options.stsEndpoint ? { endpoint: options.stsEndpoint } : {}),
    })
    try {
      const out = await client.send(
        new AssumeRoleCommand({
          RoleArn: roleArn,
          RoleSessionName,
          DurationSeconds: RoleSessionSeconds,
        }),
        { abortSignal: AbortSignal.timeout(timeoutMs) },
      )
      const c = out.Credentials
      if (!c?.AccessKeyId || !c.SecretAccessKey)
        throw new EksAuthError(
          `${where}: AssumeRole of ${roleArn} gave no credentials`,
          true,
          "NoCredentials",
        )
      return {
        accessKeyId: c.AccessKeyId,
        secretAccessKey: c.SecretAccessKey,
        ...(c.SessionToken ? { sessionToken: c.SessionToken } : {}),
        ...(c.Expiration ? { expiration: new Date(c.Expiration) } : {}),
      }
    } catch (error) {
      if (error instanceof EksAuthError) throw error
      throw assumeRoleError(error, where, roleArn)
    } finally {
      client.destroy()
    }
  }

  /** The identity the cluster sees: the role's when `roleArn` is set, else the function's own. */
  const credentials = () => (options.roleArn ? assumed(options.roleArn) : baseCredentials())

  async function describe(): Promise<ClusterEndpoint> {
    const { EKSClient, DescribeClusterCommand } = await import("@aws-sdk/client-eks")
    const client = new EKSClient({
      region,
      ...(options.eksEndpoint ? { endpoint: options.eksEndpoint } : {}),
      ...(options.roleArn
        ? { credentials: await credentials() }
        : options.credentials
          ? { credentials: options.credentials }
          : { credentials: await defaultCredentials() }),
    })
    let cluster: DescribeClusterCommandOutput["cluster"]
    try {
      const out = await client.send(new DescribeClusterCommand({ name: clusterName }), {
        abortSignal: AbortSignal.timeout(timeoutMs),
      })
      cluster = out.cluster
    } catch (error) {
      throw describeError(error, where)
    } finally {
      client.destroy()
    }
    const status = cluster?.status ?? "UNKNOWN"
    if (!Usable.has(status))
      throw new EksAuthError(`${where} is ${status}, not ACTIVE`, status !== "FAILED", "ClusterNotActive")
    const endpoint = cluster?.endpoint
    const ca = cluster?.certificateAuthority?.data
    if (!endpoint || !ca)
      throw new EksAuthError(`${where}: DescribeCluster gave no endpoint or CA`, true, "ClusterNotReady")
    return {
      name: clusterName,
      endpoint,
      caPem: Buffer.from(ca, "base64").toString("utf8"),
      status,
      version: cluster?.version,
    }
  }

  return {
    async cluster() {
      const key = `${clusterName}|${region}|${options.eksEndpoint ?? ""}|${options.roleArn ?? ""}`
      const hit = cache.clusters.get(key)
      if (hit && now() < hit.until) return hit.value
      const value = describe()
      cache.clusters.set(key, { value, until: now() + clusterTtl })
      // A failure is not kept: the next call asks again.
      value.catch(() => {
        if (cache.clusters.get(key)?.value === value) cache.clusters.delete(key)
      })
      return value
    },

    async token({ refresh = false } = {}) {
      const creds = await credentials()
      const key = `${clusterName}|${region}|${fingerprint(creds)}`
      const hit = cache.tokens.get(key)
      if (hit && !refresh) {
        const held = await hit.value.catch(() => undefined)
        if (held && now() < held.until) return held.token
      }
      const value = signToken({ clusterName, region, credentials: creds, now: now() }).then((signed) => {
        // Valid 15 minutes from its date, and no longer than the temporary credentials it was signed with.
        const credsEnd = creds.expiration ? creds.expiration.getTime() : Number.POSITIVE_INFINITY
        return { token: signed.token, until: Math.min(signed.signedAt + TokenValidityMs, credsEnd) - margin }
      })
      cache.tokens.set(key, { value })
      value.catch(() => {
        if (cache.tokens.get(key)?.value === value) cache.tokens.delete(key)
      })
      return (await value).token
    },
  }
}

/** An SDK failure of DescribeCluster as an `EksAuthError` with AWS's code and a hint a user can act on. */
export function describeError(error: unknown, where: string): EksAuthError {
  const failure = error as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } }
  const code = failure?.name ?? "Error"
  const status = failure?.$metadata?.httpStatusCode
  if (code === "TimeoutError" || code === "AbortError")
    return new EksAuthError(`${where}: DescribeCluster gave no answer in time`, true, code, status, {
      cause: error,
    })
  const hints: Record<string, string> = {
    ResourceNotFoundException: "not found; check the backend's clusterName and region",
    AccessDeniedException: "DescribeCluster was refused; the function's role needs eks:DescribeCluster on it",
    UnrecognizedClientException: "the AWS credentials were refused",
    ExpiredTokenException: "the AWS credentials have expired",
    CredentialsProviderError: "no AWS credentials were found for DescribeCluster",
  }
  const said =
    hints[code] ?? `DescribeCluster failed: ${code}${failure?.message ? `: ${failure.message}` : ""}`
  return new EksAuthError(`${where}: ${said}`, !BadRequest.has(code), code, status, { cause: error })
}

/** An SDK failure of AssumeRole as an `EksAuthError` with AWS's code and a hint a user can act on. */
export function assumeRoleError(error: unknown, where: string, roleArn: string): EksAuthError {
  const failure = error as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } }
  const code = failure?.name ?? "Error"
  const status = failure?.$metadata?.httpStatusCode
  if (code === "TimeoutError" || code === "AbortError")
    return new EksAuthError(`${where}: AssumeRole of ${roleArn} gave no answer in time`, true, code, status, {
      cause: error,
    })
  const hints: Record<string, string> = {
    AccessDenied: `the function's role may not assume ${roleArn} (sts:AssumeRole, and the role's trust policy)`,
    AccessDeniedException: `the function's role may not assume ${roleArn} (sts:AssumeRole, and the role's trust policy)`,
    RegionDisabledException: "STS is not activated in this region",
    ExpiredTokenException: "the AWS credentials have expired",
  }
  const said =
    hints[code] ?? `AssumeRole of ${roleArn} failed: ${code}${failure?.message ? `: ${failure.message}` : ""}`
  return new EksAuthError(`${where}: ${said}`, !BadRequest.has(code), code, status, { cause: error })
}
