/**
 * Bounds on every user-supplied size and count, so bad input cannot blow up storage (a DynamoDB item
 * is at most 400 KB) or a backend. Schemas in this folder enforce them; the API also caps the body.
 */
export const Limits = {
  /** DNS label: names of projects, swarms, jobs, backends, scale groups. */
  nameLength: 63,
  /** Free text such as descriptions and display names. */
  textLength: 256,
  /** Environment variables per job or swarm. */
  envCount: 128,
  envKeyLength: 128,
  envValueLength: 16 * 1024,
  /** Sum of all env keys and values. */
  envTotalBytes: 64 * 1024,
  /** argv entries in a command and the bytes of each and of all. */
  commandArgs: 256,
  commandArgLength: 16 * 1024,
  commandTotalBytes: 64 * 1024,
  /** Container image reference. */
  imageLength: 512,
  /** Tasks (shards) per job. Task items are written 25 per batch call, so this is 400 calls at most. */
  tasksPerJob: 10_000,
  /** Constraints and preferences per job. */
  constraints: 32,
  /** Attributes and labels: entries, key and value length. */
  attributes: 64,
  attributeKeyLength: 128,
  attributeValueLength: 256,
  /** Replicas per swarm. */
  replicasPerSwarm: 1024,
  /** GPUs per task or replica. */
  gpusPerTask: 64,
  /** Lines of extra `#SBATCH` options or setup commands in a Slurm backend. */
  scriptLines: 64,
  scriptLineLength: 1024,
  /** Scale groups per workers backend. */
  scaleGroups: 32,
  /** A job or swarm spec or backend config, serialised: keeps every stored item far below 400 KB. */
  specBytes: 128 * 1024,
  /** Request body, bytes. */
  bodyBytes: 512 * 1024,
  /** Page size bounds for listings. */
  pageSizeDefault: 50,
  pageSizeMax: 500,
} as const
