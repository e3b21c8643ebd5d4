// Runs the seed's own Zod schemas (search-zod-schemas.md, sections 2 and 3) under node with zod 3.
//
//   node check.mjs SEED.md < cases.json > verdicts.json
//
// cases.json: [{"schema": "searchResultSchema" | "searchQuerySchema", "value": <JSON>}, ...]
// verdicts.json: [{"success": bool, "issues": [{"path": "...", "message": "...", "code": "..."}]}, ...]
//
// Fix-ups, kept small and all listed here (tests/contract/test_zod_contract.py says why each is needed):
//  1. The seed imports branded id schemas (`../branded-schemas`) that it does not include: they are defined
//     here as plain strings (chunkIdSchema, fileIdSchema, entityIdSchema, communityIdSchema).
//  2. The seed's customErrorMap misses an opening quote (`{ message: 真偽値である必要があります' }`): added.
//  3. TypeScript-only syntax is removed: `import` lines, `export type ... = z.infer<...>;` lines, the
//     `export` keyword and the `: z.ZodErrorMap` annotation.
//  4. JSON has no Date or Float32Array: before parsing, ISO strings at `dateRange.start` / `dateRange.end`
//     become `new Date(...)` and a number array at `embedding` becomes a Float32Array, as a TypeScript
//     client reviving the wire form would do. Anything else (a number where a date belongs, say) is left
//     as it is, so Zod judges it.
import { readFileSync } from "node:fs";
import { z } from "zod";

const seed = readFileSync(process.argv[2], "utf8");

function schemaSource(markdown) {
  const start = markdown.indexOf("## 2. Zodスキーマ定義");
  const end = markdown.indexOf("## 4. カスタムバリデーションルール");
  if (start < 0 || end < 0) throw new Error("seed layout changed: sections 2-3 not found");
  const blocks = [...markdown.slice(start, end).matchAll(/```typescript\n([\s\S]*?)```/g)].map((m) => m[1]);
  if (blocks.length < 20) throw new Error(`expected the seed's schema blocks, found ${blocks.length}`);
  return blocks
    .join("\n")
    .split("\n")
    .filter((line) => !/^\s*import\s/.test(line) && !/^\s*\}\s*from\s/.test(line))
    .join("\n")
    .replace(/^\s*(chunkIdSchema|fileIdSchema|entityIdSchema|communityIdSchema),?\s*$/gm, "")
    .replace(/^export type [\s\S]*?;\s*$/gm, "")
    .replace(/^export /gm, "")
    .replace(/customErrorMap: z\.ZodErrorMap =/, "customErrorMap =")
    .replace("{ message: 真偽値である必要があります' }", "{ message: '真偽値である必要があります' }");
}

const names = ["searchResultSchema", "searchQuerySchema", "searchResultItemSchema"];
const factory = new Function(
  "z",
  [
    "const chunkIdSchema = z.string(), fileIdSchema = z.string(), entityIdSchema = z.string(),",
    "  communityIdSchema = z.string();",
    schemaSource(seed),
    `return { ${names.join(", ")} };`,
  ].join("\n"),
);
const schemas = factory(z);

function revive(value, key) {
  if (Array.isArray(value)) {
    if (key === "embedding" && value.every((v) => typeof v === "number")) return new Float32Array(value);
    return value.map((v) => revive(v));
  }
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      if (k === "dateRange" && v && typeof v === "object" && !Array.isArray(v)) {
        const range = {};
        for (const [dk, dv] of Object.entries(v)) range[dk] = typeof dv === "string" ? new Date(dv) : dv;
        out[k] = range;
      } else {
        out[k] = revive(v, k);
      }
    }
    return out;
  }
  return value;
}

const cases = JSON.parse(readFileSync(0, "utf8"));
const verdicts = cases.map(({ schema, value }) => {
  const result = schemas[schema].safeParse(revive(value));
  return result.success
    ? { success: true, issues: [] }
    : {
        success: false,
        issues: result.error.issues.map((i) => ({ path: i.path.join("."), message: i.message, code: i.code })),
      };
});
process.stdout.write(JSON.stringify(verdicts));
