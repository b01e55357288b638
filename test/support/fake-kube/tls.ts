/**
 * The fake cluster's certificates: a CA made at start and a server certificate it signs for
 * `127.0.0.1` and `localhost`, made with the `openssl` CLI in a temporary directory (node:crypto can
 * make keys but not certificates; EC P-256 keys, as they are quick to make). DescribeCluster returns
 * the CA PEM, so a client that trusts only that CA reaches the API, and one that does not is refused,
 * as with a real EKS endpoint.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface ClusterTls {
  /** The CA certificate, PEM: what `certificateAuthority.data` carries (base64 of this). */
  caPem: string
  /** The API server's key and certificate, PEM. */
  key: string
  cert: string
}

const newKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes".split(" ")

export function makeClusterTls(clusterName: string): ClusterTls {
  const dir = mkdtempSync(join(tmpdir(), "fake-kube-tls-"))
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })
  try {
    openssl(
      "req",
      "-x509",
      ...newKey,
      "-days",
      "2",
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-subj",
      `/CN=fake-eks-${clusterName}-ca`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    )
    openssl("req", ...newKey, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kube-apiserver")
    writeFileSync(
      join(dir, "ext.cnf"),
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n",
    )
    openssl(
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      "ext.cnf",
      "-out",
      "server.pem",
    )
    return {
      caPem: readFileSync(join(dir, "ca.pem"), "utf8"),
      key: readFileSync(join(dir, "server.key"), "utf8"),
      cert: readFileSync(join(dir, "server.pem"), "utf8"),
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
