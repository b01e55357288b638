/**
 * The DynamoDB table's layout, as plain data: its key attributes, the two indexes and the TTL
 * attribute. The store's adapter (`dynamo.ts`) reads and writes by these names and creates local
 * tables from them; the infrastructure (`infra/storage.ts`) declares the deployed table from them, so
 * the two cannot drift apart. Nothing imported here (infra imports it; `dynamo.ts` checks that it
 * names every index of the port).
 */
/** The table's own key attributes. */
export const TableKey = { pk: "pk", sk: "sk" } as const

/** GSI name and key attributes of each index of the port. */
export const Indexes = {
  active: { name: "gsi1", pk: "gsi1pk", sk: "gsi1sk" },
  list: { name: "gsi2", pk: "gsi2pk", sk: "gsi2sk" },
} as const satisfies Record<string, { name: string; pk: string; sk: string }>

/** The attribute DynamoDB's TTL reads (epoch seconds). */
export const TTL_ATTRIBUTE = "ttl"

/** Every key attribute of the table and its indexes (all strings). */
export const KeyAttributes = [
  TableKey.pk,
  TableKey.sk,
  ...Object.values(Indexes).flatMap((index) => [index.pk, index.sk]),
] as const
