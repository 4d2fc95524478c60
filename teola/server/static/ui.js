// teola /ui: apps and their optimized graphs, live engine queues, recent queries and a query's timeline.
// Plain DOM + SVG, no libraries. Every call sends the API key kept in this browser's localStorage.
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const state = { selected: null, apps: [] };

function el(tag, attrs, text) {
  const n = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  if (text !== undefined) n.textContent = text;
  return n;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
  const status = $("status");
  status.textContent = message ? "error" : "connected";
  status.className = "status " + (message ? "down" : "ok");
}

async function api(path, options) {
  const headers = Object.assign({}, (options || {}).headers);
  const key = localStorage.getItem("teola.apikey");
  if (key) headers["Authorization"] = "Bearer " + key;
  let response;
  try {
    response = await fetch(path, Object.assign({}, options, { headers }));
  } catch (err) {
    showError("Cannot reach the teola server (" + err.message + "). Is `teola serve` running?");
    throw err;
  }
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    showError("The server needs an API key: enter it at the top right.");
    throw new Error("unauthorized");
  }
  if (!response.ok) throw new Error((body.detail || response.statusText) + " (HTTP " + response.status + ")");
  showError("");
  return body;
}

// ---- engines -------------------------------------------------------------------------------------
async function refreshEngines() {
  const data = await api("/v1/ui/engines");
  const body = $("engines").tBodies[0];
  body.replaceChildren();
  for (const e of data.engines) {
    const bar = el("span", { class: "util", title: `${e.inflight} of ${e.capacity} batches in flight` });
    bar.appendChild(el("i", { style: `width:${Math.round(100 * Math.min(1, e.utilisation))}%` }));
    const util = el("td");
    util.append(bar, " " + Math.round(100 * e.utilisation) + "%");
    const row = el("tr");
    row.append(el("td", {}, e.app), el("td", {}, e.engine), el("td", {}, e.kind), el("td", {}, String(e.queued)),
      el("td", {}, `${e.inflight}/${e.capacity}`), util,
      el("td", {}, !e.started ? "not started" : e.healthy ? "healthy" : "down"));
    body.appendChild(row);
  }
}

// ---- apps and their graphs -----------------------------------------------------------------------
async function loadApps() {
  const data = await api("/v1/apps");
  state.apps = data.apps.map((a) => a.name);
  const tabs = $("apps"), select = $("run-app");
  tabs.replaceChildren();
  select.replaceChildren();
  for (const name of state.apps) {
    const b = el("button", { type: "button", "data-app": name }, name);
    b.onclick = () => showGraph(name);
    tabs.appendChild(b);
    select.appendChild(el("option", { value: name }, name));
  }
  if (state.apps.length) await showGraph(state.apps[0]);
}

async function showGraph(app) {
  for (const b of $("apps").children) b.classList.toggle("active", b.dataset.app === app);
  const g = await api(`/v1/ui/apps/${encodeURIComponent(app)}/graph`);
  $("graph").replaceChildren(drawGraph(g));
}

function drawGraph(g) {
  const W = 150, H = 38, GX = 28, GY = 10;
  const maxDepth = Math.max(0, ...g.nodes.map((n) => n.depth));
  const columns = {}, pos = {};
  for (const n of g.nodes) {
    const c = maxDepth - n.depth;
    (columns[c] = columns[c] || []).push(n);
    pos[n.id] = { x: 10 + c * (W + GX), y: 10 + (columns[c].length - 1) * (H + GY) };
  }
  const rows = Math.max(1, ...Object.values(columns).map((c) => c.length));
  const svg = el("svg:svg", { width: 20 + (maxDepth + 1) * (W + GX), height: 20 + rows * (H + GY), class: "egraph" });
  const defs = el("svg:defs");
  const marker = el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
  marker.appendChild(el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#99a" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  for (const [u, v] of g.edges) {
    const a = pos[u], b = pos[v], mx = (a.x + W + b.x) / 2;
    svg.appendChild(el("svg:path", { class: "edge", d: `M${a.x + W},${a.y + H / 2} C${mx},${a.y + H / 2} ${mx},${b.y + H / 2} ${b.x},${b.y + H / 2}` }));
  }
  for (const n of g.nodes) {
    const p = pos[n.id];
    const node = el("svg:g", { class: "node" + (n.engine ? "" : " control"), transform: `translate(${p.x},${p.y})` });
    node.append(el("svg:rect", { width: W, height: H, rx: 4 }),
      el("svg:text", { x: 6, y: 15 }, clip(n.op + (n.engine ? " @" + n.engine : ""), 22)),
      el("svg:text", { x: 6, y: 30 }, clip(n.name, 22)));
    node.appendChild(el("svg:title", {}, `${n.name}\n${n.op} on ${n.engine || "control"}, depth ${n.depth}`));
    svg.appendChild(node);
  }
  return svg;
}

const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

// ---- queries -------------------------------------------------------------------------------------
async function refreshQueries() {
  const data = await api("/v1/ui/queries");
  const body = $("queries").tBodies[0];
  body.replaceChildren();
  for (const q of data.queries) {
    const row = el("tr", { "data-query": q.query_id, class: q.query_id === state.selected ? "selected" : "" });
    const latency = q.latency == null ? "-" : Math.round(1000 * q.latency) + " ms";
    row.append(el("td", {}, new Date(1000 * q.started_at).toLocaleTimeString()), el("td", {}, q.app),
      el("td", {}, q.status), el("td", {}, latency), el("td", {}, String(q.primitives)), el("td", {}, q.question || ""));
    row.onclick = () => showQuery(q.query_id);
    body.appendChild(row);
  }
}

async function runQuery(event) {
  event.preventDefault();
  const app = $("run-app").value, status = $("run-status");
  status.textContent = "running…";
  try {
    const sample = await api(`/v1/ui/apps/${encodeURIComponent(app)}/sample`);
    const query = sample.query;
    if ($("run-question").value.trim()) query.question = $("run-question").value.trim();
    const done = api(`/v1/apps/${encodeURIComponent(app)}/query`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ query, config: {} }) });
    setTimeout(refreshQueries, 300);
    const result = await done;
    status.textContent = `answered in ${Math.round(1000 * result.latency)} ms`;
    await refreshQueries();
    await showQuery(result.query_id);
  } catch (err) {
    status.textContent = "failed: " + err.message;
  }
}

async function showQuery(id) {
  state.selected = id;
  const q = await api(`/v1/ui/queries/${encodeURIComponent(id)}`);
  $("timeline-section").hidden = false;
  $("timeline-title").textContent = `${q.app} · ${q.query_id.slice(0, 8)} · ${q.status}` +
    (q.latency == null ? "" : ` · ${Math.round(1000 * q.latency)} ms`);
  $("timeline").replaceChildren(drawTimeline(q));
  $("timeline-detail").textContent = q.error || "";
  for (const r of $("queries").tBodies[0].rows) r.classList.toggle("selected", r.dataset.query === id);
}

function drawTimeline(q) {
  const rows = q.trace.filter((t) => t.started != null && t.finished != null);
  const end = Math.max(1e-6, ...rows.map((t) => t.finished));
  const onPath = new Set(q.critical_path), groups = new Map();
  rows.sort((a, b) => a.queued - b.queued || a.started - b.started);
  for (const t of rows) {
    const key = t.engine || "(control)";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(t);
  }
  const L = 220, W = 760, RH = 18;
  const height = 30 + (rows.length + groups.size) * RH;
  const svg = el("svg:svg", { width: L + W + 20, height, class: "timeline" });
  const x = (t) => L + (t / end) * W;
  for (let i = 0; i <= 4; i++) {
    svg.appendChild(el("svg:line", { x1: x(end * i / 4), x2: x(end * i / 4), y1: 14, y2: height, stroke: "#e3e5ea" }));
    svg.appendChild(el("svg:text", { x: x(end * i / 4) - 10, y: 11 }, Math.round(1000 * end * i / 4) + " ms"));
  }
  let y = 20;
  for (const [engine, members] of groups) {
    svg.appendChild(el("svg:text", { x: 4, y: y + 13, class: "engine" }, engine));
    y += RH;
    for (const t of members) {
      svg.appendChild(bar(t, y, x, onPath.has(t.primitive), q.batch_mates[t.primitive]));
      y += RH;
    }
  }
  return svg;
}

function bar(t, y, x, critical, mates) {
  const g = el("svg:g", { class: "row", "data-primitive": t.primitive });
  g.appendChild(el("svg:text", { x: 14, y: y + 13 }, clip(t.primitive, 32)));
  g.appendChild(el("svg:rect", { class: "bar-queued", x: x(t.queued), y: y + 3, height: 12,
    width: Math.max(0, x(t.started) - x(t.queued)) }));
  const run = el("svg:rect", { class: "bar-run" + (critical ? " critical" : ""), x: x(t.started), y: y + 3,
    height: 12, width: Math.max(2, x(t.finished) - x(t.started)), "data-primitive": t.primitive });
  const others = mates && mates.requests ? `\nbatched with ${mates.requests} request(s) of other queries` +
    (mates.queries.length ? ": " + mates.queries.map((s) => s.slice(0, 8)).join(", ") : "") : "";
  run.appendChild(el("svg:title", {}, `${t.primitive} (${t.op}) on ${t.instance || t.engine || "control"}\n` +
    `queued ${ms(t.started - t.queued)}, ran ${ms(t.finished - t.started)}, batch ${t.batch_size ?? "-"}` +
    (t.num_cached_tokens ? `\n${t.num_cached_tokens} prompt tokens from the prefix cache` : "") + others +
    (critical ? "\non the critical path" : "")));
  g.appendChild(run);
  const end = x(t.finished) + 4;
  if (t.num_cached_tokens) g.appendChild(el("svg:circle", { class: "cached", cx: end + 3, cy: y + 9, r: 4 }));
  if (mates && mates.requests) g.appendChild(el("svg:rect", { class: "mates", x: end + 10, y: y + 5, width: 8, height: 8 }));
  return g;
}

const ms = (s) => Math.round(1000 * s) + " ms";

// ---- start ---------------------------------------------------------------------------------------
async function tick() {
  try {
    await refreshEngines();
    await refreshQueries();
  } catch (err) { /* shown by api() */ }
}

function start() {
  const key = $("apikey");
  key.value = localStorage.getItem("teola.apikey") || "";
  key.onchange = () => { localStorage.setItem("teola.apikey", key.value); loadApps().then(tick).catch(() => {}); };
  $("run").onsubmit = runQuery;
  loadApps().catch(() => {});
  tick();
  setInterval(tick, 2000);
}

start();
