/**
 * What every Lambda of the app shares: the runtime, the bundle settings, the links, the environment
 * and the permissions. `functions/deps.ts` builds every handler's runtime the same way (the table, the
 * schedule queue, the pepper, the secrets prefix), so each function gets the same set; the wiring test
 * (`test/infra-wiring.test.ts`) holds them to that.
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
import { queue } from "./queue"
import { functionEnvironment, pepper, secretsPermissions } from "./secrets"
import { table } from "./storage"

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

/** The settings every function of the app is made with; each adds its handler, timeout and memory. */
export const functionDefaults = {
  runtime: lambdaRuntime,
  nodejs: bundleSettings,
  link: [table, queue, pepper],
  environment: functionEnvironment,
  permissions: [...secretsPermissions, ...eksPermissions],
  ...(subnets.length ? { vpc: { privateSubnets: subnets, securityGroups } } : {}),
}
