// rayctl ui: the list of RayJobs and RayClusters, and the trigger chain of the one selected as a
// sequence diagram, all from Server-Sent Events of the rayctl ui server. It reads only that server's
// view model (see pkg/ui/view.go).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (sel) => document.querySelector(sel);
const csrf = { header: $('meta[name="csrf-header"]').content, token: $('meta[name="csrf-token"]').content };

const state = {
  objects: new Map(), // key → ObjectView
  selected: null, // {kind, namespace, name}
  chainSource: null,
  diagSource: null,
  view: null, // the latest ChainView
  shown: new Set(), // seqs drawn before, to mark new ones
  replaying: false,
};

const key = (o) => `${o.kind}/${o.namespace}/${o.name}`;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function age(created) {
  const s = Math.max(0, Math.floor((Date.now() - new Date(created).getTime()) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

const fmtMS = (v) => (v >= 10000 ? `${(v / 1000).toFixed(1)} s` : `${v.toFixed(1)} ms`);

// ---- the list ----

// renderList brings the table in line with state.objects, row by row: a row keeps its element while its
// object lives (it is updated in place, never rebuilt), so a row stays where a pointer is about to click.
function renderList() {
  const body = $("#objects tbody");
  const rows = new Map([...body.children].map((tr) => [tr.dataset.key, tr]));
  const items = [...state.objects.values()].sort((a, b) =>
    a.kind !== b.kind ? (a.kind < b.kind ? 1 : -1) : a.namespace !== b.namespace ? a.namespace.localeCompare(b.namespace) : a.name.localeCompare(b.name));
  for (const [k, tr] of rows) if (!state.objects.has(k)) tr.remove();
  let next = body.firstElementChild;
  for (const o of items) {
    let tr = rows.get(key(o));
    if (!tr || !tr.isConnected) {
      tr = el("tr", { class: "object", "data-key": key(o), "data-kind": o.kind, "data-namespace": o.namespace, "data-name": o.name });
      tr.append(el("td", {}, o.kind), el("td", {}, o.namespace), el("td", {}, o.name), el("td", { class: "state" }), el("td", { class: "age" }));
      tr.addEventListener("click", () => select(o));
      body.insertBefore(tr, next);
    } else {
      next = tr.nextElementSibling;
    }
    tr.dataset.state = o.state;
    tr.querySelector(".state").textContent = o.state || "–";
    tr.querySelector(".age").textContent = age(o.created);
    tr.classList.toggle("selected", !!state.selected && key(state.selected) === key(o));
  }
  $("#empty").hidden = items.length > 0;
  updateReplay();
}

function connectObjects() {
  const es = new EventSource("/api/objects");
  es.addEventListener("objects", (ev) => {
    state.objects.clear();
    for (const o of JSON.parse(ev.data) || []) state.objects.set(key(o), o);
    renderList();
    setStatus("live", "live");
  });
  es.addEventListener("object", (ev) => {
    const o = JSON.parse(ev.data);
    if (o.deleted) state.objects.delete(key(o));
    else state.objects.set(key(o), o);
    renderList();
  });
  es.onerror = () => setStatus("down", "reconnecting…");
}

function setStatus(cls, text) {
  const s = $("#status");
  s.className = "status " + cls;
  s.textContent = text;
}

// ---- selection ----

function select(o) {
  const sel = { kind: o.kind, namespace: o.namespace, name: o.name };
  if (state.selected && key(state.selected) === key(sel)) return;
  state.selected = sel;
  state.view = null;
  state.shown = new Set();
  state.replaying = false;
  history.replaceState(null, "", location.pathname + location.search + "#" + key(sel));
  if (state.chainSource) state.chainSource.close();
  if (state.diagSource) state.diagSource.close();
  $("#chosen").hidden = true;
  $("#chain-head").hidden = false;
  $("#chain-title").textContent = `${sel.kind} ${sel.namespace}/${sel.name}`;
  $("#chain-summary").textContent = "waiting for hops…";
  $("#diagram").replaceChildren();
  $("#latency-wrap").hidden = true;
  $("#diagnosis-wrap").hidden = true;
  renderList();
  const q = new URLSearchParams(sel).toString();
  state.chainSource = new EventSource("/api/chain?" + q);
  state.chainSource.addEventListener("chain", (ev) => {
    state.view = JSON.parse(ev.data);
    if (!state.replaying) drawView(state.view, state.view.hops.length);
  });
  state.diagSource = new EventSource("/api/diagnose?" + q);
  state.diagSource.addEventListener("diagnosis", (ev) => drawDiagnosis(JSON.parse(ev.data)));
}

// ---- the sequence diagram ----

function geometry() {
  const big = document.body.classList.contains("workshop");
  return { left: big ? 150 : 110, laneW: big ? 300 : 230, rowH: big ? 44 : 30, top: big ? 70 : 50, loop: 26 };
}

// drawView draws the first n hops of view.
function drawView(view, n) {
  const g = geometry();
  const root = $("#diagram");
  root.replaceChildren();
  const defs = svg("defs");
  for (const [id, color] of [["arrow", "#2f6fd6"], ["arrow-write", "#2e7d32"], ["arrow-red", "#c62828"]]) {
    const m = svg("marker", { id, viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    m.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: color }));
    defs.append(m);
  }
  root.append(defs);
  const lanes = view.lanes || [];
  const x = {};
  lanes.forEach((l, i) => (x[l.id] = g.left + g.laneW / 2 + i * g.laneW));
  const hops = (view.hops || []).slice(0, n);
  const height = g.top + (hops.length + 1) * g.rowH;
  const width = g.left + lanes.length * g.laneW + 320;
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  for (const l of lanes) {
    root.append(svg("text", { class: "lane-title", x: x[l.id], y: g.top - 20, "data-lane": l.id }, l.title));
    root.append(svg("line", { class: "lifeline", x1: x[l.id], y1: g.top - 10, x2: x[l.id], y2: height }));
  }
  hops.forEach((h, i) => {
    const y = g.top + (i + 1) * g.rowH - 8;
    const cls = ["hop", "hop-" + h.hop];
    if (["kubelet-write", "status-write", "controller-write", "dashboard-call"].includes(h.hop)) cls.push("write");
    if (h.dropped) cls.push("dropped");
    if (h.failed) cls.push("failed");
    if (h.onPath) cls.push("onpath");
    if (!state.shown.has(h.seq) && state.shown.size > 0) cls.push("fresh");
    const grp = svg("g", {
      class: cls.join(" "), "data-seq": h.seq, "data-hop": h.hop, "data-lane": h.lane, "data-to": h.to,
      "data-kind": h.kind, "data-name": h.name, "data-rv": h.rv || "", "data-label": h.label,
    });
    const marker = h.dropped || h.failed ? "url(#arrow-red)" : cls.includes("write") ? "url(#arrow-write)" : "url(#arrow)";
    const x1 = x[h.lane], x2 = x[h.to];
    let text = (h.dropped ? "✗ " : "") + h.label + (h.rv ? ` rv ${h.oldRv ? h.oldRv + "→" : ""}${h.rv}` : "");
    if (h.latency >= 0) text += `  (${fmtMS(h.latency)})`;
    if (x1 === x2) {
      const d = `M${x1},${y - 6} h${g.loop} v12 h-${g.loop}`;
      grp.append(svg("path", { class: "hit", d }), svg("path", { d, "marker-end": marker }));
      grp.append(svg("text", { x: x1 + g.loop + 6, y: y + 4 }, text));
    } else {
      grp.append(svg("line", { class: "hit", x1, y1: y, x2, y2: y }), svg("line", { x1, y1: y, x2, y2: y, "marker-end": marker }));
      grp.append(svg("text", { x: Math.min(x1, x2) + 8, y: y - 5 }, text));
    }
    grp.append(svg("text", { class: "time", x: g.left - 12, y: y + 4 }, "+" + fmtMS(h.at)));
    grp.addEventListener("mouseenter", (ev) => showTip(ev, h));
    grp.addEventListener("mousemove", moveTip);
    grp.addEventListener("mouseleave", () => ($("#tip").hidden = true));
    root.append(grp);
  });
  for (const h of hops) state.shown.add(h.seq);
  const all = view.hops || [];
  const dropped = all.filter((h) => h.dropped).length;
  $("#chain-summary").textContent = view.error
    ? "chain recorder: " + view.error
    : all.length === 0
      ? "no hops recorded yet"
      : `${all.length} hops over ${fmtMS(all[all.length - 1].at)}` + (dropped ? `, ${dropped} dropped` : "");
  if (n >= all.length) drawLatency(view.latency);
  updateReplay();
}

function showTip(ev, h) {
  const tip = $("#tip");
  const lines = [h.detail, `${h.hop} · ${h.lane}${h.to !== h.lane ? " → " + h.to : ""} · #${h.seq}`];
  if (h.namespace) lines.push(`${h.kind} ${h.namespace}/${h.name}${h.rv ? " rv " + h.rv : ""}`);
  if (h.duration > 0) lines.push(`took ${fmtMS(h.duration)}`);
  if (h.latency >= 0) lines.push(`${fmtMS(h.latency)} after the hop it followed from`);
  if (h.error) lines.push("error: " + h.error);
  if (h.unseen) lines.push("┆ before it, out of the API server's sight: " + h.unseen);
  tip.textContent = lines.join("\n");
  tip.hidden = false;
  moveTip(ev);
}

function moveTip(ev) {
  const tip = $("#tip");
  tip.style.left = ev.clientX + 14 + "px";
  tip.style.top = ev.clientY + 14 + "px";
}

function drawLatency(t) {
  const wrap = $("#latency-wrap");
  if (!t) {
    wrap.hidden = true;
    return;
  }
  wrap.hidden = false;
  $("#latency-title").textContent = `Hop latencies, ${t.from} → ${t.to}`;
  const body = $("#latency tbody");
  body.replaceChildren();
  for (const r of t.rows) {
    const tr = el("tr", { class: "latency-row" });
    tr.append(el("td", {}, r.label), el("td", {}, r.component), el("td", { class: "num" }, r.root ? "–" : fmtMS(r.latency)), el("td", { class: "num" }, r.root ? "–" : fmtMS(r.total)));
    body.append(tr);
  }
  $("#latency-total").textContent = `${t.from} → ${t.to}: ${fmtMS(t.total)} over ${t.rows.length - 1} hops`;
}

// ---- replay (workshop) ----

function selectedObject() {
  return state.selected && state.objects.get(key(state.selected));
}

function updateReplay() {
  const o = selectedObject();
  $("#replay").hidden = !(o && o.finished && state.view && state.view.hops.length > 0);
}

function replay() {
  const view = state.view;
  if (!view || state.replaying) return;
  state.replaying = true;
  state.shown = new Set();
  const step = document.body.classList.contains("workshop") ? 900 : 400;
  let n = 0;
  const next = () => {
    if (!state.replaying || state.view !== view) {
      state.replaying = false;
      if (state.view) drawView(state.view, state.view.hops.length);
      return;
    }
    drawView(view, n);
    const last = $("#diagram g.hop:last-of-type");
    if (last) last.scrollIntoView({ block: "nearest" });
    if (n++ >= view.hops.length) {
      state.replaying = false;
      return;
    }
    setTimeout(next, step);
  };
  next();
}

// ---- diagnosis ----

function drawDiagnosis(r) {
  const wrap = $("#diagnosis-wrap");
  wrap.hidden = false;
  $("#diag-time").textContent = new Date().toLocaleTimeString();
  const list = $("#checks");
  list.replaceChildren();
  const verdict = $("#verdict");
  if (r.error) {
    verdict.className = "fail";
    verdict.textContent = "diagnose: " + r.error;
    verdict.dataset.cause = "";
    return;
  }
  const marks = { pass: "✓", fail: "✗", "n/a": "–" };
  for (const c of r.checks || []) {
    const cls = c.status === "n/a" ? "na" : c.status;
    const li = el("li", { class: "check " + cls, "data-id": c.id, "data-status": c.status });
    li.append(el("span", { class: "mark" }, marks[c.status] || "?"));
    li.append(document.createTextNode(`${c.id}) ${c.title} — ${c.subject.kind} ${c.subject.name}: ${c.summary}`));
    if (c.status === "fail" && c.fix) li.append(el("span", { class: "fix" }, "→ " + c.fix));
    if (c.evidence && c.evidence.length) li.title = c.evidence.join("\n");
    list.append(li);
  }
  const v = r.verdict || {};
  verdict.dataset.cause = v.cause || "";
  verdict.dataset.check = v.check || "";
  if (v.check) {
    verdict.className = "fail";
    verdict.textContent = `Most likely cause (${v.check}): ${v.text}`;
  } else {
    verdict.className = "pass";
    verdict.textContent = "No cause found: " + v.text;
  }
}

// ---- controls ----

function setWorkshop(on) {
  document.body.classList.toggle("workshop", on);
  $("#workshop").checked = on;
  if (state.view && !state.replaying) drawView(state.view, state.view.hops.length);
}

async function applyDemo() {
  const b = $("#demo");
  b.disabled = true;
  try {
    const resp = await fetch("/api/demo", { method: "POST", headers: { [csrf.header]: csrf.token } });
    const text = await resp.text();
    if (!resp.ok) throw new Error(text);
    select(JSON.parse(text));
  } catch (e) {
    setStatus("down", "demo: " + e.message);
  } finally {
    b.disabled = false;
  }
}

// selectFromHash selects the object the address names (#RayJob/NAMESPACE/NAME), as links to the page do.
function selectFromHash() {
  const m = /^#(RayJob|RayCluster)\/([^/]+)\/([^/]+)$/.exec(decodeURIComponent(location.hash));
  if (m) select({ kind: m[1], namespace: m[2], name: m[3] });
}

function start() {
  const params = new URLSearchParams(location.search);
  setWorkshop(params.get("workshop") === "1");
  $("#workshop").addEventListener("change", (e) => setWorkshop(e.target.checked));
  $("#demo").addEventListener("click", applyDemo);
  $("#replay").addEventListener("click", replay);
  connectObjects();
  selectFromHash();
  window.addEventListener("hashchange", selectFromHash);
  setInterval(() => {
    for (const tr of document.querySelectorAll("#objects tbody tr")) {
      const o = state.objects.get(`${tr.dataset.kind}/${tr.dataset.namespace}/${tr.dataset.name}`);
      if (o) tr.querySelector(".age").textContent = age(o.created);
    }
  }, 1000);
}

start();
