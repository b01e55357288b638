/**
 * How each domyn-swarm `backend:` field of a swarm file maps onto swarmplane (docs/cli.md has the same
 * table): onto `serving.<type>` options, onto the swarm's own fields, onto the registered backend's
 * config (an error that says where it goes, or for Lepton a value `up` checks against the backend it
 * runs on), refused because swarmplane cannot honour it, or ignored because swarmplane does that itself.
 */

export const ServingTypes = ["slurm", "lepton", "eks", "workers"] as const
export type ServingType = (typeof ServingTypes)[number]

/** Lepton backend config fields a domyn-swarm file may name, checked by `backend-fields.ts`. */
export const BackendFields = [
  "workspaceId",
  "nodeGroup",
  "mounts",
  "endpointTokenSecret",
  "imagePullSecrets",
] as const
export type BackendField = (typeof BackendFields)[number]

export type Rule =
  /** → `serving.<type>.<field>` */
  | { serving: string }
  /** → the swarm's own `image` (when it names none) or `env` (merged) */
  | { top: "image" | "env" }
  /** set on the registered backend instead: an error naming the backend field */
  | { backend: string }
  /** kept on the registered backend; `up` checks the file's value against the backend it runs on */
  | { matches: BackendField }
  /** swarmplane cannot honour a value other than `accepts` (empty: domyn's default): an error saying why */
  | { refused: string; accepts?: "empty" }
  /** swarmplane does this itself: a warning */
  | { ignored: string }
  /** an object whose fields have their own rules */
  | { nested: Record<string, Rule> }

const nginx = { ignored: "swarmplane's router replaces domyn-swarm's nginx load balancer" }
const ray = {
  ignored:
    "a replica larger than a node spans nodes (gpus_per_replica over gpus_per_node: serving.slurm.nodesPerReplica); the server starts on the first, and your command starts Ray across SLURM_JOB_NODELIST",
}
const watchdog = {
  ignored:
    "swarmplane watches replicas itself: one that exits is restarted, one that keeps failing before it is ready fails the swarm with the reason",
}
const scripts = { ignored: "swarmplane writes its own job scripts" }

const slurm: Record<string, Rule> = {
  partition: { serving: "partition" },
  time_limit: { serving: "timeLimit" },
  timeLimit: { serving: "timeLimit" },
  router_port: { serving: "routerPort" },
  routerPort: { serving: "routerPort" },
  account: { backend: "`account`" },
  qos: { backend: "`qos`" },
  modules: { backend: "`setup` (one `module load NAME` line each)" },
  preamble: { backend: "`extraSbatch` or `setup`" },
  exclude_nodes: { backend: "`extraSbatch` (`--exclude=NODES`)" },
  node_list: { backend: "`extraSbatch` (`--nodelist=NODES`)" },
  mail_user: { backend: "`extraSbatch` (`--mail-user=ADDRESS`)" },
  requeue: { ignored: "swarmplane restarts lost replicas itself" },
  env: { top: "env" },
  mounts: {
    backend:
      "`container.extraArgs` (for apptainer `--bind SRC:DST`, for enroot `--mount SRC:DST`), or a shared file system the nodes see",
  },
  watchdog,
  requires_ray: ray,
  ray_port: ray,
  ray_dashboard_port: ray,
  template_path: scripts,
  nginx_template_path: scripts,
  endpoint: {
    nested: {
      port: { serving: "routerPort" },
      wall_time: { ignored: "the router runs with the replicas' time limit (time_limit)" },
      cpus_per_task: nginx,
      mem: nginx,
      threads_per_core: nginx,
      enable_proxy_buffering: nginx,
      nginx_timeout: nginx,
      nginx_worker_processes: nginx,
      nginx_upstream_keepalive: nginx,
      nginx_image: nginx,
      collector_port: nginx,
      qos: nginx,
      poll_interval: nginx,
      require_allocated_node: nginx,
      monitoring: { ignored: "swarmplane has no Prometheus sidecars" },
    },
  },
}

/** Where a domyn-swarm `job:` field goes: it configures jobs, which swarmplane takes one by one. */
const forJobs = (where: string): Rule => ({
  ignored: `job settings are not part of a swarm: ${where}`,
})

const lepton: Record<string, Rule> = {
  workspace_id: { matches: "workspaceId" },
  resource_shape: { serving: "resourceShape" },
  resourceShape: { serving: "resourceShape" },
  env: { top: "env" },
  endpoint: {
    nested: {
      resource_shape: { serving: "resourceShape" },
      image: { top: "image" },
      env: { top: "env" },
      allowed_dedicated_node_groups: { matches: "nodeGroup" },
      mounts: { matches: "mounts" },
      api_token_secret_name: { matches: "endpointTokenSecret" },
      image_pull_secrets: { matches: "imagePullSecrets" },
      allowed_nodes: {
        refused:
          "swarmplane cannot pin replicas to nodes: they run anywhere in the backend's node group (`nodeGroup`); remove it, or register a backend on a node group that holds only those nodes",
        accepts: "empty",
      },
    },
  },
  job: {
    nested: {
      image: forJobs(
        "give each job its image (swarmplane job submit --image IMAGE, or `image` in a job file)",
      ),
      env: forJobs("give each job its env (swarmplane job submit --env NAME=VALUE, or `env` in a job file)"),
      resource_shape: forJobs("jobs on a lepton backend run with its `resourceShape`"),
      allowed_dedicated_node_groups: forJobs("jobs on a lepton backend run in its `nodeGroup`"),
      allowed_nodes: forJobs(
        "swarmplane does not pin jobs to nodes; they run anywhere in the backend's `nodeGroup`",
      ),
      mounts: forJobs("jobs on a lepton backend get its `mounts`"),
      image_pull_secrets: forJobs("jobs on a lepton backend use its `imagePullSecrets`"),
    },
  },
}

/** Per type; a type without rules (`eks`, `workers`) takes its `serving.<type>` fields as written. */
export const BackendRules: Record<ServingType, Record<string, Rule> | undefined> = {
  slurm,
  lepton,
  eks: undefined,
  workers: undefined,
}
