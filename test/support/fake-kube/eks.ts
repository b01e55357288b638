/**
 * The fake EKS control-plane API (Part B.1): `GET /clusters/{name}` as the AWS REST-JSON protocol
 * serves it to `@aws-sdk/client-eks` `DescribeClusterCommand`. The cluster reports its endpoint and CA
 * only while ACTIVE (as EKS does); errors carry both the `x-amzn-ErrorType` header and a body `code`.
 * The request signature is not checked (the SDK signs with whatever static credentials it is given).
 */
import { Hono } from "hono"

export type ClusterStatus = "CREATING" | "ACTIVE" | "DELETING" | "FAILED" | "UPDATING" | "PENDING"

export interface EksState {
  name: string
  region: string
  status: ClusterStatus
  /** The Kubernetes API's https URL. */
  endpoint: string
  caPem: string
  createdAt: number
  /** The next DescribeCluster calls answer with this error instead (e.g. a 503). */
  faults: { status: 400 | 500 | 503; type: string }[]
  requests: string[]
}

function awsError(status: number, type: string, body: Record<string, unknown>): Response {
  return new Response(JSON.stringify({ ...body, code: type, __type: type }), {
    status,
    headers: {
      "content-type": "application/json",
      "x-amzn-errortype": type,
      "x-amzn-requestid": crypto.randomUUID(),
    },
  })
}

export function fakeEksApp(s: EksState): Hono {
  const app = new Hono()
  app.get("/clusters/:name", (c) => {
    const name = c.req.param("name")
    s.requests.push(`DescribeCluster ${name}`)
    const fault = s.faults.shift()
    if (fault) return awsError(fault.status, fault.type, { message: `injected ${fault.type}` })
    if (name !== s.name)
      return awsError(404, "ResourceNotFoundException", {
        message: `No cluster found for name: ${name}.`,
        clusterName: name,
      })
    const cluster: Record<string, unknown> = {
      name: s.name,
      arn: `arn:aws:eks:${s.region}:111122223333:cluster/${s.name}`,
      status: s.status,
      version: "1.31",
      platformVersion: "eks.5",
      createdAt: s.createdAt / 1000,
      roleArn: "arn:aws:iam::111122223333:role/fake-eks-cluster-role",
      accessConfig: { authenticationMode: "API_AND_CONFIG_MAP" },
      resourcesVpcConfig: { endpointPublicAccess: true, endpointPrivateAccess: false },
      kubernetesNetworkConfig: { serviceIpv4Cidr: "10.100.0.0/16", ipFamily: "ipv4" },
      tags: {},
    }
    if (s.status === "ACTIVE") {
      cluster.endpoint = s.endpoint
      cluster.certificateAuthority = { data: Buffer.from(s.caPem).toString("base64") }
      cluster.identity = {
        oidc: { issuer: `https://oidc.eks.${s.region}.amazonaws.com/id/FAKE${s.name.toUpperCase()}` },
      }
    }
    return c.json({ cluster })
  })
  app.all("*", (c) =>
    awsError(404, "UnknownOperationException", {
      message: `the fake EKS serves DescribeCluster only, not ${c.req.method} ${c.req.path}`,
    }),
  )
  return app
}
