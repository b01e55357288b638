/**
 * State: the one DynamoDB table that holds every swarmplane object (single-table design, see
 * DESIGN.md §5). Its keys, indexes and TTL attribute come from the store's own layout
 * (`packages/core/src/store/table-layout.ts`), so the two cannot disagree.
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
 * little for a control-plane-sized table); production also gets deletion protection, and every stage
 * keeps the table when it is removed.
 */
import { Indexes, KeyAttributes, TableKey, TTL_ATTRIBUTE } from "../packages/core/src/store/table-layout"

const key = { hashKey: TableKey.pk, rangeKey: TableKey.sk }

export const table = new sst.aws.Dynamo("State", {
  fields: Object.fromEntries(KeyAttributes.map((name) => [name, "string" as const])),
  primaryIndex: key,
  globalIndexes: Object.fromEntries(
    Object.values(Indexes).map((index) => [
      index.name,
      { hashKey: index.pk, rangeKey: index.sk, projection: "all" as const },
    ]),
  ),
  ttl: TTL_ATTRIBUTE,
  deletionProtection: $app.stage === "production",
  transform: {
    // Kept when the stage is removed (`sst remove`), in every stage: the table is the plane's only
    // state. Delete it in the console (or with the AWS CLI) when it is really to go.
    table: (_args, opts) => {
      opts.retainOnDelete = true
    },
  },
})
