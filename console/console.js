// mqlite admin console: a client of the public Connect-JSON RPCs only.
// The token lives in this tab's sessionStorage and travels as
// `Authorization: Bearer` with every call. The DOM is built with
// textContent only: nothing the broker returns is ever parsed as markup.
"use strict";

const TOKEN_KEY = "mqlite.token";
const REFRESH_MS = 5000;
const PAGE = 20;
const QUEUE_PAGE = 50;
// The most subscriptions one filtered list shows (type to narrow it).
const LIST_LIMIT = 200;
const STATES = ["active", "locked", "deferred", "scheduled", "dead_lettered"];
const HISTORY = 60;

// ---------- small helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const $ = (sel, root) => (root || document).querySelector(sel);

function fmtAge(ms) {
  if (!ms || ms < 0) return "—";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return isNaN(d) ? String(ms) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function fmtDuration(ms) {
  return ms > 0 ? fmtAge(ms) : "none";
}

function b64ToBytes(b64) {
  const bin = atob(b64 || "");
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToB64(bytes) {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(i.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + " " + ascii);
  }
  return lines.join("\n");
}

function asText(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (_) {
    return null;
  }
}

// `key=value` lines → properties object (values are strings, docs/http-api.md "Shapes").
function parseProps(text) {
  const props = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf("=");
    if (i <= 0) throw new Error("properties: each line is key=value (got \"" + t + "\")");
    props[t.slice(0, i).trim()] = t.slice(i + 1).trim();
  }
  return props;
}

function randomId() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// ---------- the API ----------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  toString() {
    return this.status ? `${this.status} ${this.code}: ${this.message}` : this.message;
  }
}

async function rpc(name, body) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  let res;
  try {
    res = await fetch("/mqlite.v1." + name, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
      body: JSON.stringify(body || {}),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "network", "the broker did not answer: " + e.message);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : {};
  } catch (_) {
    throw new ApiError(res.status, "bad_response", text.slice(0, 200));
  }
  if (!res.ok) {
    const err = new ApiError(res.status, json.code || "error", json.message || res.statusText);
    if (res.status === 401 && name !== "AdminService/ListQueues") signOut(explain(err));
    throw err;
  }
  return json;
}

function explain(err) {
  if (err.status === 401) return "The broker refused this token (401 unauthenticated). Check it and sign in again.";
  if (err.status === 403)
    return "This credential lacks the manage permission (403 permission_denied). Use an administrator token or a manage key.";
  return String(err);
}

// Runs `fn`, showing its error in `slot` (an element) and clearing it on success.
async function guarded(slot, fn) {
  if (slot) slot.textContent = "";
  try {
    return await fn();
  } catch (e) {
    if (slot) slot.textContent = e instanceof ApiError ? explain(e) : String(e.message || e);
    return undefined;
  }
}

// ---------- session ----------

let timer = null;

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  stopRefresh();
  $("#view").hidden = true;
  $("#view").replaceChildren();
  $("#nav").hidden = true;
  $("#signout").hidden = true;
  $("#broker").textContent = "";
  $("#signin").hidden = false;
  $("#signin-error").textContent = message || "";
  $("#token").value = "";
  $("#token").focus();
}

async function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await rpc("AdminService/ListQueues", {});
  } catch (e) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("#signin-error").textContent = explain(e);
    return;
  }
  $("#signin-error").textContent = "";
  showApp();
}

function showApp() {
  $("#signin").hidden = true;
  $("#nav").hidden = false;
  $("#signout").hidden = false;
  $("#view").hidden = false;
  rpc("AdminService/Status", {})
    .then((s) => ($("#broker").textContent = `v${s.version} · ${s.location}`))
    .catch(() => {});
  route();
}

function stopRefresh() {
  if (timer) clearInterval(timer);
  timer = null;
}

function every(fn) {
  stopRefresh();
  fn();
  timer = setInterval(() => {
    if (!document.hidden) fn();
  }, REFRESH_MS);
}

// ---------- routing ----------

function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) return signOut();
  stopRefresh();
  const hash = location.hash.replace(/^#/, "") || "/";
  const view = $("#view");
  view.replaceChildren();
  let current = "queues";
  if (hash.startsWith("/queue/")) {
    queueView(view, decodeURIComponent(hash.slice("/queue/".length)));
  } else if (hash === "/topics") {
    current = "topics";
    topicsView(view);
  } else if (hash === "/keys") {
    current = "keys";
    keysView(view);
  } else {
    overviewView(view);
  }
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.view === current);
    if (a.dataset.view === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// ---------- charts (inline SVG, no library) ----------

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

// A fixed-size line chart; `series` is [{name, cls, points:[numbers]}].
function drawChart(el, series, unit) {
  const W = 600, H = 160, L = 44, B = 18;
  const max = Math.max(1, ...series.flatMap((s) => s.points));
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-label": series.map((s) => `${s.name} ${s.points.at(-1) ?? 0}${unit}`).join(", ") });
  root.append(svg("line", { x1: L, y1: H - B, x2: W, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, y1: 4, x2: L, y2: H - B, class: "axis" }));
  for (const [v, y] of [[max, 12], [0, H - B]]) {
    const t = svg("text", { x: L - 4, y, "text-anchor": "end" });
    t.textContent = (Number.isInteger(v) ? v : v.toFixed(1)) + unit;
    root.append(t);
  }
  const t = svg("text", { x: W - 2, y: H - 4, "text-anchor": "end" });
  t.textContent = `last ${Math.round((HISTORY * REFRESH_MS) / 60000)} min`;
  root.append(t);
  for (const s of series) {
    if (s.points.length < 1) continue;
    const step = (W - L) / (HISTORY - 1);
    const x0 = W - (s.points.length - 1) * step;
    const pts = s.points.map((v, i) => `${(x0 + i * step).toFixed(1)},${(H - B - (v / max) * (H - B - 8)).toFixed(1)}`);
    root.append(svg("polyline", { points: pts.join(" "), class: s.cls }));
  }
  const legend = h("div", { class: "legend" },
    series.map((s) => h("span", { class: s.cls, text: `${s.name}: ${fmtNum(s.points.at(-1) ?? 0)}${unit}` })));
  el.replaceChildren(root, legend);
}

function fmtNum(v) {
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

// Samples of the Observe series kept across refreshes of the overview.
const history = { samples: [], lastRequests: null, lastAt: 0 };

function recordSample(obs) {
  const sample = { states: {}, rps: 0, errors: 0 };
  for (const st of STATES) sample.states[st] = (obs.queues || []).reduce((n, q) => n + (q[st] || 0), 0);
  const reqs = (obs.http && obs.http.requests) || [];
  const total = reqs.reduce((n, r) => n + r.count, 0);
  const errs = reqs.filter((r) => r.code !== "ok").reduce((n, r) => n + r.count, 0);
  const at = obs.sampled_at_ms;
  if (history.lastRequests && at > history.lastAt) {
    // Isolate-local counters: a different isolate may answer, so a drop is
    // a restart of the count, never a negative rate.
    const dt = (at - history.lastAt) / 1000;
    sample.rps = Math.max(0, total - history.lastRequests.total) / dt;
    sample.errors = Math.max(0, errs - history.lastRequests.errs) / dt;
  }
  history.lastRequests = { total, errs };
  history.lastAt = at;
  history.samples.push(sample);
  if (history.samples.length > HISTORY) history.samples.shift();
}

// ---------- overview ----------

function overviewView(view) {
  const err = h("p", { class: "error", role: "alert", id: "overview-error" });
  const body = h("tbody", { id: "queues-body" });
  const stateChart = h("div", { id: "chart-states" });
  const rateChart = h("div", { id: "chart-requests" });
  const summary = h("p", { class: "muted", id: "overview-summary", text: "Loading…" });
  let page = 0;
  let queues = [];
  // What the table shows: the queues whose name contains the filter, in
  // the chosen column's order; recomputed only when one of those changes,
  // so paging and typing stay fast with thousands of queues.
  let shown = [];
  const order = { key: "queue", desc: false };
  const filter = h("input", { id: "queues-filter", type: "search", placeholder: "Filter by name",
    autocomplete: "off", spellcheck: "false", "aria-label": "Filter queues by name" });
  const prev = h("button", { type: "button", class: "secondary", id: "queues-prev", text: "← Previous", disabled: true });
  const next = h("button", { type: "button", class: "secondary", id: "queues-next", text: "Next →", disabled: true });
  const pageInfo = h("span", { class: "muted", id: "queues-page" });
  const showPage = () => {
    page = Math.max(0, Math.min(page, Math.ceil(shown.length / QUEUE_PAGE) - 1));
    renderQueues(body, shown.slice(page * QUEUE_PAGE, (page + 1) * QUEUE_PAGE), queues.length > 0);
    prev.disabled = page === 0;
    next.disabled = (page + 1) * QUEUE_PAGE >= shown.length;
    pageInfo.textContent = shown.length
      ? `${page * QUEUE_PAGE + 1}–${Math.min(shown.length, (page + 1) * QUEUE_PAGE)} of ${shown.length}` +
        (shown.length < queues.length ? ` (filtered from ${queues.length})` : "") : "";
  };
  const reselect = () => {
    shown = sortRows(matching(queues, filter.value, (q) => q.queue), order, queueSortValue);
    showPage();
  };
  filter.addEventListener("input", () => { page = 0; reselect(); });
  prev.addEventListener("click", () => { page--; showPage(); });
  next.addEventListener("click", () => { page++; showPage(); });
  const headers = sortableHeaders(order, [
    ["queue", "Queue"], ["kind", "Kind", "hide-narrow"],
    ...STATES.map((s) => [s, s.replace("_", " "), "num"]),
    ["total", "Total", "num"], ["oldest", "Oldest", "num"]], () => { page = 0; reselect(); });
  const createErr = h("p", { class: "error", role: "alert" });
  const createForm = h("form", { class: "row", onsubmit: async (e) => {
      e.preventDefault();
      const name = $("#new-queue", createForm).value.trim();
      const ordering = $("#new-queue-ordering", createForm).value;
      const ok = await guarded(createErr, () =>
        rpc("AdminService/CreateQueue", { name, config: { ordering_mode: ordering } }));
      if (ok) {
        createForm.reset();
        refresh();
      }
    } },
    h("div", {}, h("label", { for: "new-queue", text: "New queue" }),
      h("input", { id: "new-queue", type: "text", required: true, autocomplete: "off" })),
    h("div", {}, h("label", { for: "new-queue-ordering", text: "Ordering" }),
      h("select", { id: "new-queue-ordering" }, ["standard", "group_fifo", "strict_fifo"].map((o) => h("option", { text: o })))),
    h("button", { type: "submit", text: "Create queue" }));
  view.append(
    h("section", { class: "card" },
      h("h1", { text: "Queues" }), summary, err, filter,
      h("div", { class: "scroll" },
        h("table", { id: "queues" }, h("thead", {}, h("tr", {}, headers)), body)),
      h("div", { class: "pager" }, prev, next, pageInfo)),
    h("section", { class: "grid" },
      h("div", { class: "card" }, h("h2", { text: "Messages by state (all queues)" }), stateChart),
      h("div", { class: "card" }, h("h2", { text: "API requests per second (answering isolate)" }), rateChart)),
    h("section", { class: "card" }, h("h2", { text: "Create a queue" }), createForm, createErr));

  async function refresh() {
    const obs = await guarded(err, () => rpc("AdminService/Observe", {}));
    if (!obs) return;
    if (!obs.queues) {
      err.textContent = `Queue gauges are unavailable right now (collection ${obs.collection.state}` +
        (obs.collection.error_code ? `: ${obs.collection.error_code}` : "") + ").";
      return;
    }
    recordSample(obs);
    summary.textContent = `${obs.queue_count} queues, ${obs.subscription_count} subscriptions · ` +
      `sampled ${fmtTime(obs.sampled_at_ms)} · refreshes every ${REFRESH_MS / 1000} s`;
    queues = obs.queues;
    reselect();
    const samples = history.samples;
    drawChart(stateChart, STATES.map((st) => ({ name: st.replace("_", " "), cls: "s-" + st,
      points: samples.map((s) => s.states[st]) })), "");
    drawChart(rateChart, [
      { name: "requests", cls: "s-requests", points: samples.map((s) => s.rps) },
      { name: "errors", cls: "s-errors", points: samples.map((s) => s.errors) }], "/s");
  }
  every(refresh);
}

// The rows whose name (as `name(row)` gives it) contains `text`, any case.
function matching(rows, text, name) {
  const needle = text.trim().toLowerCase();
  return needle ? rows.filter((r) => name(r).toLowerCase().includes(needle)) : rows.slice();
}

// Sorts `rows` in place by `order.key` (through `value(row, key)`),
// descending when `order.desc`; ties by name so the order is stable.
function sortRows(rows, order, value) {
  const dir = order.desc ? -1 : 1;
  return rows.sort((a, b) => {
    const x = value(a, order.key), y = value(b, order.key);
    if (x < y) return -dir;
    if (x > y) return dir;
    const [na, nb] = [value(a, "name"), value(b, "name")];
    return na < nb ? -1 : na > nb ? 1 : 0;
  });
}

// A queue's sort value for a column; a queue without messages is the
// youngest.
function queueSortValue(q, key) {
  if (key === "queue" || key === "name") return q.queue;
  if (key === "oldest") return q.oldest_message_age_ms || 0;
  return q[key] ?? 0;
}

// Header cells whose buttons sort by their column: a first click sorts
// counts largest first and names A–Z, a second reverses; `aria-sort` says
// which column decides.
function sortableHeaders(order, columns, changed) {
  const cells = columns.map(([key, label, cls]) => {
    const button = h("button", { type: "button", class: "sort", "data-sort": key, text: label });
    const th = h("th", { class: cls || null, "data-sort-col": key }, button);
    button.addEventListener("click", () => {
      if (order.key === key) order.desc = !order.desc;
      else Object.assign(order, { key, desc: cls === "num" });
      mark();
      changed();
    });
    return th;
  });
  const mark = () => cells.forEach((th) => {
    if (th.dataset.sortCol === order.key) th.setAttribute("aria-sort", order.desc ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
  });
  mark();
  return cells;
}

// Updates rows in place so a refresh never moves what the operator looks at.
function renderQueues(body, queues, any) {
  if (queues.length === 0) {
    body.replaceChildren(h("tr", {}, h("td", { colspan: 9, class: "muted",
      text: any ? "No queue matches the filter." : "No queues yet." })));
    return;
  }
  const rows = new Map([...body.querySelectorAll("tr[data-queue]")].map((r) => [r.dataset.queue, r]));
  const wanted = [];
  for (const q of queues) {
    let row = rows.get(q.queue);
    if (!row) {
      row = h("tr", { "data-queue": q.queue },
        h("td", {}, h("a", { href: "#/queue/" + encodeURIComponent(q.queue), text: q.queue })),
        h("td", { class: "hide-narrow", text: q.kind }),
        STATES.map((s) => h("td", { class: "num", "data-col": s })),
        h("td", { class: "num", "data-col": "total" }),
        h("td", { class: "num", "data-col": "oldest" }));
    }
    for (const s of STATES) row.querySelector(`[data-col=${s}]`).textContent = q[s];
    row.querySelector("[data-col=total]").textContent = q.total;
    row.querySelector("[data-col=oldest]").textContent = fmtAge(q.oldest_message_age_ms);
    wanted.push(row);
  }
  body.replaceChildren(...wanted);
}

// ---------- queue detail ----------

function queueView(view, name) {
  const headErr = h("p", { class: "error", role: "alert", id: "queue-error" });
  const config = h("dl", { class: "kv", id: "queue-config" });
  const counts = h("div", { class: "counts", id: "queue-counts" },
    [...STATES, "total"].map((s) => h("div", { class: "count" },
      h("span", { class: "muted", text: s.replace("_", " ") }), h("b", { "data-count": s, text: "…" }))));
  let generation = "";

  async function refreshHead() {
    const [list, stats] = await guarded(headErr, () =>
      Promise.all([rpc("AdminService/ListQueues", {}), rpc("QueueService/Stats", { queue: name })])) || [];
    if (!list) return;
    const q = list.queues.find((x) => x.name === name);
    if (q) {
      generation = q.generation || "";
      config.replaceChildren(
        ...[["kind", q.kind], ["lock duration", fmtDuration(q.lock_duration_ms)],
          ["max delivery count", q.max_delivery_count], ["default TTL", fmtDuration(q.default_ttl_ms)],
          ["dedup window", fmtDuration(q.dedup_window_ms)], ["generation", generation || "—"],
          ["oldest message", fmtAge(stats.oldest_message_age_ms)]]
          .flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: String(v) })]));
    }
    for (const s of [...STATES, "total"]) counts.querySelector(`[data-count=${s}]`).textContent = stats[s];
  }

  view.append(
    h("p", {}, h("a", { href: "#/", text: "← all queues" })),
    h("section", { class: "card" },
      h("h1", {}, "Queue ", h("code", { id: "queue-name", text: name })), headErr,
      h("div", { class: "grid" }, h("div", {}, h("h2", { text: "Configuration" }), config),
        h("div", {}, h("h2", { text: "Messages by state" }), counts))),
    messagesCard(name),
    h("section", { class: "grid" }, sendCard(name, refreshHead), deadLetterCard(name, refreshHead)),
    deleteCard(name, () => generation));
  every(refreshHead);
}

function messagesCard(name) {
  const err = h("p", { class: "error", role: "alert", id: "peek-error" });
  const state = h("select", { id: "peek-state" },
    h("option", { value: "", text: "all states" }), STATES.map((s) => h("option", { value: s, text: s })));
  const body = h("tbody", { id: "messages-body" });
  const pageInfo = h("span", { class: "muted", id: "peek-page" });
  const next = h("button", { type: "button", class: "secondary", id: "peek-next", text: "Next page →", disabled: true });
  const first = h("button", { type: "button", class: "secondary", id: "peek-first", text: "First page" });
  const reload = h("button", { type: "button", class: "secondary", id: "peek-reload", text: "Reload" });
  const starts = [0];
  let nextFrom = 0;

  async function load() {
    const from = starts[starts.length - 1];
    const res = await guarded(err, () =>
      rpc("QueueService/Peek", { queue: name, state: state.value, from_seq: from, max: PAGE }));
    if (!res) return;
    const msgs = res.messages || [];
    body.replaceChildren(...(msgs.length ? msgs.flatMap(messageRows)
      : [h("tr", {}, h("td", { colspan: 7, class: "muted", text: "No messages." }))]));
    nextFrom = msgs.length ? msgs[msgs.length - 1].seq_number + 1 : 0;
    next.disabled = msgs.length < PAGE;
    pageInfo.textContent = `page ${starts.length}` + (msgs.length ? ` · seq ${msgs[0].seq_number}–${msgs[msgs.length - 1].seq_number}` : "");
  }
  next.addEventListener("click", () => { starts.push(nextFrom); load(); });
  first.addEventListener("click", () => { starts.length = 1; load(); });
  reload.addEventListener("click", load);
  state.addEventListener("change", () => { starts.length = 1; load(); });
  load();
  return h("section", { class: "card" },
    h("h2", { text: "Messages (Peek: never locks or changes them)" }),
    h("div", { class: "row" }, h("div", {}, h("label", { for: "peek-state", text: "State" }), state), reload),
    err,
    h("div", { class: "scroll" }, h("table", { id: "messages" },
      h("thead", {}, h("tr", {}, ["seq", "state", "deliveries", "enqueued", "message id", "subject", ""]
        .map((t) => h("th", { text: t })))), body)),
    h("div", { class: "pager" }, first, next, pageInfo));
}

function messageRows(m) {
  const detail = h("tr", { class: "detail", hidden: true }, h("td", { colspan: 7 }, messageDetail(m)));
  const toggle = h("button", { type: "button", class: "secondary", text: "Show", "aria-expanded": "false",
    onclick: () => {
      detail.hidden = !detail.hidden;
      toggle.textContent = detail.hidden ? "Show" : "Hide";
      toggle.setAttribute("aria-expanded", String(!detail.hidden));
    } });
  const row = h("tr", { "data-seq": m.seq_number },
    h("td", { class: "num", text: m.seq_number }),
    h("td", {}, h("span", { class: "badge s-" + m.state, text: m.state })),
    h("td", { class: "num", text: m.delivery_count || 0 }),
    h("td", { text: fmtTime(m.enqueued_at_ms) }),
    h("td", { class: "wrap mono", text: m.message_id || "" }),
    h("td", { class: "wrap", text: m.subject || "" }),
    h("td", {}, toggle));
  return [row, detail];
}

function messageDetail(m) {
  const bytes = b64ToBytes(m.body);
  const text = asText(bytes);
  const pre = h("pre", { class: "body mono", "data-body": "" });
  let mode = text === null ? "hex" : "text";
  const show = () => {
    pre.textContent = mode === "text" ? text : hexDump(bytes);
    switcher.textContent = mode === "text" ? "Show hex" : "Show text";
    switcher.disabled = text === null;
  };
  const switcher = h("button", { type: "button", class: "secondary",
    onclick: () => { mode = mode === "text" ? "hex" : "text"; show(); } });
  show();
  const fields = [["group id", m.group_id], ["correlation id", m.correlation_id], ["reply to", m.reply_to],
    ["content type", m.content_type], ["visible at", m.visible_at_ms && fmtTime(m.visible_at_ms)],
    ["expires at", m.expires_at_ms && fmtTime(m.expires_at_ms)],
    ["locked until", m.locked_until_ms && fmtTime(m.locked_until_ms)],
    ["dead letter reason", m.dead_letter_reason], ["dead letter description", m.dead_letter_description],
    ...Object.entries(m.properties || {}).map(([k, v]) => ["property " + k, v])].filter(([, v]) => v);
  return h("div", {},
    h("dl", { class: "kv" }, fields.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { class: "mono", text: String(v) })])),
    h("p", { class: "muted" }, `body: ${bytes.length} bytes `, switcher), pre);
}

function sendCard(name, after) {
  const err = h("p", { class: "error", role: "alert", id: "send-error" });
  const note = h("p", { class: "note", role: "status", id: "send-result" });
  const form = h("form", { id: "send-form", onsubmit: async (e) => {
      e.preventDefault();
      note.textContent = "";
      const msg = { body: bytesToB64(new TextEncoder().encode($("#send-body", form).value)) };
      for (const [id, key] of [["send-message-id", "message_id"], ["send-subject", "subject"],
        ["send-group", "group_id"], ["send-content-type", "content_type"]]) {
        const v = $("#" + id, form).value.trim();
        if (v) msg[key] = v;
      }
      const res = await guarded(err, async () => {
        const props = parseProps($("#send-props", form).value);
        if (Object.keys(props).length) msg.properties = props;
        return rpc("QueueService/Send", { queue: name, messages: [msg] });
      });
      if (res) {
        note.textContent = `Sent: seq ${res.seq_numbers[0]}`;
        after();
      }
    } },
    h("label", { for: "send-body", text: "Body (UTF-8 text)" }),
    h("textarea", { id: "send-body", spellcheck: "false" }),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "send-message-id", text: "Message id" }), h("input", { id: "send-message-id", type: "text" })),
      h("div", {}, h("label", { for: "send-subject", text: "Subject" }), h("input", { id: "send-subject", type: "text" }))),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "send-group", text: "Group id" }), h("input", { id: "send-group", type: "text" })),
      h("div", {}, h("label", { for: "send-content-type", text: "Content type" }), h("input", { id: "send-content-type", type: "text" }))),
    h("label", { for: "send-props", text: "Properties (key=value per line)" }),
    h("textarea", { id: "send-props", spellcheck: "false" }),
    h("button", { type: "submit", id: "send-button", text: "Send test message" }));
  return h("div", { class: "card" }, h("h2", { text: "Send a test message" }), form, err, note);
}

function deadLetterCard(name, after) {
  const err = h("p", { class: "error", role: "alert", id: "dlq-error" });
  const note = h("p", { class: "note", role: "status", id: "dlq-result" });
  const target = h("input", { id: "redrive-target", type: "text", placeholder: "(this queue)" });
  const max = h("input", { id: "dlq-max", type: "number", min: "0", value: "0" });
  const confirmPurge = h("input", { id: "purge-confirm", type: "checkbox" });
  const purge = h("button", { type: "button", class: "danger", id: "purge-button", text: "Purge dead letters", disabled: true });
  confirmPurge.addEventListener("change", () => (purge.disabled = !confirmPurge.checked));
  const redrive = h("button", { type: "button", id: "redrive-button", text: "Redrive dead letters" });
  redrive.addEventListener("click", async () => {
    note.textContent = "";
    const res = await guarded(err, () => rpc("AdminService/Redrive",
      { queue: name, target: target.value.trim(), max: Number(max.value) || 0 }));
    if (res) { note.textContent = `Redriven: ${res.moved}`; after(); }
  });
  purge.addEventListener("click", async () => {
    note.textContent = "";
    const res = await guarded(err, () => rpc("AdminService/Purge", { queue: name, max: Number(max.value) || 0 }));
    confirmPurge.checked = false;
    purge.disabled = true;
    if (res) { note.textContent = `Purged: ${res.purged}`; after(); }
  });
  return h("div", { class: "card" }, h("h2", { text: "Dead letters" }),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "redrive-target", text: "Redrive into" }), target),
      h("div", {}, h("label", { for: "dlq-max", text: "At most (0 = all)" }), max)),
    h("div", { class: "row" }, redrive),
    h("p", {}, h("label", { class: "inline" }, confirmPurge, "Yes, delete dead letters for good")),
    purge, err, note);
}

function deleteCard(name, generation) {
  const err = h("p", { class: "error", role: "alert", id: "delete-error" });
  const typed = h("input", { id: "delete-name", type: "text", autocomplete: "off" });
  const button = h("button", { type: "button", class: "danger", id: "delete-button", text: "Delete queue", disabled: true });
  typed.addEventListener("input", () => (button.disabled = typed.value !== name));
  button.addEventListener("click", async () => {
    const res = await guarded(err, () => rpc("AdminService/DeleteQueue", { name, generation: generation() }));
    if (res) location.hash = "#/";
  });
  return h("section", { class: "card" }, h("h2", { text: "Delete this queue" }),
    h("p", { class: "muted", text: "Only an empty plain queue can be deleted, and only the one shown here " +
      "(its generation): if it was recreated meanwhile the broker refuses." }),
    h("label", { for: "delete-name" }, "Type ", h("code", { text: name }), " to confirm"), typed, button, err);
}

// ---------- topics ----------

function topicsView(view) {
  const err = h("p", { class: "error", role: "alert", id: "topics-error" });
  const body = h("tbody", { id: "subs-body" });
  let all = [];
  const filter = h("input", { id: "subs-filter", type: "search", placeholder: "Filter by topic or subscription",
    autocomplete: "off", spellcheck: "false", "aria-label": "Filter subscriptions by topic or name" });
  filter.addEventListener("input", () => render());
  async function load() {
    const res = await guarded(err, () => rpc("AdminService/ListSubscriptions", {}));
    if (!res) return;
    all = res.subscriptions || [];
    render();
  }
  function render() {
    const found = matching(all, filter.value, (s) => s.topic + "\n" + s.name);
    const subs = found.slice(0, LIST_LIMIT);
    const more = found.length > subs.length ? [h("tr", {}, h("td", { colspan: 4, class: "muted",
      text: `${found.length - subs.length} more: type to narrow the list.` }))] : [];
    body.replaceChildren(...more, ...(subs.length ? subs.map((s) => h("tr", {},
      h("td", { class: "mono", text: s.topic }),
      h("td", {}, h("a", { href: "#/queue/" + encodeURIComponent(s.name), text: s.name })),
      h("td", { class: "wrap mono", text: s.expr || "(matches everything)" }),
      h("td", {}, h("button", { type: "button", class: "secondary", text: "Test this filter",
        onclick: () => { $("#filter-expr").value = s.expr || ""; $("#filter-expr").focus(); } }))))
      : [h("tr", {}, h("td", { colspan: 4, class: "muted",
        text: all.length ? "No subscription matches the filter." : "No subscriptions." }))]));
  }
  const subErr = h("p", { class: "error", role: "alert" });
  const subForm = h("form", { onsubmit: async (e) => {
      e.preventDefault();
      const expr = $("#sub-expr", subForm).value.trim();
      const req = { topic: $("#sub-topic", subForm).value.trim(), name: $("#sub-name", subForm).value.trim() };
      if (expr) req.filter = { expr };
      if (await guarded(subErr, () => rpc("AdminService/Subscribe", req))) { subForm.reset(); load(); }
    } },
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "sub-topic", text: "Topic" }), h("input", { id: "sub-topic", type: "text", required: true })),
      h("div", {}, h("label", { for: "sub-name", text: "Subscription" }), h("input", { id: "sub-name", type: "text", required: true }))),
    h("label", { for: "sub-expr", text: "Filter (empty = everything)" }),
    h("input", { id: "sub-expr", type: "text", class: "mono" }),
    h("button", { type: "submit", text: "Subscribe" }));
  view.append(
    h("section", { class: "card" }, h("h1", { text: "Topics and subscriptions" }), err, filter,
      h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {},
        ["topic", "subscription", "filter", ""].map((t) => h("th", { text: t })))), body))),
    h("section", { class: "grid" }, filterTester(),
      h("div", { class: "card" }, h("h2", { text: "Add or change a subscription" }), subForm, subErr)));
  load();
}

function filterTester() {
  const err = h("p", { class: "error", role: "alert", id: "filter-error" });
  const result = h("p", { class: "note", role: "status", id: "filter-result" });
  const form = h("form", { onsubmit: async (e) => {
      e.preventDefault();
      result.textContent = "";
      const res = await guarded(err, () => {
        const message = { body: bytesToB64(new TextEncoder().encode($("#filter-body", form).value)) };
        const subject = $("#filter-subject", form).value.trim();
        const ct = $("#filter-content-type", form).value.trim();
        if (subject) message.subject = subject;
        if (ct) message.content_type = ct;
        const props = parseProps($("#filter-props", form).value);
        if (Object.keys(props).length) message.properties = props;
        return rpc("AdminService/TestFilter", { expr: $("#filter-expr", form).value, message });
      });
      if (!res) return;
      if (!res.valid) err.textContent = "Invalid filter: " + res.error;
      else if (res.error) err.textContent = "Evaluation failed (does not match): " + res.error;
      result.textContent = res.valid ? (res.matched ? "✔ matches the sample" : "✘ does not match the sample") : "";
    } },
    h("label", { for: "filter-expr", text: "Filter expression" }),
    h("textarea", { id: "filter-expr", class: "mono", spellcheck: "false" }),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "filter-subject", text: "Sample subject" }), h("input", { id: "filter-subject", type: "text" })),
      h("div", {}, h("label", { for: "filter-content-type", text: "Sample content type" }), h("input", { id: "filter-content-type", type: "text" }))),
    h("label", { for: "filter-props", text: "Sample properties (key=value per line)" }),
    h("textarea", { id: "filter-props", spellcheck: "false" }),
    h("label", { for: "filter-body", text: "Sample body" }),
    h("textarea", { id: "filter-body", spellcheck: "false" }),
    h("button", { type: "submit", id: "filter-button", text: "Test filter" }));
  return h("div", { class: "card" }, h("h2", { text: "Filter tester" }), form, err, result);
}

// ---------- keys ----------

function keysView(view) {
  const err = h("p", { class: "error", role: "alert", id: "keys-error" });
  const body = h("tbody", { id: "keys-body" });
  // Every key, newest first (ListKeys pages of 1000), filtered by name or
  // id as the operator types and shown a page at a time.
  let all = [];
  let page = 0;
  const filter = h("input", { id: "keys-filter", type: "search", placeholder: "Filter by name or id",
    autocomplete: "off", spellcheck: "false", "aria-label": "Filter keys by name or id" });
  const prev = h("button", { type: "button", class: "secondary", id: "keys-prev", text: "← Previous", disabled: true });
  const next = h("button", { type: "button", class: "secondary", id: "keys-next", text: "Next →", disabled: true });
  const pageInfo = h("span", { class: "muted", id: "keys-page" });
  async function load() {
    const keys = [];
    let after = "";
    do {
      const res = await guarded(err, () =>
        rpc("AuthService/ListKeys", { after_id: after, limit: 1000, sort: "created_desc" }));
      if (!res) return;
      keys.push(...(res.keys || []));
      after = res.next_after_id || "";
    } while (after);
    all = keys;
    render();
  }
  function render() {
    const shown = matching(all, filter.value, (k) => k.name + "\n" + k.id);
    page = Math.max(0, Math.min(page, Math.ceil(shown.length / PAGE) - 1));
    const rows = shown.slice(page * PAGE, (page + 1) * PAGE);
    body.replaceChildren(...(rows.length ? rows.map(keyRow)
      : [h("tr", {}, h("td", { colspan: 7, class: "muted",
        text: all.length ? "No key matches the filter." : "No managed keys." }))]));
    prev.disabled = page === 0;
    next.disabled = (page + 1) * PAGE >= shown.length;
    pageInfo.textContent = shown.length
      ? `${page * PAGE + 1}–${Math.min(shown.length, (page + 1) * PAGE)} of ${shown.length}` : "";
  }
  filter.addEventListener("input", () => { page = 0; render(); });
  prev.addEventListener("click", () => { page--; render(); });
  next.addEventListener("click", () => { page++; render(); });

  function keyRow(k) {
    const status = k.revoked_at_ms ? "revoked" : k.expires_at_ms && k.expires_at_ms < Date.now() ? "expired" : "active";
    const rowErr = h("span", { class: "error", role: "alert" });
    const revoke = h("button", { type: "button", class: "danger revoke", text: "Revoke", hidden: status === "revoked" });
    let armed = false;
    revoke.addEventListener("click", async () => {
      if (!armed) {
        armed = true;
        revoke.textContent = "Confirm revoke";
        return;
      }
      if (await guarded(rowErr, () => rpc("AuthService/RevokeKey", { id: k.id }))) load();
    });
    revoke.addEventListener("blur", () => { armed = false; revoke.textContent = "Revoke"; });
    return h("tr", { "data-key": k.id },
      h("td", { class: "wrap", text: k.name }),
      h("td", { class: "mono hide-narrow", text: k.id }),
      h("td", { text: k.permissions.join(", ") }),
      h("td", { "data-col": "status" }, h("span", { class: "badge", text: status })),
      h("td", { class: "hide-narrow", text: fmtTime(k.created_at_ms) }),
      h("td", { class: "hide-narrow", text: k.expires_at_ms ? fmtTime(k.expires_at_ms) : "never" }),
      h("td", {}, revoke, rowErr));
  }

  const createErr = h("p", { class: "error", role: "alert", id: "key-create-error" });
  const secret = h("div", { id: "key-secret", role: "status" });
  const form = h("form", { id: "key-form", onsubmit: async (e) => {
      e.preventDefault();
      secret.replaceChildren();
      const permissions = [...form.querySelectorAll("input[name=perm]:checked")].map((c) => c.value);
      const expires = $("#key-expires", form).value;
      const req = { id: randomId(), name: $("#key-name", form).value.trim(), permissions };
      if (expires) req.expires_at_ms = new Date(expires).getTime();
      const res = await guarded(createErr, () => rpc("AuthService/CreateKey", req));
      if (!res) return;
      form.reset();
      const token = h("code", { id: "key-token", text: res.token });
      const copied = h("span", { class: "muted", role: "status" });
      secret.replaceChildren(
        h("p", { text: `Key "${res.key.name}" created. Its secret is shown only now: copy it.` }),
        h("div", { class: "secret" }, token,
          h("button", { type: "button", id: "key-copy", text: "Copy", onclick: async () => {
            try {
              await navigator.clipboard.writeText(res.token);
              copied.textContent = "Copied.";
            } catch (_) {
              getSelection().selectAllChildren(token);
              copied.textContent = "Selected: press Ctrl+C.";
            }
          } }), copied));
      load();
    } },
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "key-name", text: "Name" }), h("input", { id: "key-name", type: "text", required: true, maxlength: "128" })),
      h("div", {}, h("label", { for: "key-expires", text: "Expires (optional)" }), h("input", { id: "key-expires", type: "datetime-local" }))),
    h("fieldset", {}, h("legend", { text: "Permissions" }),
      ["send", "listen", "manage"].map((p) => h("label", { class: "inline" },
        h("input", { type: "checkbox", name: "perm", value: p, id: "perm-" + p }), p))),
    h("button", { type: "submit", id: "key-create", text: "Create key" }));

  view.append(
    h("section", { class: "card" }, h("h1", { text: "Access keys" }), err, filter,
      h("div", { class: "scroll" }, h("table", { id: "keys" }, h("thead", {}, h("tr", {},
        ["name", "id", "permissions", "status", "created", "expires", ""].map((t, i) =>
          h("th", { class: [1, 4, 5].includes(i) ? "hide-narrow" : null, text: t })))), body)),
      h("div", { class: "pager" }, prev, next, pageInfo)),
    h("section", { class: "card" }, h("h2", { text: "Create a key" }), form, createErr, secret));
  load();
}

// ---------- start ----------

document.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("#token").value.trim();
    if (token) signIn(token);
  });
  $("#signout").addEventListener("click", () => signOut(""));
  window.addEventListener("hashchange", () => {
    if (sessionStorage.getItem(TOKEN_KEY)) route();
  });
  if (sessionStorage.getItem(TOKEN_KEY)) showApp();
  else signOut("");
});
