/**
 * The configuration reference (docs/configuration.md), rendered from the same zod schemas the API
 * validates with, so the document cannot drift from the code: a test compares the committed file with
 * a fresh rendering.
 */

import { EksBackendConfig, LeptonBackendConfig, SlurmBackendConfig, WorkersBackendConfig } from "./backend"
import { JobSpec } from "./job"
import { SwarmSpec } from "./swarm"
import { z } from "./zod"

type Json = Record<string, unknown>

function typeText(s: Json): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``
  if (Array.isArray(s.enum)) return s.enum.map((v) => `\`${JSON.stringify(v)}\``).join(" | ")
  const union = (s.anyOf ?? s.oneOf) as Json[] | undefined
  if (union) return union.map(typeText).join(" | ")
  if (s.type === "array") return `${typeText((s.items as Json) ?? {})}[]`
  if (s.type === "object" && s.additionalProperties && typeof s.additionalProperties === "object")
    return `map of ${typeText(s.additionalProperties as Json)}`
  return String(s.type ?? "any")
}

function bounds(s: Json): string {
  const parts: string[] = []
  if (s.minimum !== undefined && s.maximum !== undefined) parts.push(`${s.minimum}..${s.maximum}`)
  else if (s.maximum !== undefined) parts.push(`≤ ${s.maximum}`)
  else if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`)
  if (s.maxLength !== undefined) parts.push(`≤ ${s.maxLength} chars`)
  if (s.maxItems !== undefined) parts.push(`≤ ${s.maxItems} items`)
  return parts.join(", ")
}

const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ")

/** Rows for every field, nested objects flattened to dotted names (`container.launcher`). */
function rows(schema: Json, prefix = ""): string[] {
  const properties = (schema.properties ?? {}) as Record<string, Json>
  const required = new Set((schema.required as string[] | undefined) ?? [])
  return Object.entries(properties).flatMap(([name, prop]) => {
    const field = `${prefix}${name}`
    const def =
      prop.default !== undefined
        ? `\`${JSON.stringify(prop.default)}\``
        : required.has(name)
          ? "**required**"
          : ""
    const nested = prop.type === "object" && prop.properties ? prop : undefined
    const items =
      prop.type === "array" && (prop.items as Json | undefined)?.properties ? (prop.items as Json) : undefined
    const line = `| \`${field}\` | ${nested ? "object" : items ? "object[]" : cell(typeText(prop))} | ${def} | ${cell(bounds(prop))} | ${cell(String(prop.description ?? ""))} |`
    return [line, ...(nested ? rows(nested, `${field}.`) : items ? rows(items, `${field}[].`) : [])]
  })
}

function table(schema: z.ZodType): string {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Json
  return ["| field | type | default | bounds | description |", "|---|---|---|---|---|", ...rows(json)].join(
    "\n",
  )
}

export function renderConfigReference(): string {
  const backends: [string, z.ZodType, string][] = [
    [
      "slurm",
      SlurmBackendConfig,
      "A Slurm cluster reached over SSH through its login node (`sbatch`, `squeue`, `sacct`, `scancel`).",
    ],
    [
      "lepton",
      LeptonBackendConfig,
      "An NVIDIA DGX Cloud Lepton workspace, through its v2 API: a deployment per swarm, a Lepton job per task attempt.",
    ],
    [
      "eks",
      EksBackendConfig,
      "An Amazon EKS cluster running Kueue: each task attempt is a suspended batch/v1 Job labelled for the LocalQueue, admitted by Kueue within its quota; each swarm a Deployment and a Service.",
    ],
    [
      "workers",
      WorkersBackendConfig,
      "Worker agents that register with swarmplane and pull their work; swarmplane schedules and autoscales them.",
    ],
  ]
  return [
    "# Configuration reference",
    "",
    "<!-- Generated from the zod schemas in packages/core/src/model by `npm run docs`. Do not edit by hand. -->",
    "",
    "Every object below is sent as JSON to the API (`POST /v1/backends`, `POST /v1/swarms`, `POST /v1/jobs`).",
    "Unknown fields are refused, and every bound is enforced before anything is written.",
    "",
    "## Backends",
    "",
    '`POST /v1/backends` takes `{ "id": "<name>", "config": { "type": ..., ... } }`. `type` selects the fields.',
    "Secrets are never part of a config: fields ending in `Secret` name a secret that the deployment holds",
    "(SSM Parameter Store under `/swarmplane/<stage>/secrets/<project>/<name>` when deployed; a file",
    "`<data dir>/secrets/<project>/<name>` on the local control plane). A config can only name its own project's secrets.",
    "",
    ...backends.flatMap(([type, schema, text]) => [`### \`${type}\``, "", text, "", table(schema), ""]),
    "## Swarm",
    "",
    "`POST /v1/swarms` creates the swarm, or updates the one with that name.",
    "",
    table(SwarmSpec),
    "",
    "## Job",
    "",
    "`POST /v1/jobs`. Every task gets `SHARD_ID` (its index) and `NSHARDS` (the number of tasks); with `swarm`, also `SWARM_ENDPOINT`.",
    "",
    table(JobSpec),
    "",
    "## Local control plane (`npm start`)",
    "",
    "| variable | default | meaning |",
    "|---|---|---|",
    "| `SWARMPLANE_DATA_DIR` | `.swarmplane` | State (the journal `store.jsonl`, or `dynamo/` on dynalite), secrets and the admin key. A restart keeps it. |",
    "| `SWARMPLANE_LOCAL_STORE` | `journal` | `journal`: state in `store.jsonl` in the data folder, kept in this process (each write appended before it is acknowledged; replayed on start, compacted as it grows), schedule requests on an in-process queue. `dynalite`: the DynamoDB and SQS adapters, on embedded dynalite (`dynamo/`) and fauxqs. A data folder holding only dynalite state stays on dynalite unless this is set. |",
    "| `SWARMPLANE_PORT` | `8787` | API port (`0` picks a free one). |",
    "| `SWARMPLANE_HOST` | `127.0.0.1` | Address the API listens on. |",
    "| `SWARMPLANE_ADMIN_KEY` | generated | The admin key of the `default` project (at least 16 characters). |",
    "| `SWARMPLANE_CONFIG_DIR` | `~/.config/swarmplane` | Where the CLI's `config.json` is; a `local` profile is written there. |",
    "| `SWARMPLANE_LOG` | `info` | `debug`, `info`, `warn` or `error`. |",
    "| `SWARMPLANE_FAKE_LEPTON` | unset | `1` (or `npm start -- --fake-lepton`): also run a fake Lepton workspace (test/support/fake-lepton/, as a child process) with a backend `lepton` on it and its token in the secret `fake-lepton-token`, to try the Lepton backend with no account. Needs the checkout's `test/` folder (exit 2 without it). |",
    "| `SWARMPLANE_FAKE_EKS` | unset | `1` (or `npm start -- --fake-eks`): also run a fake EKS cluster with Kubernetes and Kueue (test/support/fake-kube/, as a child process; LocalQueue `swarmplane/local-queue` on a ClusterQueue of 8 CPUs, 32Gi, no GPUs) with a backend `eks` on it. The fake accepts only its own IAM user, new on each start: when the environment has no AWS credentials (no `AWS_*` credential variables, no `~/.aws/credentials` or `~/.aws/config`), the plane puts that user's key pair in its own `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` (never printed; not passed to workers); credentials of your own are kept, and the backend on the fake then fails to authenticate (the log says so). Needs the checkout's `test/` folder (exit 2 without it). |",
    "",
    "On its first start it registers the `local` backend: worker agents on this machine, which the autoscaler starts as work arrives (up to one per core) and stops after 60 s idle. Each offers 4 CPUs per core of the machine and 80% of its memory. They share the machine, as its processes do, and what a laptop runs (echo servers, routers, shards waiting on an endpoint) rarely keeps a core busy, so placing by whole cores would queue work that could run side by side. By default a task asks for 1 CPU and 1024 MiB, a replica for 1 CPU and 4096 MiB, and a router for 0.1 CPU and 128 MiB; ask for more where work needs it. A data folder made by an older version keeps the `local` config it was made with; registering `local` again (POST /v1/backends) replaces it.",
    "",
    "## Deployed (Lambda)",
    "",
    "| variable | default | meaning |",
    "|---|---|---|",
    "| `SWARMPLANE_STAGE` | `dev` | Stage name (set by the infra code). |",
    "| `SWARMPLANE_SECRETS_PREFIX` | `/swarmplane/<stage>/secrets` | SSM path under which backend secrets are read. |",
    "| `SWARMPLANE_OPERATOR_PROJECT` | `default` | Project whose admin keys may create projects. |",
    "| `SWARMPLANE_LOG_LEVEL` | `info` | `debug`, `info`, `warn`, `error` or `silent`; unset, the function's own log level (`AWS_LAMBDA_LOG_LEVEL`) applies. Each entry is one JSON line (`level`, `message`, `timestamp`, `service` and its fields, secret-looking ones redacted). |",
    "",
  ].join("\n")
}
