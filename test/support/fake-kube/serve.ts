/**
 * The fake EKS cluster running Kueue as a program of its own, which `SWARMPLANE_FAKE_EKS=1 npm start`
 * runs beside the local control plane (the plane knows only this command line, never the test code):
 *
 *   node --import tsx test/support/fake-kube/serve.ts
 *
 * It starts a fake cluster (index.ts) on free ports of 127.0.0.1 with a namespace, a LocalQueue on a
 * ClusterQueue of 8 CPUs, 32Gi and no GPUs, and one IAM user whose key pair is new on each start. It
 * prints one JSON line on stdout, `{ "eksUrl", "clusterName", "region", "namespace", "localQueue",
 * "accessKeyId", "secretAccessKey", "pid" }` (that line is the secret key's only copy), and serves
 * until SIGTERM or until its stdin closes (the process that started it is gone, however it ended);
 * then it stops every pod process the fake runs and exits 0. SIGINT is ignored: a Ctrl-C in the
 * terminal reaches the plane too, which stops this in its turn, after its own loops.
 */
import { randomBytes } from "node:crypto"
import { startFakeKube } from "./index"

const namespace = "swarmplane"
const localQueue = "local-queue"
const user = {
  // The shape of an AWS access key ID (AKIA and 16 upper-case letters or digits), random per start.
  accessKeyId: `AKIA${randomBytes(8).toString("hex").toUpperCase()}`,
  secretAccessKey: randomBytes(30).toString("base64url"),
  arn: "arn:aws:iam::111122223333:user/swarmplane-local",
}

const fake = await startFakeKube({
  clusterName: "fake-eks",
  region: "us-west-2",
  users: [user],
  namespaces: [namespace],
  clusterQueues: [
    {
      name: "cluster-queue",
      flavors: [{ name: "default-flavor", nominalQuota: { cpu: 8, memory: "32Gi", "nvidia.com/gpu": 0 } }],
    },
  ],
  localQueues: [{ namespace, name: localQueue, clusterQueue: "cluster-queue" }],
})

let stopping = false
const stop = () => {
  if (stopping) return
  stopping = true
  void fake.stop().finally(() => process.exit(0))
}
process.on("SIGTERM", stop)
process.on("SIGINT", () => {})
process.stdin.on("end", stop)
process.stdin.on("close", stop)
process.stdin.resume()

process.stdout.write(
  `${JSON.stringify({
    eksUrl: fake.eksUrl,
    clusterName: fake.clusterName,
    region: fake.region,
    namespace,
    localQueue,
    accessKeyId: user.accessKeyId,
    secretAccessKey: user.secretAccessKey,
    pid: process.pid,
  })}\n`,
)
