/**
 * Renders `src/openapi.ts` from delayq's OpenAPI document: one TypeScript type per schema
 * of `components.schemas`, and `Operations`, which gives each `"METHOD /path"` of the API
 * its arguments (path and query parameters, request body) and its answer.
 *
 * The client builds every request through these types, so a field the server renamed,
 * removed or made required, or a route it dropped, fails the type check; the `openapi`
 * test renders the document of a real server again and fails when the committed file
 * differs. Only the parts of JSON Schema the document uses are understood; anything else
 * is an error here rather than a silently wrong type.
 *
 * @module
 */

/** The subset of a JSON Schema object this generator reads. */
export interface Schema {
  readonly $ref?: string;
  readonly type?: string | readonly string[];
  readonly enum?: readonly string[];
  readonly oneOf?: readonly Schema[];
  readonly items?: Schema;
  readonly properties?: Readonly<Record<string, Schema>>;
  /** A map's values (an object without properties: a header map). */
  readonly additionalProperties?: Schema;
  readonly required?: readonly string[];
  readonly description?: string;
}

/** One parameter of an operation. */
export interface Parameter {
  readonly name: string;
  readonly in: string;
  readonly required?: boolean;
  readonly schema: Schema;
  readonly description?: string;
}

/** One response of an operation. */
export interface Response {
  readonly content?: Readonly<Record<string, { readonly schema?: Schema }>>;
}

/** One operation (a method of a path). */
export interface Operation {
  readonly summary?: string;
  readonly parameters?: readonly Parameter[];
  readonly requestBody?: {
    readonly required?: boolean;
    readonly content: Readonly<Record<string, { readonly schema: Schema }>>;
  };
  readonly responses: Readonly<Record<string, Response>>;
}

/** The subset of an OpenAPI 3.1 document this generator reads. */
export interface Document {
  readonly paths: Readonly<Record<string, Readonly<Record<string, Operation>>>>;
  readonly components: { readonly schemas: Readonly<Record<string, Schema>> };
}

const HEADER = `// Generated from delayq's /v1/openapi.json by tools/openapi-gen.ts: do not edit.
// \`npm run generate\` writes it again from a server it starts; the openapi test fails when
// this file differs from what the server's document gives. It is long because it holds one
// type for every schema of the document.
`;

/** The TypeScript source of `src/openapi.ts` for `doc`. */
export function render(doc: Document): string {
  const out: string[] = [HEADER];
  for (const name of Object.keys(doc.components.schemas).sort()) {
    const schema = doc.components.schemas[name] as Schema;
    const decl =
      schema.properties !== undefined
        ? `export interface ${name} ${objectType(schema, "")}`
        : `export type ${name} = ${typeOf(schema, "")};`;
    out.push(`${comment(schema.description, "")}${decl}\n`);
  }
  out.push(operations(doc));
  return out.join("\n");
}

/** The `"METHOD /path"` keys of `doc`'s operations, sorted. */
export function routes(doc: Document): string[] {
  const keys: string[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const method of Object.keys(methods)) {
      keys.push(`${method.toUpperCase()} ${path}`);
    }
  }
  return keys.sort();
}

function operations(doc: Document): string {
  const lines = [
    "/** Every operation of the API by `\"METHOD /path\"`: its arguments and its answer. */",
    "export interface Operations {",
  ];
  for (const key of routes(doc)) {
    const [method, path] = key.split(" ") as [string, string];
    const op = (doc.paths[path] as Record<string, Operation>)[method.toLowerCase()] as Operation;
    if (op.summary !== undefined) {
      lines.push(`  /** ${oneLine(op.summary)} */`);
    }
    lines.push(`  ${JSON.stringify(key)}: {`);
    lines.push(`    args: ${args(op, "    ")};`);
    lines.push(`    answer: ${answer(op)};`);
    lines.push("  };");
  }
  lines.push("}", "");
  lines.push("/** Every `\"METHOD /path\"` of the API. */");
  lines.push("export type Route = keyof Operations;");
  lines.push("");
  return lines.join("\n");
}

function args(op: Operation, indent: string): string {
  const fields: string[] = [];
  for (const where of ["path", "query"]) {
    const params = (op.parameters ?? []).filter((p) => p.in === where);
    if (params.length === 0) {
      continue;
    }
    const inner = params
      .map((p) => `${indent}    ${p.name}${p.required === true ? "" : "?"}: ${typeOf(p.schema, indent + "    ")};`)
      .join("\n");
    const optional = params.every((p) => p.required !== true) ? "?" : "";
    fields.push(`${indent}  ${where}${optional}: {\n${inner}\n${indent}  };`);
  }
  const body = op.requestBody;
  if (body !== undefined) {
    const schema = json(body.content)?.schema;
    if (schema === undefined) {
      throw new Error("a request body without an application/json schema");
    }
    fields.push(`${indent}  body${body.required === true ? "" : "?"}: ${typeOf(schema, indent + "  ")};`);
  }
  return fields.length === 0 ? "Record<string, never>" : `{\n${fields.join("\n")}\n${indent}}`;
}

function answer(op: Operation): string {
  const types = new Set<string>();
  for (const [status, response] of Object.entries(op.responses)) {
    if (!status.startsWith("2")) {
      continue;
    }
    const schema = response.content === undefined ? undefined : json(response.content)?.schema;
    types.add(schema === undefined ? "undefined" : typeOf(schema, ""));
  }
  if (types.size === 0) {
    throw new Error("an operation without a success response");
  }
  return [...types].join(" | ");
}

function json<T>(content: Readonly<Record<string, T>>): T | undefined {
  return content["application/json"];
}

function objectType(schema: Schema, indent: string): string {
  const required = new Set(schema.required ?? []);
  const lines = ["{"];
  for (const name of Object.keys(schema.properties ?? {}).sort()) {
    const prop = (schema.properties as Record<string, Schema>)[name] as Schema;
    const doc = prop.description ?? prop.oneOf?.find((s) => s.description !== undefined)?.description;
    lines.push(comment(doc, indent + "  ").trimEnd());
    const optional = required.has(name) ? "" : "?";
    lines.push(`${indent}  ${name}${optional}: ${typeOf(prop, indent + "  ")};`);
  }
  lines.push(`${indent}}`);
  return lines.filter((l) => l !== "").join("\n");
}

function typeOf(schema: Schema, indent: string): string {
  if (schema.$ref !== undefined) {
    const prefix = "#/components/schemas/";
    if (!schema.$ref.startsWith(prefix)) {
      throw new Error(`a $ref outside the components: ${schema.$ref}`);
    }
    return schema.$ref.slice(prefix.length);
  }
  if (schema.oneOf !== undefined) {
    return schema.oneOf.map((s) => typeOf(s, indent)).join(" | ");
  }
  if (schema.enum !== undefined) {
    return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  }
  const types = schema.type === undefined ? [] : typeof schema.type === "string" ? [schema.type] : schema.type;
  if (types.length === 0) {
    throw new Error(`a schema without a type: ${JSON.stringify(schema)}`);
  }
  return types.map((t) => primitive(t, schema, indent)).join(" | ");
}

function primitive(type: string, schema: Schema, indent: string): string {
  switch (type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array": {
      if (schema.items === undefined) {
        throw new Error("an array without items");
      }
      const item = typeOf(schema.items, indent);
      return item.includes(" ") ? `Array<${item}>` : `${item}[]`;
    }
    case "object":
      if (schema.properties === undefined && schema.additionalProperties !== undefined) {
        return `Record<string, ${typeOf(schema.additionalProperties, indent)}>`;
      }
      if (schema.properties === undefined) {
        throw new Error("an object without properties");
      }
      return objectType(schema, indent);
    default:
      throw new Error(`a type this generator does not know: ${type}`);
  }
}

function comment(text: string | undefined, indent: string): string {
  if (text === undefined || text.trim() === "") {
    return "";
  }
  const lines = text.replaceAll("*/", "*\\/").split("\n");
  if (lines.length === 1) {
    return `${indent}/** ${lines[0]} */\n`;
  }
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function oneLine(text: string): string {
  return text.replaceAll("*/", "*\\/").replaceAll("\n", " ");
}
