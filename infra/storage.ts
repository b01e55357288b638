/**
 * State: the one DynamoDB table that holds every swarmplane object (single-table design, see
 * DESIGN.md §5). The key names are a contract with `packages/core/src/store/keys.ts`.
 *
 * - `pk`/`sk`: the item's identity.
 * - `gsi1` (`gsi1pk`/`gsi1sk`): sparse "active work per backend" index read by the reconcile
 *   tick; terminal items drop `gsi1pk` so the index stays O(active).
 * - `gsi2` (`gsi2pk`/`gsi2sk`): listings by project.
 * - `ttl`: epoch seconds after which DynamoDB deletes idempotency records and old events.
 *
 * Both indexes project all attributes (stated explicitly; also the default) so a tick or a
 * listing never needs a second read per item. On-demand billing keeps idle cost at zero.
 * Point-in-time recovery is always on (the component enables it unconditionally; it costs
 * little for a control-plane-sized table); production also gets deletion protection.
 */

export const table = new sst.aws.Dynamo("State", {
  fields: {
    pk: "string",
    sk: "string",
    gsi1pk: "string",
    gsi1sk: "string",
    gsi2pk: "string",
    gsi2sk: "string",
  },
  primaryIndex: { hashKey: "pk", rangeKey: "sk" },
  globalIndexes: {
    gsi1: { hashKey: "gsi1pk", rangeKey: "gsi1sk", projection: "all" },
    gsi2: { hashKey: "gsi2pk", rangeKey: "gsi2sk", projection: "all" },
  },
  ttl: "ttl",
  deletionProtection: $app.stage === "production",
})
