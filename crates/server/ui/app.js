// The delayq dashboard: a page of the server (`/ui`) over its own JSON API (`/v1/...`).
// No build step and no dependency: plain JavaScript, hash routes (#/, #/topic/<t>,
// #/job/<t>/<id>, #/dead, #/schedules). The bearer token, when the server asks for one, is
// kept in sessionStorage (gone with the tab), never in a URL. Every request says it comes
// from the dashboard (`x-delayq-ui: 1`), so that a server started with `--ui read-only`
// refuses its changes.
"use strict";

window.__delayqErrors = [];
window.addEventListener("error", (e) => window.__delayqErrors.push(String(e.message)));
window.addEventListener("unhandledrejection", (e) => window.__delayqErrors.push(String(e.reason)));
const consoleError = console.error.bind(console);
console.error = (...args) => { window.__delayqErrors.push(args.map(String).join(" ")); consoleError(...args); };

const TOKEN = "delayq.token";
const STATES = ["ready", "delayed", "reserved", "dead", "done"];
const main = document.getElementById("main");
let config = { mode: "on", auth: false };
let refresh = null;

function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick" || k === "onsubmit" || k === "oninput" || k === "onchange") n[k] = v;
    else if (v === true) n.setAttribute(k, "");
    else if (v !== false && v !== null && v !== undefined) n.setAttribute(k, v);
  }
  // Children nest as deep as the caller likes (a list of [dt, dd] pairs, say): an array
  // left in would show as "[object HTMLElement],…" (issue 36).
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined) n.append(c instanceof Node ? c : String(c));
  }
  return n;
}

// Shows `nodes` as the page's content (null and undefined left out).
function render(...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined));
}

function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.style.display = "block";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.style.display = "none"), 3000);
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function api(method, path, body) {
  const headers = { "x-delayq-ui": "1" };
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  // `no-store`: an answer is never the cache's, and a request never waits on the cache for
  // another of the same URL still on its way (Chromium's cache lock: a new page's
  // `GET /v1/topics` once waited behind the one a left page had sent to a slow server).
  const r = await fetch(path, { method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  const json = text ? JSON.parse(text) : null;
  if (!r.ok) throw new ApiError(r.status, json);
  return json;
}

const enc = encodeURIComponent;
const readOnly = () => config.mode === "read-only";
const fmtMs = (ms) => (ms === null || ms === undefined ? "—" : ms < 1000 ? `${ms} ms` : ms < 120000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60000)} min`);

// A back-off as a reader says it: "fixed 5.0 s", "exponential from 1.0 s, ×2, up to 60 min,
// 10 % jitter" (the server fills in every field; the defaults are the API's).
function fmtBackoff(b) {
  if (!b) return "—";
  const jitter = b.jitter ? `, ${Math.round(b.jitter * 100)} % jitter` : "";
  return b.kind === "fixed"
    ? `fixed ${fmtMs(b.base_ms)}${jitter}`
    : `exponential from ${fmtMs(b.base_ms)}, ×${b.factor ?? 2}, up to ${fmtMs(b.max_ms ?? 3600000)}${jitter}`;
}

function showError(e) {
  if (e instanceof ApiError && e.status === 401) return signIn("The server needs a token.");
  // Not an answer of the server: a fault of this page, which the browser tests look for.
  if (!(e instanceof ApiError)) window.__delayqErrors.push(String(e && e.stack || e));
  render(el("p", { class: "error", role: "alert" }, e.message));
}

function signIn(why) {
  stopRefresh();
  document.getElementById("signout").hidden = true;
  const input = el("input", { id: "token", type: "password", autocomplete: "off", required: true });
  render(
    el("h1", {}, "Sign in"),
    el("form", {
      class: "signin",
      onsubmit: (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(TOKEN, input.value);
        route();
      },
    },
      el("p", { class: "muted" }, why || "This server needs a bearer token."),
      el("label", { for: "token" }, "Token"), input,
      el("button", { type: "submit" }, "Sign in")),
  );
  input.focus();
}

function stopRefresh() {
  if (refresh) clearInterval(refresh);
  refresh = null;
}

// The charts of the overview, drawn as inline SVG from `GET /v1/series` (nothing fetched
// from elsewhere, no library). Colours live in app.css (`.s-pushed` ...), so that the
// page's content security policy needs no inline style.
const SVG_NS = "http://www.w3.org/2000/svg";
const KINDS = ["pushed", "delivered", "acked", "dead"];
const SCOPE_NOTE = "per server, since it started";

function svg(tag, attrs = {}, ...children) {
  const n = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) n.setAttribute(k, v);
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined) n.append(c instanceof Node ? c : String(c));
  return n;
}

// A lateness in ms, short: "0.42 ms", "12.3 ms", "2.5 s".
const fmtLate = (ms) => (ms === null || ms === undefined ? "—" : ms < 1 ? `${ms.toFixed(2)} ms` : ms < 1000 ? `${ms.toFixed(1)} ms` : fmtMs(Math.round(ms)));
// A histogram bound in ms: "0.5 ms", "250 ms", "2.5 s", "5 min", "1 h".
const fmtBound = (ms) => (ms < 1000 ? `${ms} ms` : ms < 60000 ? `${ms / 1000} s` : ms < 3600000 ? `${ms / 60000} min` : `${ms / 3600000} h`);

// Jobs pushed, delivered, acked and dead per minute over the last hour: one line each, the
// minutes right-aligned on a 60-minute axis (the server's start marked when it is younger).
function activityChart(minutes) {
  const W = 600, H = 180, L = 44, R = 12, T = 12, B = 26, SLOTS = 60;
  const totals = Object.fromEntries(KINDS.map((k) => [k, minutes.reduce((a, m) => a + m[k], 0)]));
  const peak = Math.max(...minutes.flatMap((m) => KINDS.map((k) => m[k])), 0);
  const top = Math.max(peak, 1);
  const x = (i) => L + ((W - L - R) * (i + SLOTS - minutes.length)) / (SLOTS - 1);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const label = `Jobs per minute over the last hour, ${SCOPE_NOTE}: ${KINDS.map((k) => `${totals[k]} ${k}`).join(", ")}; busiest minute ${peak}.`;
  const data = Object.fromEntries(KINDS.map((k) => [`data-${k}`, totals[k]]));
  return el("figure", { class: "chart" },
    svg("svg", { id: "activity-chart", role: "img", "aria-label": label, viewBox: `0 0 ${W} ${H}`, ...data },
      svg("line", { class: "grid", x1: L, x2: W - R, y1: y(top), y2: y(top) }),
      svg("line", { class: "axis", x1: L, x2: W - R, y1: y(0), y2: y(0) }),
      svg("text", { x: L - 6, y: y(top) + 4, "text-anchor": "end" }, top),
      svg("text", { x: L - 6, y: y(0) + 4, "text-anchor": "end" }, 0),
      svg("text", { x: L, y: H - 6 }, "60 min ago"),
      svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "30 min ago"),
      svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, "now"),
      minutes.length < SLOTS ? svg("line", { class: "start", x1: x(0), x2: x(0), y1: T, y2: y(0) }) : null,
      // Smaller dots for each later line, so that equal counts stay visible as rings.
      KINDS.map((k, n) => svg("g", { class: `s-${k}` },
        svg("polyline", { points: minutes.map((m, i) => `${x(i)},${y(m[k])}`).join(" ") }),
        minutes.map((m, i) => (m[k] > 0 ? svg("circle", { cx: x(i), cy: y(m[k]), r: 5 - n }) : null))))),
    el("figcaption", {}, el("ul", { class: "legend" },
      KINDS.map((k) => el("li", {}, el("span", { class: `swatch s-${k}`, "aria-hidden": "true" }), `${k} ${totals[k]}`)))));
}

// The lateness histogram of the last hour: a bar per bucket, from the first bucket with
// deliveries to the last (at least six), labelled with the buckets' upper bounds.
function latenessHistogram(bounds, window) {
  const { counts, count } = window;
  if (count === 0) return el("p", { id: "lateness-histogram", class: "muted" }, "No delivery in the last hour.");
  const used = counts.map((n, i) => (n > 0 ? i : -1)).filter((i) => i >= 0);
  let first = Math.max(0, used[0] - 1), last = Math.min(counts.length - 1, used[used.length - 1] + 1);
  while (last - first < 5) { if (last < counts.length - 1) last++; else first--; }
  const W = 600, H = 180, L = 44, R = 12, T = 12, B = 26;
  const shown = counts.slice(first, last + 1);
  const top = Math.max(...shown);
  const step = (W - L - R) / shown.length;
  const name = (i) => (i < bounds.length ? `≤ ${fmtBound(bounds[i])}` : `> ${fmtBound(bounds[bounds.length - 1])}`);
  const every = Math.ceil(60 / step);
  const label = `Lateness of the ${count} deliveries of the last hour, ${SCOPE_NOTE}: ` +
    counts.map((n, i) => (n > 0 ? `${n} ${name(i)}` : null)).filter(Boolean).join(", ") + ".";
  return el("figure", { class: "chart" },
    svg("svg", { id: "lateness-histogram", role: "img", "aria-label": label, viewBox: `0 0 ${W} ${H}`, "data-total": count },
      svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }),
      svg("text", { x: L - 6, y: T + 4, "text-anchor": "end" }, top),
      svg("text", { x: L - 6, y: H - B + 4, "text-anchor": "end" }, 0),
      shown.map((n, j) => {
        const h = ((H - T - B) * n) / top;
        return svg("g", {},
          svg("rect", { class: "bar", x: L + j * step + 2, y: H - B - h, width: Math.max(1, step - 4), height: h },
            svg("title", {}, `${n} ${name(first + j)}`)),
          j % every === 0 ? svg("text", { x: L + j * step + step / 2, y: H - 8, "text-anchor": "middle" }, name(first + j)) : null);
      })),
    el("figcaption", { class: "muted" }, "Deliveries per lateness bucket (delivery time minus due time), last hour"));
}

function latenessTable(lateness) {
  const row = (name, w) => el("tr", {}, el("th", { scope: "row" }, name),
    el("td", { class: "num" }, w.count), ...["p50_ms", "p90_ms", "p99_ms", "max_ms"].map((f) => el("td", { class: "num" }, fmtLate(w[f]))));
  return el("table", { "aria-label": "Lateness percentiles" },
    el("thead", {}, el("tr", {}, el("th", {}, "window"), el("th", { class: "num" }, "deliveries"),
      ...["p50", "p90", "p99", "max"].map((h) => el("th", { class: "num" }, h)))),
    el("tbody", {}, row("last minute", lateness.last_minute), row("last hour", lateness.last_hour)));
}

// The overview: every topic with its counts, then what this server did over the last hour
// and how late it delivered; refreshed every 2 s.
async function overview() {
  const draw = async () => {
    const [{ topics, unreachable = [] }, series] = await Promise.all([api("GET", "/v1/topics"), api("GET", "/v1/series")]);
    const rows = topics.map((t) => [t.topic, el("tr", {},
      el("td", {}, el("a", { href: `#/topic/${enc(t.topic)}` }, t.topic)),
      ...STATES.map((s) => el("td", { class: "num" }, t[s])),
      el("td", { class: "num" }, fmtMs(t.oldest_overdue_ms)),
      el("td", { class: "num" }, t.expired_jobs),
      el("td", {}, t.next_due || "—"),
      el("td", {}, t.paused ? (t.paused_until ? `until ${t.paused_until}` : "yes") : ""))]);
    // A topic the engine cannot reach now (a Redis Cluster primary down or hung): no counts.
    for (const name of unreachable) {
      rows.push([name, el("tr", { class: "unreachable" },
        el("td", {}, el("a", { href: `#/topic/${enc(name)}` }, name), " ",
          el("span", { class: "badge bad", title: "its primary did not answer in time lately: reserves skip it, its counts are not read" }, "unreachable")),
        el("td", { class: "muted", colspan: STATES.length + 4 }, "not reached"))]);
    }
    rows.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    render(
      el("h1", {}, "Topics"),
      rows.length === 0
        ? el("p", { class: "muted" }, "No topic has jobs yet.")
        : el("table", { "aria-label": "Topics" },
          el("thead", {}, el("tr", {}, el("th", {}, "topic"), ...STATES.map((s) => el("th", { class: "num" }, s)),
            el("th", { class: "num" }, "oldest overdue"),
            el("th", { class: "num", title: "jobs whose expiry passed before a delivery" }, "expired"),
            el("th", {}, "next due"), el("th", {}, "paused"))),
          el("tbody", {}, rows.map(([, row]) => row))),
      el("p", { class: "muted" }, "Counts come from the engine and are the same on every server; refreshed every 2 s."),
      el("h2", {}, "Last hour ", el("span", { class: "note" }, `(${SCOPE_NOTE})`)),
      el("p", { class: "muted" }, `What this server did since ${series.since}: other servers count their own, and a restart starts again at zero.`),
      el("div", { class: "charts" },
        el("section", { "aria-label": "Jobs per minute" }, el("h3", {}, "Jobs per minute"), activityChart(series.minutes)),
        el("section", { "aria-label": "Lateness" }, el("h3", {}, "Lateness"), latenessTable(series.lateness),
          latenessHistogram(series.lateness.bounds_ms, series.lateness.last_hour))),
    );
  };
  await draw();
  // One draw at a time: while the server is slow to answer (a Redis Cluster primary that
  // stopped answering holds a topic's counts up to the response timeout), a refresh every
  // 2 s regardless piled up requests until the browser's connections to the server were all
  // taken, and even a new page load of the dashboard waited behind them (issue 37).
  let drawing = false;
  refresh = setInterval(() => {
    if (drawing) return;
    drawing = true;
    draw().catch(showError).finally(() => { drawing = false; });
  }, 2000);
}

// What an action may touch, by state (the server's bulk endpoint says the same).
const ACTIONS = [
  { label: "Kick", action: "kick", states: ["dead"] },
  { label: "Run now", action: "run_now", states: ["delayed"] },
  { label: "Bury", action: "bury", states: ["delayed", "ready"] },
  { label: "Delete", action: "delete", states: STATES, danger: true },
];

// One page of a topic's jobs in one state, filtered by id prefix on the server, with
// selection (one, many, or all that match) and bulk actions through `POST …/bulk`.
async function topicView(topic, params) {
  const state = params.get("state") || "ready";
  const base = `/v1/topics/${enc(topic)}`;
  let prefix = params.get("prefix") || "";
  let cursor = params.get("cursor");
  const stats = await api("GET", `${base}/stats`);
  const filter = el("input", { type: "search", value: prefix, placeholder: "id starts with…", "aria-label": "Filter by id prefix" });
  const pausing = el("div", { class: "bar" },
    el("span", { id: "paused-state" }, stats.paused ? (stats.paused_until ? `Paused until ${stats.paused_until}` : "Paused until resumed") : "Running"),
    stats.paused
      ? el("button", { type: "button", disabled: readOnly(), onclick: async () => { try { await api("POST", `${base}/resume`); toast("resumed"); route(); } catch (e) { toast(e.message); } } }, "Resume topic")
      : el("button", { type: "button", disabled: readOnly(), onclick: async () => { try { await api("POST", `${base}/pause`, {}); toast("paused"); route(); } catch (e) { toast(e.message); } } }, "Pause topic"));
  const selected = new Set();
  let allMatching = false;
  let page = { jobs: [] };
  const tbody = el("tbody");
  const all = el("input", { type: "checkbox", "aria-label": "Select every job shown" });
  const table = el("table", { "aria-label": `Jobs ${state}` },
    el("thead", {}, el("tr", {}, el("th", {}, all), el("th", {}, "id"), el("th", {}, "due"), el("th", { class: "num" }, "attempts"), el("th", {}, "deadline"), el("th", {}, "last error"))),
    tbody);
  const status = el("span", { id: "selection", role: "status", class: "muted" });
  const selectAll = el("button", { type: "button", id: "select-all" }, "Select all that match");
  const pager = el("p", { id: "pager" });
  const total = stats[state];
  const link = (c) => `#/topic/${enc(topic)}?state=${state}${prefix ? `&prefix=${enc(prefix)}` : ""}${c ? `&cursor=${enc(c)}` : ""}`;

  // How many match, when the page knows: every job of the state without a filter, the
  // jobs shown when the first page holds every match.
  const matching = () => (!prefix ? total : !cursor && !page.next_cursor ? page.jobs.length : null);
  const drawStatus = () => {
    const n = matching();
    selectAll.textContent = n === null ? `Select all that match “${prefix}”` : `Select all ${n} that match`;
    selectAll.disabled = page.jobs.length === 0;
    status.textContent = allMatching
      ? `All ${n === null ? "" : `${n} `}jobs ${state}${prefix ? ` whose id starts with “${prefix}”` : ""} are selected.`
      : selected.size ? `${selected.size} selected.` : "";
  };
  const drawRows = () => {
    tbody.replaceChildren(...page.jobs.map((j) => {
      const box = el("input", { type: "checkbox", "aria-label": `Select ${j.id}`, onchange: (e) => { allMatching = false; e.target.checked ? selected.add(j.id) : selected.delete(j.id); drawRows(); } });
      box.checked = allMatching || selected.has(j.id);
      return el("tr", {},
        el("td", {}, box),
        el("td", {}, el("a", { href: `#/job/${enc(topic)}/${enc(j.id)}` }, j.id)),
        el("td", {}, j.ready_at),
        el("td", { class: "num" }, `${j.attempts}/${j.max_attempts}`),
        el("td", {}, j.deadline || ""),
        el("td", {}, j.last_error || ""));
    }));
    all.checked = page.jobs.length > 0 && (allMatching || page.jobs.every((j) => selected.has(j.id)));
    all.onchange = () => {
      allMatching = false;
      for (const j of page.jobs) all.checked ? selected.add(j.id) : selected.delete(j.id);
      drawRows();
    };
    pager.replaceChildren(...[
      page.next_cursor ? el("a", { href: link(page.next_cursor) }, "Next page") : null,
      page.scanned !== undefined ? el("span", { class: "muted" }, ` (${page.scanned} jobs looked at for this page)`) : null,
    ].filter(Boolean));
    drawStatus();
  };
  // Asks the server for the page (the filter applies to the whole state, not to what is shown).
  const load = async () => {
    const q = `${base}/jobs?state=${state}&limit=50${prefix ? `&prefix=${enc(prefix)}` : ""}${cursor ? `&cursor=${enc(cursor)}` : ""}`;
    page = await api("GET", q);
    table.dataset.prefix = prefix;
    drawRows();
  };
  let typing = null;
  filter.oninput = () => {
    clearTimeout(typing);
    typing = setTimeout(async () => {
      prefix = filter.value;
      cursor = null;
      selected.clear();
      allMatching = false;
      history.replaceState(null, "", link(null));
      try { await load(); } catch (e) { toast(e.message); }
    }, 300);
  };
  selectAll.onclick = () => { allMatching = true; selected.clear(); drawRows(); };

  // Acts through the bulk endpoint: the selected ids, or every job that matches, request
  // after request while the server says more remain.
  const run = async ({ label, action }) => {
    if (!allMatching && selected.size === 0) return toast("Select jobs first.");
    let done = 0, failed = 0, first = null;
    let req = allMatching ? { action, state, prefix: prefix || undefined } : { action, ids: [...selected] };
    if (action === "bury") req.reason = "buried from the dashboard";
    try {
      for (let round = 0; round < 1000; round++) {
        const r = await api("POST", `${base}/bulk`, req);
        done += r.done; failed += r.failed;
        first = first || (r.failures[0] && `${r.failures[0].id}: ${r.failures[0].message}`);
        if (!r.more) break;
        req = { ...req, cursor: r.next_cursor };
      }
      toast(`${label}: ${done} done${failed ? `, ${failed} failed (${first})` : ""}`);
    } catch (e) {
      toast(`${label}: ${done} done, then ${e.message}`);
    }
    route();
  };
  const buttons = ACTIONS.map((a) => el("button", {
    type: "button", class: a.danger ? "danger" : null, disabled: readOnly() || !a.states.includes(state),
    onclick: () => run(a),
  }, a.label));
  const tabs = el("div", { class: "tabs", role: "navigation", "aria-label": "States" },
    STATES.map((s) => el("a", { href: `#/topic/${enc(topic)}?state=${s}`, "aria-current": s === state ? "page" : null }, s)));
  render(
    el("h1", {}, `Topic ${topic}`), pausing, tabs,
    el("div", { class: "bar" }, filter, selectAll, buttons, status),
    table, pager,
    readOnly() ? null : pushForm(topic),
  );
  await load();
}

function pushForm(topic) {
  const body = el("textarea", { id: "push-body", rows: 3, cols: 60 });
  const id = el("input", { id: "push-id", placeholder: "generated when empty" });
  const delay = el("input", { id: "push-delay", type: "number", min: 0, value: 0 });
  return el("form", {
    onsubmit: async (ev) => {
      ev.preventDefault();
      const req = { body: body.value, delay_ms: Number(delay.value) };
      if (id.value) req.id = id.value;
      try {
        const r = await api("POST", `/v1/topics/${enc(topic)}/jobs`, req);
        toast(`pushed ${r.id} (${r.state})`);
        route();
      } catch (e) { toast(e.message); }
    },
  },
    el("h2", {}, "Push a job"),
    el("div", { class: "bar" },
      el("label", { for: "push-body" }, "Body"), body,
      el("label", { for: "push-id" }, "Id"), id,
      el("label", { for: "push-delay" }, "Delay (ms)"), delay,
      el("button", { type: "submit" }, "Push")));
}

function bodyText(job) {
  if (job.encoding === "base64") {
    const bytes = atob(job.body);
    return Array.from(bytes, (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join(" ");
  }
  try { return JSON.stringify(JSON.parse(job.body), null, 2); } catch { return job.body; }
}

async function jobView(topic, id) {
  const job = await api("GET", `/v1/topics/${enc(topic)}/jobs/${enc(id)}`);
  const act = (label, fn, allowed, danger) => el("button", {
    type: "button", class: danger ? "danger" : null, disabled: readOnly() || !allowed,
    onclick: async () => { try { await fn(); toast(`${label}: done`); route(); } catch (e) { toast(e.message); } },
  }, label);
  const base = `/v1/topics/${enc(topic)}/jobs/${enc(id)}`;
  render(
    el("h1", {}, `Job ${id}`),
    el("p", {}, el("a", { href: `#/topic/${enc(topic)}?state=${job.state}` }, `← ${topic}, ${job.state}`)),
    el("dl", {}, [
      ["state", job.state], ["due", job.ready_at], ["attempts", `${job.attempts} of ${job.max_attempts}`],
      ["priority", job.priority], ["ttr", fmtMs(job.ttr_ms)], ["back-off", fmtBackoff(job.backoff)],
      ["deadline", job.deadline || "—"], ["last error", job.last_error || "—"], ["pushed", job.created_at],
      ["expires", job.expires_at ? `${job.expires_at} (then ${job.on_expire})` : "—"],
    ].map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("h2", {}, `Body (${job.encoding === "base64" ? "hex" : "text"})`),
    el("pre", { "aria-label": "Body" }, bodyText(job)),
    el("div", { class: "bar" },
      act("Kick", () => api("POST", `${base}/kick`), job.state === "dead"),
      act("Run now", () => api("POST", `${base}/reschedule`, { delay_ms: 0 }), job.state === "delayed" || job.state === "ready"),
      act("Bury", () => api("POST", `${base}/archive`, { reason: "buried from the dashboard" }), job.state === "delayed" || job.state === "ready"),
      act("Delete", async () => { await api("DELETE", base); location.hash = `#/topic/${enc(topic)}?state=${job.state}`; }, true, true)),
  );
}

async function deadView() {
  const { topics } = await api("GET", "/v1/topics");
  const parts = [el("h1", {}, "Dead letters")];
  for (const t of topics.filter((t) => t.dead > 0)) {
    const page = await api("GET", `/v1/topics/${enc(t.topic)}/jobs?state=dead&limit=20`);
    parts.push(el("h2", {}, el("a", { href: `#/topic/${enc(t.topic)}?state=dead` }, t.topic), ` (${t.dead})`),
      el("div", { class: "bar" }, el("button", {
        type: "button", disabled: readOnly(),
        onclick: async () => { const r = await api("POST", `/v1/topics/${enc(t.topic)}/kick`); toast(`kicked ${r.count}`); route(); },
      }, `Kick all in ${t.topic}`)),
      el("table", { "aria-label": `Dead jobs of ${t.topic}` },
        el("thead", {}, el("tr", {}, el("th", {}, "id"), el("th", {}, "died"), el("th", { class: "num" }, "attempts"), el("th", {}, "reason"))),
        el("tbody", {}, page.jobs.map((j) => el("tr", {},
          el("td", {}, el("a", { href: `#/job/${enc(t.topic)}/${enc(j.id)}` }, j.id)),
          el("td", {}, j.deadline || ""), el("td", { class: "num" }, j.attempts), el("td", {}, j.last_error || ""))))));
  }
  if (parts.length === 1) parts.push(el("p", { class: "muted" }, "No dead job in any topic."));
  render(...parts);
}

async function schedulesView() {
  const { schedules } = await api("GET", "/v1/schedules");
  render(
    el("h1", {}, "Schedules"),
    schedules.length === 0 ? el("p", { class: "muted" }, "No schedule.") :
      el("table", { "aria-label": "Schedules" },
        el("thead", {}, el("tr", {}, ["name", "cron", "time zone", "topic", "misfire", "next fire"].map((h) => el("th", {}, h)))),
        el("tbody", {}, schedules.map((s) => el("tr", {},
          el("td", {}, s.name), el("td", {}, el("code", {}, s.cron)), el("td", {}, s.time_zone),
          el("td", {}, el("a", { href: `#/topic/${enc(s.topic)}` }, s.topic)), el("td", {}, s.misfire),
          el("td", {}, s.next_fire || "ended"))))));
}

async function route() {
  stopRefresh();
  if (config.auth && !sessionStorage.getItem(TOKEN)) return signIn();
  document.getElementById("signout").hidden = !config.auth;
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "topic" && parts[1]) await topicView(parts[1], params);
    else if (parts[0] === "job" && parts[1] && parts[2]) await jobView(parts[1], parts.slice(2).join("/"));
    else if (parts[0] === "dead") await deadView();
    else if (parts[0] === "schedules") await schedulesView();
    else await overview();
  } catch (e) {
    showError(e);
  }
}

async function start() {
  const r = await fetch("/ui/config.json");
  config = await r.json();
  document.getElementById("mode").textContent = readOnly() ? "read-only" : "";
  document.getElementById("signout").onclick = () => { sessionStorage.removeItem(TOKEN); signIn("Signed out."); };
  window.addEventListener("hashchange", route);
  await route();
}

start().catch(showError);
