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
  for (const c of children.flat()) {
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
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  const json = text ? JSON.parse(text) : null;
  if (!r.ok) throw new ApiError(r.status, json);
  return json;
}

const enc = encodeURIComponent;
const readOnly = () => config.mode === "read-only";
const fmtMs = (ms) => (ms === null || ms === undefined ? "—" : ms < 1000 ? `${ms} ms` : ms < 120000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60000)} min`);

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

// The overview: every topic with its counts; refreshed every 2 s.
async function overview() {
  const draw = async () => {
    const { topics } = await api("GET", "/v1/topics");
    const rows = topics.map((t) => el("tr", {},
      el("td", {}, el("a", { href: `#/topic/${enc(t.topic)}` }, t.topic)),
      ...STATES.map((s) => el("td", { class: "num" }, t[s])),
      el("td", { class: "num" }, fmtMs(t.oldest_overdue_ms)),
      el("td", {}, t.next_due || "—"),
      el("td", {}, t.paused ? (t.paused_until ? `until ${t.paused_until}` : "yes") : "")));
    render(
      el("h1", {}, "Topics"),
      topics.length === 0
        ? el("p", { class: "muted" }, "No topic has jobs yet.")
        : el("table", { "aria-label": "Topics" },
          el("thead", {}, el("tr", {}, el("th", {}, "topic"), ...STATES.map((s) => el("th", { class: "num" }, s)),
            el("th", { class: "num" }, "oldest overdue"), el("th", {}, "next due"), el("th", {}, "paused"))),
          el("tbody", {}, rows)),
      el("p", { class: "muted" }, "Counts come from the engine and are the same on every server; refreshed every 2 s."),
    );
  };
  await draw();
  refresh = setInterval(() => draw().catch(showError), 2000);
}

// One page of a topic's jobs in one state, with selection and bulk actions.
async function topicView(topic, params) {
  const state = params.get("state") || "ready";
  const cursor = params.get("cursor");
  const q = `/v1/topics/${enc(topic)}/jobs?state=${state}&limit=50${cursor ? `&cursor=${enc(cursor)}` : ""}`;
  const [page, stats] = await Promise.all([api("GET", q), api("GET", `/v1/topics/${enc(topic)}/stats`)]);
  const filter = el("input", { type: "search", placeholder: "id starts with…", "aria-label": "Filter by id prefix" });
  const pausing = el("div", { class: "bar" },
    el("span", { id: "paused-state" }, stats.paused ? (stats.paused_until ? `Paused until ${stats.paused_until}` : "Paused until resumed") : "Running"),
    stats.paused
      ? el("button", { type: "button", disabled: readOnly(), onclick: async () => { try { await api("POST", `/v1/topics/${enc(topic)}/resume`); toast("resumed"); route(); } catch (e) { toast(e.message); } } }, "Resume topic")
      : el("button", { type: "button", disabled: readOnly(), onclick: async () => { try { await api("POST", `/v1/topics/${enc(topic)}/pause`, {}); toast("paused"); route(); } catch (e) { toast(e.message); } } }, "Pause topic"));
  const selected = new Set();
  const tbody = el("tbody");
  const all = el("input", { type: "checkbox", "aria-label": "Select every job shown" });
  const drawRows = () => {
    const prefix = filter.value;
    const shown = page.jobs.filter((j) => j.id.startsWith(prefix));
    tbody.replaceChildren(...shown.map((j) => {
      const box = el("input", { type: "checkbox", "aria-label": `Select ${j.id}`, onchange: (e) => (e.target.checked ? selected.add(j.id) : selected.delete(j.id)) });
      box.checked = selected.has(j.id);
      return el("tr", {},
        el("td", {}, box),
        el("td", {}, el("a", { href: `#/job/${enc(topic)}/${enc(j.id)}` }, j.id)),
        el("td", {}, j.ready_at),
        el("td", { class: "num" }, `${j.attempts}/${j.max_attempts}`),
        el("td", {}, j.deadline || ""),
        el("td", {}, j.last_error || ""));
    }));
    all.checked = shown.length > 0 && shown.every((j) => selected.has(j.id));
    all.onchange = () => { for (const j of shown) all.checked ? selected.add(j.id) : selected.delete(j.id); drawRows(); };
  };
  filter.oninput = drawRows;
  const bulk = (label, action, allowed, danger) => el("button", {
    type: "button", class: danger ? "danger" : null, disabled: readOnly() || !allowed,
    onclick: async () => {
      if (selected.size === 0) return toast("Select jobs first.");
      let done = 0;
      for (const id of selected) {
        try { await action(id); done++; } catch (e) { toast(`${id}: ${e.message}`); }
      }
      toast(`${label}: ${done} of ${selected.size}`);
      route();
    },
  }, label);
  const tabs = el("div", { class: "tabs", role: "navigation", "aria-label": "States" },
    STATES.map((s) => el("a", { href: `#/topic/${enc(topic)}?state=${s}`, "aria-current": s === state ? "page" : null }, s)));
  render(
    el("h1", {}, `Topic ${topic}`), pausing, tabs,
    el("div", { class: "bar" }, filter,
      bulk("Kick", (id) => api("POST", `/v1/topics/${enc(topic)}/jobs/${enc(id)}/kick`), state === "dead"),
      bulk("Run now", (id) => api("POST", `/v1/topics/${enc(topic)}/jobs/${enc(id)}/reschedule`, { delay_ms: 0 }), state === "delayed" || state === "ready"),
      bulk("Delete", (id) => api("DELETE", `/v1/topics/${enc(topic)}/jobs/${enc(id)}`), true, true)),
    el("table", { "aria-label": `Jobs ${state}` },
      el("thead", {}, el("tr", {}, el("th", {}, all), el("th", {}, "id"), el("th", {}, "due"), el("th", { class: "num" }, "attempts"), el("th", {}, "deadline"), el("th", {}, "last error"))),
      tbody),
    page.next_cursor ? el("p", {}, el("a", { href: `#/topic/${enc(topic)}?state=${state}&cursor=${enc(page.next_cursor)}` }, "Next page")) : null,
    readOnly() ? null : pushForm(topic),
  );
  drawRows();
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
      ["priority", job.priority], ["ttr", fmtMs(job.ttr_ms)], ["back-off", JSON.stringify(job.backoff)],
      ["deadline", job.deadline || "—"], ["last error", job.last_error || "—"], ["pushed", job.created_at],
    ].map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("h2", {}, `Body (${job.encoding === "base64" ? "hex" : "text"})`),
    el("pre", { "aria-label": "Body" }, bodyText(job)),
    el("div", { class: "bar" },
      act("Kick", () => api("POST", `${base}/kick`), job.state === "dead"),
      act("Run now", () => api("POST", `${base}/reschedule`, { delay_ms: 0 }), job.state === "delayed" || job.state === "ready"),
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
