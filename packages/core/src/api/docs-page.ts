/**
 * The `/docs` page: an HTML reference rendered on the server from the OpenAPI document, with no
 * scripts or assets from elsewhere (it works offline and behind strict networks).
 */
type Json = Record<string, unknown>

const esc = (s: unknown) =>
  String(s ?? "").replace(
    /[&<>"']/g,
    (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!,
  )

function refName(schema: Json): string | undefined {
  const ref = schema.$ref
  return typeof ref === "string" ? ref.split("/").pop() : undefined
}

function typeOf(schema: Json | undefined): string {
  if (!schema) return ""
  const ref = refName(schema)
  if (ref) return `<a href="#schema-${esc(ref)}">${esc(ref)}</a>`
  if (Array.isArray(schema.enum))
    return schema.enum.map((v) => `<code>${esc(JSON.stringify(v))}</code>`).join(" | ")
  if (schema.const !== undefined) return `<code>${esc(JSON.stringify(schema.const))}</code>`
  const union = (schema.anyOf ?? schema.oneOf) as Json[] | undefined
  if (Array.isArray(union)) return union.map((s) => typeOf(s)).join(" | ")
  if (schema.type === "array") return `${typeOf(schema.items as Json)}[]`
  if (
    schema.type === "object" &&
    schema.additionalProperties &&
    typeof schema.additionalProperties === "object"
  )
    return `map of ${typeOf(schema.additionalProperties as Json)}`
  return esc(Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.type ?? "any"))
}

function fieldsTable(schema: Json): string {
  const properties = schema.properties as Record<string, Json> | undefined
  if (!properties) return ""
  const required = new Set((schema.required as string[] | undefined) ?? [])
  const rows = Object.entries(properties)
    .map(
      ([name, prop]) =>
        `<tr><td><code>${esc(name)}</code>${required.has(name) ? " <b>*</b>" : ""}</td><td>${typeOf(prop)}</td><td>${esc(prop.description)}${
          prop.default !== undefined ? ` <i>Default ${esc(JSON.stringify(prop.default))}.</i>` : ""
        }</td></tr>`,
    )
    .join("")
  return `<table><tr><th>field</th><th>type</th><th>description</th></tr>${rows}</table>`
}

export function renderDocs(doc: Json): string {
  const info = doc.info as Json
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Json>>
  const schemas = ((doc.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>
  const ops = Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => {
      const params = ((op.parameters as Json[] | undefined) ?? [])
        .map(
          (p) =>
            `<li><code>${esc(p.name)}</code> (${esc(p.in)}) ${typeOf(p.schema as Json)} — ${esc(p.description ?? (p.schema as Json)?.description)}</li>`,
        )
        .join("")
      const body = ((op.requestBody as Json | undefined)?.content as Json | undefined)?.[
        "application/json"
      ] as Json | undefined
      const responses = Object.entries((op.responses ?? {}) as Record<string, Json>)
        .map(([status, r]) => {
          const schema = ((r.content as Json | undefined)?.["application/json"] as Json | undefined)
            ?.schema as Json | undefined
          return `<li><b>${esc(status)}</b> ${schema ? typeOf(schema) : ""} — ${esc(r.description)}</li>`
        })
        .join("")
      return `<section class="op"><h3><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>
<p>${esc(op.summary)}</p>${op.description ? `<p>${esc(op.description)}</p>` : ""}
${params ? `<h4>Parameters</h4><ul>${params}</ul>` : ""}
${body ? `<h4>Body</h4><p>${typeOf(body.schema as Json)}</p>` : ""}
<h4>Responses</h4><ul>${responses}</ul></section>`
    }),
  )
  const schemaDocs = Object.entries(schemas)
    .map(([name, schema]) => {
      const variants = (schema.oneOf ?? schema.anyOf) as Json[] | undefined
      const detail = variants
        ? `<p>One of: ${variants.map((v) => typeOf(v)).join(", ")}</p>`
        : fieldsTable(schema)
      return `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3><p>${esc(schema.description)}</p>${detail}</section>`
    })
    .join("")
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(info?.title)} API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:1000px;margin:2rem auto;padding:0 1rem;color:#1b1f24}
code{background:#f3f4f6;padding:0 .25em;border-radius:3px}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e5e7eb;padding:.3rem;text-align:left;vertical-align:top}
.op{border-top:1px solid #d0d7de;padding-top:.5rem}.m{font-weight:700;padding:0 .4em;border-radius:3px;color:#fff;background:#57606a}
.m.get{background:#0969da}.m.post{background:#1a7f37}.m.delete{background:#cf222e}</style></head>
<body><h1>${esc(info?.title)} API <small>${esc(info?.version)}</small></h1><p>${esc(info?.description)}</p>
<p>Authenticate with <code>Authorization: Bearer &lt;key&gt;</code>. Errors are <code>{"error":{"code","message","details"}}</code>.
The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</p>
<h2>Operations</h2>${ops.join("")}<h2>Schemas</h2>${schemaDocs}</body></html>`
}
