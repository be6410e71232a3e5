// The inec dashboard: polls the control API with the admin token (kept in
// sessionStorage, sent only as an Authorization header, never in a URL) and
// draws health, nodes, rates, repair and the pools' DEGs. No libraries.
"use strict";

const KEY = "inecAdminToken";
const $ = (id) => document.getElementById(id);
let timer = null;
let pools = [];

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 1 : 0)) + " " + u[i];
}

async function api(path, asText) {
  const token = sessionStorage.getItem(KEY);
  const r = await fetch(path, { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
  if (r.status === 401) { logout("the gateway refused the token"); throw new Error("unauthorized"); }
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { const j = await r.json(); msg = j.code + ": " + j.message; } catch (e) { /* not JSON */ }
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return asText ? r.text() : r.json();
}

function logout(reason) {
  sessionStorage.removeItem(KEY);
  if (timer) clearInterval(timer);
  timer = null;
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = reason || "";
  $("health").textContent = "…";
  $("health").className = "badge";
}

function showHealth(h, cluster) {
  const badge = $("health");
  badge.textContent = h.status;
  badge.className = "badge " + h.status;
  const ul = $("checks");
  ul.replaceChildren();
  if (h.checks.length === 0) ul.append(el("li", "all checks pass"));
  for (const c of h.checks) ul.append(el("li", "[" + c.severity + "] " + c.code + ": " + c.message, c.severity));
  $("counters").textContent = "since the gateway started: " + cluster.degraded_reads + " degraded reads, " +
    cluster.corrupt_chunks + " corrupt and " + cluster.missing_chunks + " missing chunks, " +
    cluster.failed_reads + " failed reads; map epoch " + cluster.epoch + " (" + cluster.mode + ")";
}

// The node's clock minus the gateway's, in ms resolution ("-0.000" is "+0.000").
function clockOffset(s) {
  const t = Math.abs(s) < 0.0005 ? "0.000" : s.toFixed(3);
  return (t.startsWith("-") ? "" : "+") + t + " s";
}

function capacityBar(node, maxUsed) {
  const wrap = el("span");
  const bar = el("span", undefined, "bar");
  const fill = el("span");
  const cap = node.capacity_bytes || 0;
  const frac = cap > 0 ? node.used_bytes / cap : (maxUsed > 0 ? node.used_bytes / maxUsed : 0);
  fill.style.width = Math.min(100, frac * 100).toFixed(1) + "%";
  if (cap > 0 && frac >= 0.95) bar.classList.add("full");
  else if (cap > 0 && frac >= 0.85) bar.classList.add("warn");
  bar.append(fill);
  wrap.append(bar, document.createTextNode(bytes(node.used_bytes) +
    (cap > 0 ? " (" + (frac * 100).toFixed(1) + " %)" : "")));
  return wrap;
}

function showNodes(nodes) {
  const tb = $("nodes").tBodies[0];
  tb.replaceChildren();
  const maxUsed = Math.max(0, ...nodes.filter((n) => n.up).map((n) => n.used_bytes));
  for (const n of nodes) {
    const tr = el("tr");
    tr.append(el("td", n.id), el("td", n.up ? "up" : "down", n.up ? "" : "down"),
      el("td", n.state || ""), el("td", n.domain || ""));
    if (n.up) {
      const used = el("td");
      used.append(capacityBar(n, maxUsed));
      tr.append(used, el("td", n.capacity_bytes > 0 ? bytes(n.capacity_bytes) : "no limit"),
        el("td", String(n.chunks)),
        el("td", typeof n.clock_offset_s === "number" ? clockOffset(n.clock_offset_s) : "-"));
    } else {
      const td = el("td", n.error || "not answering");
      td.colSpan = 4;
      tr.append(td);
    }
    tb.append(tr);
  }
}

function showPools(list) {
  const tb = $("pools").tBodies[0];
  tb.replaceChildren();
  for (const p of list) {
    const tr = el("tr");
    // Usage is the repair scanner's count, absent before its first complete scan.
    const scanned = typeof p.objects === "number";
    tr.append(el("td", p.name), el("td", p.profile), el("td", bytes(p.chunk_size)),
      el("td", p.write_quorum + " of " + p.n), el("td", scanned ? String(p.objects) : "-"),
      el("td", scanned ? bytes(p.logical_bytes) : "-"),
      el("td", scanned ? bytes(p.stored_bytes) : "-"),
      el("td", scanned ? String(p.degraded_stripes) : "-"));
    tb.append(tr);
  }
  const aged = list.find((p) => typeof p.usage_age_s === "number");
  $("pools-age").textContent = aged
    ? "objects and bytes as of the last scan, " + aged.usage_age_s.toFixed(0) + " s ago"
    : "objects and bytes: no complete scan yet";
  const names = list.map((p) => p.name).join("\n");
  if (names !== pools.map((p) => p.name).join("\n")) {
    const sel = $("deg-pool");
    sel.replaceChildren(...list.map((p) => el("option", p.name)));
    pools = list;
    lostChoices();
  }
  pools = list;
}

function lostChoices() {
  const p = pools.find((x) => x.name === $("deg-pool").value);
  const span = $("deg-lost");
  span.replaceChildren();
  if (!p || $("deg-op").value !== "decode") return;
  span.append(document.createTextNode("lost chunks: "));
  for (let i = 0; i < p.n; i++) {
    const l = el("label");
    const cb = el("input");
    cb.type = "checkbox";
    cb.value = String(i);
    cb.checked = i === 0;
    l.append(cb, document.createTextNode(String(i)));
    span.append(l);
  }
}

// A line chart of series [[t, v], ...] into an <svg> with a y axis scaled to the data.
function chart(svg, series, fmt) {
  const W = 600, H = 200, L = 70, B = 20;
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const pts = series.flat();
  if (pts.length === 0) return;
  // At least a minute wide, so a fresh gateway's few samples read as a start.
  const t1 = Math.max(...pts.map((p) => p[0]));
  const t0 = Math.min(t1 - 60, ...pts.map((p) => p[0]));
  const vmax = Math.max(...pts.map((p) => p[1])) || 1;
  const x = (t) => L + (t - t0) / (t1 - t0) * (W - L - 5);
  const y = (v) => H - B - v / vmax * (H - B - 10);
  for (let i = 0; i <= 4; i++) {
    const v = vmax * i / 4;
    const line = document.createElementNS(ns, "line");
    line.setAttribute("x1", L); line.setAttribute("x2", W);
    line.setAttribute("y1", y(v)); line.setAttribute("y2", y(v));
    line.setAttribute("class", "grid");
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", 2); label.setAttribute("y", y(v) + 4);
    label.textContent = fmt(v);
    svg.append(line, label);
  }
  const span = document.createElementNS(ns, "text");
  span.setAttribute("x", L); span.setAttribute("y", H - 4);
  span.textContent = "last " + Math.round(t1 - t0) + " s, one point a second";
  svg.append(span);
  series.forEach((s, i) => {
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("points", s.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "));
    pl.setAttribute("class", "s" + i);
    svg.append(pl);
  });
}

function showRates(r) {
  const s = r.samples;
  chart($("chart-bytes"), [s.map((p) => [p.t, p.received_bytes_per_s]), s.map((p) => [p.t, p.sent_bytes_per_s])],
    (v) => bytes(v) + "/s");
  chart($("chart-latency"), [s.map((p) => [p.t, p.latency_mean_s * 1e3]), s.map((p) => [p.t, p.latency_p99_s * 1e3])],
    (v) => v.toFixed(1) + " ms");
}

async function showRepair(cluster) {
  const p = $("repair");
  p.replaceChildren();
  let r;
  try {
    r = await api("/admin/v1/repair");
  } catch (e) {
    p.textContent = cluster.repair_queue + " chunks wait for repair" +
      (e.status === 404 ? "" : " (repair service: " + e.message + ")");
    return;
  }
  const pr = r.progress || {}, q = r.queue || {};
  const done = pr.stripes_done || 0, total = pr.stripes_total || 0;
  const bar = el("span", undefined, "bar");
  const fill = el("span");
  fill.style.width = (total > 0 ? Math.min(100, 100 * done / total) : (r.state === "idle" ? 100 : 0)).toFixed(1) + "%";
  bar.append(fill);
  const eta = pr.eta_s >= 0 ? ", ETA " + Math.round(pr.eta_s) + " s" : "";
  p.append(el("strong", r.state), document.createTextNode(
    (r.throttle_mbps > 0 ? " (throttled to " + r.throttle_mbps + " MB/s)" : "") + " "), bar,
  document.createTextNode(done + " of " + total + " stripes, " + bytes(pr.bytes_done || 0) + " of " +
    bytes(pr.bytes_total || 0) + ", " + bytes(pr.rate_bytes_per_s || 0) + "/s" + eta + "; queue: " +
    (q.stripes || 0) + " stripes (" + bytes(q.bytes || 0) + "), " + cluster.repair_queue +
    " chunks found degraded by reads"));
}

async function refresh() {
  try {
    const st = await api("/admin/v1/status");
    showHealth(st.health, st.cluster);
    showNodes(st.cluster.nodes);
    showPools(st.cluster.pools);
    showRates(await api("/admin/v1/rates"));
    await showRepair(st.cluster);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    if (e.message !== "unauthorized") $("updated").textContent = "cannot reach the control API: " + e.message;
  }
}

async function drawDeg(ev) {
  if (ev) ev.preventDefault();
  const q = new URLSearchParams({ pool: $("deg-pool").value, op: $("deg-op").value, format: "svg" });
  if ($("deg-op").value === "decode") {
    const lost = [...$("deg-lost").querySelectorAll("input:checked")].map((c) => c.value);
    q.set("lost", lost.join(","));
  }
  $("deg-error").textContent = "";
  try {
    const svg = await api("/admin/v1/deg?" + q.toString(), true);
    const img = $("deg-img");
    if (img.src) URL.revokeObjectURL(img.src);
    img.src = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
    img.alt = "DEG: " + q.get("op") + " of pool " + q.get("pool") + (q.get("lost") ? ", lost " + q.get("lost") : "");
  } catch (e) {
    $("deg-error").textContent = e.message;
  }
}

async function start() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  await refresh();
  if ($("main").hidden) return; // the token was refused
  await drawDeg();
  timer = setInterval(refresh, 2000);
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    start();
  });
  $("logout").addEventListener("click", () => logout());
  $("deg-form").addEventListener("submit", drawDeg);
  $("deg-op").addEventListener("change", lostChoices);
  $("deg-pool").addEventListener("change", lostChoices);
  if (sessionStorage.getItem(KEY)) start();
  else logout();
});
