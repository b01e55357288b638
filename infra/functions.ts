/**
 * How the app's Lambdas are made: what they all share (the runtime, the bundle settings, the VPC), and
 * what each is given from what its handler uses, declared beside it (`api.ts`, `schedule.ts`,
 * `ticks.ts`) with `functionArgs()`: exactly the links named, the secrets prefix and SSM read access
 * only where backend secrets are read, EKS access only where passes reach clusters. The wiring test
 * (`test/infra-wiring.test.ts`) holds each function's links and environment to what its handler's
 * bundle reads (`functions/deps.ts` builds a runtime per kind of handler), and the bundle test runs each
 * bundle with only its own function's environment.
 *
 * Deploy-time settings, read from the environment of `sst deploy` (all optional):
 *   SWARMPLANE_VPC_SUBNETS          comma-separated private subnet ids: the functions run in the VPC,
 *                                   to reach Slurm login nodes (or EKS API endpoints) on private
 *                                   addresses. The subnets need a NAT gateway or VPC endpoints for
 *                                   DynamoDB, SQS, SSM and STS.
 *   SWARMPLANE_VPC_SECURITY_GROUPS  comma-separated security group ids for those functions (needed
 *                                   with the subnets); their egress must allow the login nodes' SSH.
 *   SWARMPLANE_EKS_CLUSTERS         comma-separated EKS cluster names the `eks` backends may use:
 *                                   `eks:DescribeCluster` on exactly those. Without it the functions
 *                                   have no EKS permission, and an `eks` backend's status says so.
 *   SWARMPLANE_EKS_ROLES            comma-separated role ARNs an `eks` backend's `roleArn` may name:
 *                                   `sts:AssumeRole` on exactly those.
 */
import { bundleSettings, lambdaRuntime } from "./bundle"
import { secretsEnvironment, secretsPermissions } from "./secrets"

const list = (name: string): string[] =>
  (process.env[name] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)

const subnets = list("SWARMPLANE_VPC_SUBNETS")
const securityGroups = list("SWARMPLANE_VPC_SECURITY_GROUPS")
if (subnets.length && !securityGroups.length)
  throw new Error(
    "SWARMPLANE_VPC_SUBNETS is set without SWARMPLANE_VPC_SECURITY_GROUPS: set both, or neither",
  )
if (securityGroups.length && !subnets.length)
  throw new Error(
    "SWARMPLANE_VPC_SECURITY_GROUPS is set without SWARMPLANE_VPC_SUBNETS: set both, or neither",
  )

const region = aws.getRegionOutput().region
const account = aws.getCallerIdentityOutput().accountId
const { partition } = aws.getPartitionOutput()

const clusters = list("SWARMPLANE_EKS_CLUSTERS")
const roles = list("SWARMPLANE_EKS_ROLES")

/** EKS access, only where the deploy names clusters (and roles to assume). */
export const eksPermissions = [
  ...(clusters.length
    ? [
        {
          actions: ["eks:DescribeCluster"],
          resources: clusters.map(
            (name) => $interpolate`arn:${partition}:eks:${region}:${account}:cluster/${name}`,
          ),
        },
      ]
    : []),
  ...(roles.length ? [{ actions: ["sts:AssumeRole"], resources: roles }] : []),
]

/** What a function's handler uses, beyond its handler, timeout and memory. */
export interface Uses {
  /** The resources its handler reads through SST's `Resource` (in `functions/deps.ts`). */
  link: sst.aws.FunctionArgs["link"]
  /** Reads backend secrets (SSH keys, Lepton tokens): the secrets prefix, and `ssm:GetParameter` under it. */
  secrets: boolean
  /** Its passes reach EKS clusters: `eks:DescribeCluster` and `sts:AssumeRole` on those the deploy names. */
  clusters: boolean
}

/** The settings of a function whose handler uses `uses`; each adds its handler, timeout and memory. */
export function functionArgs(uses: Uses) {
  return {
    runtime: lambdaRuntime,
    nodejs: bundleSettings,
    link: uses.link,
    // A copy each: SST adds its own variables to the object it is given.
    environment: uses.secrets ? { ...secretsEnvironment } : {},
    permissions: [...(uses.secrets ? secretsPermissions : []), ...(uses.clusters ? eksPermissions : [])],
    ...(subnets.length ? { vpc: { privateSubnets: subnets, securityGroups } } : {}),
  }
}
