/**
 * The HTTP transport: one typed call per operation of the API (`"METHOD /path"` of
 * {@link Operations}), over the platform's `fetch`, with the bearer token, a timeout per
 * request, and every failure turned into a {@link DelayqError}.
 *
 * @module
 */

import {
  ConnectionError,
  DelayqError,
  RequestTimeoutError,
  ResponseError,
  apiError,
} from "./errors.js";
import type { ErrorBody, Operations, Route } from "./openapi.js";

/** How a {@link Client} reaches its server. */
export interface ClientOptions {
  /**
   * The server's base URL (default `$DELAYQ_SERVER`, else `http://127.0.0.1:7070`). For an
   * `https://` server whose certificate is not signed by a public authority, start Node
   * with `NODE_EXTRA_CA_CERTS=/path/to/ca.pem` (Node's `fetch` takes no CA option).
   */
  readonly url?: string;
  /** The bearer token the server asks for (default `$DELAYQ_TOKEN`, else none). */
  readonly token?: string;
  /**
   * The longest a request may take, in ms (default 10,000); a reserve gets its long-poll
   * wait on top. Over it the call fails with {@link RequestTimeoutError}.
   */
  readonly timeoutMs?: number;
}

/** Per-call settings. */
export interface CallOptions {
  /** Aborts the call (it then rejects with the signal's reason). */
  readonly signal?: AbortSignal | undefined;
  /** This call's timeout in ms, instead of the client's. */
  readonly timeoutMs?: number | undefined;
  /** More request headers. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
}

/** The default request timeout in ms. */
export const DEFAULT_TIMEOUT_MS = 10_000;

/** The arguments of one call, as the transport reads them whatever the route. */
interface LooseArgs {
  readonly path?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly body?: unknown;
}

/** Sends the API's requests to one server. */
export class Transport {
  /** The server's base URL, without a trailing slash. */
  readonly url: string;
  /** The default timeout of a request in ms. */
  readonly timeoutMs: number;
  private readonly token: string | undefined;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? process.env["DELAYQ_SERVER"] ?? "http://127.0.0.1:7070";
    this.url = url.replace(/\/+$/, "");
    const token = options.token ?? process.env["DELAYQ_TOKEN"];
    this.token = token === "" ? undefined : token;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) {
      throw new RangeError(`timeoutMs must be a positive number of ms, not ${this.timeoutMs}`);
    }
  }

  /** Sends `route` with `args` and answers its decoded answer (`undefined` for 204). */
  async call<R extends Route>(
    route: R,
    args: Operations[R]["args"],
    options: CallOptions = {},
  ): Promise<Operations[R]["answer"]> {
    // Every route's arguments have this shape; the generated per-route types are narrower.
    const loose = args as LooseArgs;
    const [method, template] = route.split(" ") as [string, string];
    const url = this.url + expand(template, loose.path ?? {}) + query(loose.query);
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (this.token !== undefined) {
      headers["authorization"] = `Bearer ${this.token}`;
    }
    let body: string | undefined;
    if (loose.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(loose.body);
    }

    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const outer = options.signal;
    const forward = (): void => controller.abort();
    outer?.addEventListener("abort", forward, { once: true });
    try {
      if (outer?.aborted === true) {
        throw outer.reason;
      }
      const res = await fetch(url, { method, headers, body: body ?? null, signal: controller.signal });
      const text = await res.text();
      return decode(res.status, text, `${method} ${url}`) as Operations[R]["answer"];
    } catch (e) {
      if (e instanceof DelayqError) {
        throw e;
      }
      if (outer?.aborted === true) {
        throw outer.reason;
      }
      if (controller.signal.aborted) {
        throw new RequestTimeoutError(`${method} ${this.url}${template}: no answer within ${timeoutMs} ms`);
      }
      throw new ConnectionError(`cannot reach delayq at ${this.url}: ${reason(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", forward);
    }
  }
}

/** The path with its `{name}` parameters filled in, percent-encoded (a `/` in an id becomes `%2F`). */
function expand(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) {
      throw new TypeError(`missing path parameter ${name}`);
    }
    return encodeURIComponent(value);
  });
}

function query(params: LooseArgs["query"]): string {
  if (params === undefined) {
    return "";
  }
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) {
      search.set(name, String(value));
    }
  }
  const s = search.toString();
  return s === "" ? "" : `?${s}`;
}

/** The answer's JSON for a success; the typed error otherwise. */
function decode(status: number, text: string, what: string): unknown {
  if (status === 204) {
    return undefined;
  }
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    throw new ResponseError(status, `${what}: answered ${status} with a body that is not JSON: ${snippet(text)}`);
  }
  if (status >= 200 && status < 300) {
    return json;
  }
  const detail = (json as Partial<ErrorBody> | undefined)?.error;
  if (typeof detail?.code !== "string" || typeof detail.message !== "string") {
    throw new ResponseError(status, `${what}: answered ${status} without a delayq error: ${snippet(text)}`);
  }
  throw apiError(detail, status, json);
}

function snippet(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** What `fetch` says went wrong, down to the system error (`ECONNREFUSED`, a certificate error). */
function reason(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let depth = 0; cur instanceof Error && depth < 4; depth++) {
    const code = (cur as NodeJS.ErrnoException).code;
    parts.push(code !== undefined && !cur.message.includes(code) ? `${cur.message} (${code})` : cur.message);
    cur = cur.cause;
  }
  return parts.length === 0 ? String(e) : parts.join(": ");
}
