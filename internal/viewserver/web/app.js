// netpulse connectivity view: plain JavaScript, no framework, no network access but this
// server's own JSON API (relative URLs, so it also works behind a proxy's path prefix).
// Everything from the API is inserted as text, never as HTML.
"use strict";

const GLYPH = { Unreachable: "✕", Unknown: "?", Degraded: "~", Reachable: "" };
const state = {
  route: { view: "", arg: "" },   // from location.hash
  main: null,                     // the last main view (zones, matrix, top) and its argument
  zones: null,                    // last /api/v1/zones
  etag: "",
  timer: 0,
  failures: 0,
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

async function getJSON(url, etag) {
  const headers = etag ? { "If-None-Match": etag } : {};
  const r = await fetch(url, { headers, cache: "no-cache" });
  if (r.status === 304) return { notModified: true };
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    const msg = body && body.error ? body.error : r.status + " " + r.statusText;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return { body, etag: r.headers.get("ETag") || "" };
}

// ---- formatting ----------------------------------------------------------------------

function pct(loss) {
  if (loss === undefined || loss === null) return "–";
  if (loss === 0) return "0%";
  if (loss >= 1) return "100%";
  return (loss * 100).toFixed(loss < 0.01 ? 2 : 1) + "%";
}

function ago(iso) {
  if (!iso) return "";
  const t = Date.parse(iso);
  if (isNaN(t)) return "";
  const s = Math.round((Date.now() - t) / 1000);
  return s < 0 ? "in " + span(-s) : span(s) + " ago";
}

function span(s) {
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? (s % 60) + "s" : "");
  if (s < 172800) return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d";
}

function when(iso) {
  if (!iso) return "";
  return iso.replace("T", " ").replace(/\.\d+/, "") + " (" + ago(iso) + ")";
}

const GRAY = { PacketLoss: true, HighLatency: true };

// cellClass: the verdict's colour; a Degraded cell whose first reason (hard failures come
// first) is a gray verdict has that verdict's own colour.
function cellClass(v, loss, reasons) {
  let c = "v-" + v;
  if (v === "Reachable" && loss > 0) c += " lossy";
  const r = reasons && reasons.length ? reasons[0] : "";
  if (v === "Degraded" && GRAY[r]) c += " g-" + r;
  return c;
}

// grayText: a pair's Degraded reason and the side a gray verdict blames.
function grayText(p) {
  const g = p.gray;
  if (!g) return p.degradedReason || "";
  if (g.side === "target") return g.reason + " at the target's node " + g.node;
  if (g.side === "observer") return g.reason + " at the observer's own node " + g.node;
  if (g.side === "path") return g.reason + " on this path alone";
  if (g.side === "zone") return g.reason + " between zones " + g.fromZone + " and " + g.toZone;
  return g.reason;
}

// degradedText: a cell's Degraded reasons, naming the zone pair its PacketLoss is blamed
// on (zl: a lossy link between the zones, no node).
function degradedText(reasons, zl) {
  return reasons.map((r) => r === "PacketLoss" && zl ? r + " between zones " + zl.from + " and " + zl.to : r).join(", ");
}

// ---- live cells: the leader gateway's newest probe result, an observation, not a verdict --

function secs(n) { return span(Math.max(0, Math.round(n || 0))); }

function liveWord(l) { return l.reachable ? "answered" : "no answer"; }

function liveText(l) {
  const probes = (l.ok || []).map((p) => p + " ✓").concat((l.failed || []).map((p) => p + " ✕")).join(" ");
  return "newest probe observed " + secs(l.ageSeconds) + " ago (" + (l.stable ? "stable" : "rotating") + " pair): " +
    liveWord(l) + (probes ? " · " + probes : "") + (l.p50 ? " · RTT p50 " + l.p50 : "");
}

function liveNote(z) {
  const l = z && z.live;
  if (!l) return "";
  if (l.state === "live") return "Pale cells have no object: they show the newest probe result (· answered, × no answer) and its age, an observation, not a verdict.";
  return l.message;
}

function pill(v, reason) {
  return el("span", { class: "pill " + cellClass(v, 0, reason ? [reason] : null), text: (v || "none") + (v === "Degraded" && reason ? ": " + reason : "") });
}

function condText(c) {
  if (!c) return "no netpulse condition";
  return c.type + "=" + c.status + (c.reason ? " (" + c.reason + ")" : "");
}

function countsText(counts) {
  const order = ["Unreachable", "Degraded", "Unknown", "Reachable"];
  const parts = [];
  for (const v of order) if (counts && counts[v]) parts.push(counts[v] + " " + v);
  return parts.length ? parts.join(", ") : "no pairs";
}

// ---- routing -------------------------------------------------------------------------

function parseRoute() {
  const h = decodeURIComponent(location.hash.replace(/^#/, ""));
  const i = h.indexOf("=");
  const view = i < 0 ? h : h.slice(0, i);
  const arg = i < 0 ? "" : h.slice(i + 1);
  state.route = { view, arg };
}

function go(hash) { location.hash = hash; }

window.addEventListener("hashchange", () => { parseRoute(); render(true); });

// ---- polling -------------------------------------------------------------------------

async function poll() {
  clearTimeout(state.timer);
  let interval = 2000;
  try {
    const r = await getJSON("api/v1/zones", state.etag);
    state.failures = 0;
    if (!r.notModified) {
      state.zones = r.body;
      state.etag = r.etag;
      await render(false);
    }
    setStatus();
    if (state.zones && state.zones.refreshSeconds) interval = state.zones.refreshSeconds * 1000;
  } catch (e) {
    state.failures++;
    document.body.dataset.state = "error";
    $("status").textContent = (e.status === 503 ? "" : "cannot update: ") + e.message +
      (state.zones ? " (showing the last answer)" : "");
    interval = Math.min(30000, 1000 * 2 ** Math.min(state.failures, 5));
  }
  state.timer = setTimeout(poll, interval);
}

function setStatus() {
  const z = state.zones;
  if (!z) return;
  document.body.dataset.state = "ready";
  const t = new Date().toLocaleTimeString();
  let s = z.nodes + " nodes · " + z.pairs + " pairs: " + countsText(z.counts);
  if (z.unplaced) s += " · " + z.unplaced + " unplaced";
  if (z.external) s += " · " + z.external + " external";
  if (z.live) s += z.live.state === "live" ? " · live: " + z.live.cells + " cells from " + z.live.observers + " observers" : " · no live cells";
  $("status").textContent = s + " · updated " + t;
}

// ---- rendering -----------------------------------------------------------------------

async function render(routeChanged) {
  const z = state.zones;
  if (!z) return;
  renderProblems(z);
  // A detail (node, target, pair) opens beside the main view the user was on.
  if (["zones", "matrix", "cross", "top"].includes(state.route.view)) state.main = { ...state.route };
  let { view, arg } = state.main || { view: "", arg: "" };
  if (!view) {
    view = z.nodes <= z.maxMatrixNodes ? "matrix" : "zones";
  }
  for (const v of ["zones", "matrix", "top"]) $("nav-" + v).classList.toggle("active", v === view);
  try {
    if (view === "zones") renderZones(z);
    else if (view === "top") await renderTop();
    else if (view === "cross") await renderMatrix("", arg);
    else await renderMatrix(arg, "");
  } catch (e) {
    $("view-title").textContent = "";
    $("view-note").textContent = e.message;
    $("view-body").replaceChildren();
  }
  await renderDetail(routeChanged);
}

function renderProblems(z) {
  const ul = $("problem-list");
  ul.replaceChildren();
  if (!z.problems.length) {
    ul.append(el("li", { class: "none", text: "none: every node's netpulse condition is False (or not written)" }));
    return;
  }
  for (const p of z.problems) {
    const c = p.condition;
    ul.append(el("li", {
      class: "cond-" + c.status, "data-problem-node": p.name, "data-status": c.status,
      title: c.message || "", onclick: () => go("node=" + p.name),
    }, el("b", { text: p.name }), p.zone ? " (" + p.zone + ")" : "",
    el("span", { class: "why", text: condText(c) + (c.since ? " since " + ago(c.since) : "") })));
  }
  if (z.problemsTotal > z.problems.length) {
    ul.append(el("li", { class: "muted", text: "+" + (z.problemsTotal - z.problems.length) + " more" }));
  }
}

function renderZones(z) {
  $("view-title").textContent = "Zones: observer zone (rows) → target zone (columns)";
  $("view-note").textContent = "Each cell aggregates the pairs between the nodes of two zones. Click a cell to see its nodes.";
  const cells = new Map();
  for (const c of z.cells) cells.set(c.from + "\u0000" + c.to, c);
  const name = (zn) => zn || "(no zone)";
  const head = el("tr", {}, el("th", { class: "zone", text: "from \\ to" }));
  for (const t of z.zones) {
    head.append(el("th", { class: "col", "data-zone": t.name, onclick: () => go("matrix=" + t.name),
      title: t.count + " nodes, " + t.problemNodes + " with a problem" },
    el("span", { text: name(t.name) + " (" + t.count + ")" }), t.problemNodes ? el("span", { class: "badge", text: "!" + t.problemNodes }) : null));
  }
  const table = el("table", { class: "matrix zones", id: "zones" }, el("thead", {}, head));
  const body = el("tbody");
  for (const f of z.zones) {
    const tr = el("tr", {}, el("th", { class: "row" + (f.problemNodes ? " cond-True" : ""), "data-zone": f.name,
      onclick: () => go("matrix=" + f.name) }, name(f.name) + " (" + f.count + ")"));
    for (const t of z.zones) {
      const c = cells.get(f.name + "\u0000" + t.name);
      if (!c) {
        tr.append(el("td", { class: "none", title: name(f.name) + " → " + name(t.name) + ": no object" }));
        continue;
      }
      const total = Object.values(c.counts).reduce((a, b) => a + b, 0);
      const bad = (c.counts.Unreachable || 0);
      let title = name(f.name) + " → " + name(t.name) + "\n" + countsText(c.counts) + "\n" + c.nodePairs +
        " node pairs · worst p50 " + (c.p50 || "–") + " · worst loss " + pct(c.loss);
      // The exporter's zone pair verdict (a ZoneNetworkHealth), when it wrote one.
      const zp = c.zonePair;
      if (zp) title += "\nzone pair " + zp.verdict + " (" + (zp.reason || "") + "): " + zp.failingNodePairs + " of " +
        zp.nodePairs + " node pairs fail" + (zp.message ? "\n" + zp.message : "") +
        (zp.degradedMessage ? "\nDegraded " + zp.degradedReason + ": " + zp.degradedMessage : "");
      const route = f.name === t.name ? "matrix=" + f.name : "cross=" + f.name + "," + t.name;
      if (c.degraded) title += "\ndegraded: " + degradedText(c.degraded, c.zoneLoss);
      tr.append(el("td", { class: cellClass(c.verdict, c.loss, c.degraded) + (zp && zp.verdict === "Unreachable" ? " zone-cut" : ""),
        "data-from": f.name, "data-to": t.name, "data-v": c.verdict, "data-zone-pair": zp ? zp.verdict : "",
        title, onclick: () => go(route) }, el("span", { class: "n", text: total }), bad ? " ✕" + bad : "",
        zp && zp.verdict === "Unreachable" ? el("span", { class: "zcut", text: " ⛓" }) : ""));
    }
    body.append(tr);
  }
  table.append(body);
  $("view-body").replaceChildren(table);
}

// renderMatrix draws the node matrix of zones (arg: "a,b"; all when empty), or with cross
// ("from,to") the rows of one zone against the columns of another.
async function renderMatrix(arg, cross) {
  const zones = arg ? arg.split(",") : [];
  let q = zones.map((z) => "zone=" + encodeURIComponent(z)).join("&");
  let title = zones.length ? " · zones " + zones.map((z) => z || "(no zone)").join(", ") : "";
  if (cross) {
    const [from, to] = cross.split(",");
    q = "from=" + encodeURIComponent(from) + "&to=" + encodeURIComponent(to || "");
    title = " · zone " + (from || "(no zone)") + " → zone " + (to || "(no zone)");
  }
  const r = await getJSON("api/v1/matrix" + (q ? "?" + q : ""));
  const m = r.body;
  const cols = m.targets || m.nodes;
  const colZones = m.targetZones || m.zones;
  $("view-title").textContent = "Nodes: observer (rows) → target (columns)" + title;
  $("view-note").textContent = "Hover a cell for RTT p50 and loss; click it for the probes and outages, a node for why it reads as it does. " + liveNote(state.zones);
  document.body.dataset.live = m.live ? m.live.state : "";
  const n = m.nodes.length;
  const nc = cols.length;
  const grid = new Array(n);
  for (const c of m.cells) {
    (grid[c.o] = grid[c.o] || new Map()).set(c.t, c);
  }
  // Worst verdict per target column.
  const sev = { Reachable: 1, Unknown: 2, Degraded: 3, Unreachable: 4 };
  const colWorst = new Array(nc).fill("");
  for (const c of m.cells) if ((sev[c.v] || 0) > (sev[colWorst[c.t]] || 0)) colWorst[c.t] = c.v;
  const zoneStart = new Set(m.zones.map((z) => z.first));
  const colZoneStart = new Set(colZones.map((z) => z.first));

  const zrow = el("tr", {}, el("th", { class: "zone", rowspan: 2, text: "observer ↓  target →" }));
  for (const z of colZones) zrow.append(el("th", { class: "zone zs", colspan: z.count, text: (z.name || "(no zone)") }));
  const nrow = el("tr");
  cols.forEach((node, i) => {
    const st = node.condition ? node.condition.status : "none";
    nrow.append(el("th", {
      class: "col node cond-" + st + (colZoneStart.has(i) ? " zs" : ""), "data-node": node.name,
      "data-condition": st, "data-target-verdict": colWorst[i] || "None",
      title: node.name + "\n" + condText(node.condition) + (node.condition && node.condition.message ? "\n" + node.condition.message : ""),
      onclick: () => go("node=" + node.name),
    }, el("span", { text: node.name })));
  });
  const table = el("table", { class: "matrix" + (Math.max(n, nc) <= 40 ? " big" : ""), id: "matrix" }, el("thead", {}, zrow, nrow));
  const body = el("tbody");
  m.nodes.forEach((node, r) => {
    const st = node.condition ? node.condition.status : "none";
    const tr = el("tr", { class: zoneStart.has(r) ? "zs" : "" }, el("th", {
      class: "row node cond-" + st, "data-node": node.name, title: condText(node.condition),
      onclick: () => go("node=" + node.name),
    }, node.name, st === "True" ? el("span", { class: "badge", text: "!" }) : null));
    const row = grid[r];
    for (let c = 0; c < nc; c++) {
      const zs = colZoneStart.has(c) ? " zs" : "";
      const target = cols[c].name;
      if (target === node.name) { tr.append(el("td", { class: "self" + zs })); continue; }
      const cell = row && row.get(c);
      if (!cell) {
        tr.append(el("td", { class: "none" + zs, title: node.name + " → " + target + ": no object (not probed as a stable pair)" +
          (m.live && m.live.state === "live" ? ", and no probe result within the live window" : "\n" + (m.live ? m.live.message : "")) }));
        continue;
      }
      if (!cell.n && cell.live) {
        const l = cell.live;
        tr.append(el("td", {
          class: "live " + (l.reachable ? "live-ok" : "live-fail") + zs, "data-o": node.name, "data-t": target,
          "data-live": l.reachable ? "reachable" : "unreachable", "data-age": Math.round(l.ageSeconds),
          title: node.name + " → " + target + "\nno object: " + liveText(l) + "\n(an observation, not a verdict)",
          onclick: () => go("pair=" + node.name + "," + target),
        }, l.reachable ? "·" : "×"));
        continue;
      }
      tr.append(el("td", {
        class: cellClass(cell.v, cell.loss, cell.dr) + zs, "data-o": node.name, "data-t": target, "data-v": cell.v,
        "data-degraded": cell.dr ? cell.dr.join(",") : null,
        title: node.name + " → " + target + "\n" + cell.v + (cell.dr ? ": " + degradedText(cell.dr, cell.zl) + " (click for the figures)" : "") +
          "\nRTT p50 " + (cell.p50 || "–") + " · loss " +
          (cell.hasLoss ? pct(cell.loss) : "–") + "\n" + cell.n + (cell.n === 1 ? " object" : " objects") +
          (cell.live ? "\n" + liveText(cell.live) : ""),
        onclick: () => go("pair=" + node.name + "," + target),
      }, GLYPH[cell.v] || ""));
    }
    body.append(tr);
  });
  table.append(body);
  $("view-body").replaceChildren(table);
}

async function renderTop() {
  const r = await getJSON("api/v1/top?n=30");
  $("view-title").textContent = "Worst pairs by loss, then RTT p50";
  $("view-note").textContent = "";
  $("view-body").replaceChildren(pairsTable(r.body.pairs, true));
}

function pairsTable(pairs, withTarget) {
  const t = el("table", { class: "list" }, el("tr", {},
    el("th", { text: "observer" }), el("th", { text: "source pod" }), withTarget ? el("th", { text: "target" }) : null,
    el("th", { text: "target node" }), el("th", { text: "verdict" }), el("th", { text: "p50" }), el("th", { text: "loss" }),
    el("th", { text: "since" }), el("th", { text: "reason" })));
  for (const p of pairs) {
    const clickable = p.observerNode && p.targetNode;
    t.append(el("tr", { class: clickable ? "clickable" : "", "data-pair": p.namespace + "/" + p.name,
      onclick: clickable ? () => go("pair=" + p.observerNode + "," + p.targetNode) : null },
    el("td", { text: p.observerNode || "?" }), el("td", { text: p.sourcePod }),
    withTarget ? el("td", { text: p.target }) : null, el("td", { text: p.targetNode || "–" }),
    el("td", {}, pill(p.verdict, p.degradedReason)), el("td", { text: p.p50 || "–" }), el("td", { text: p.hasLoss ? pct(p.loss) : "–" }),
    el("td", { text: p.outageSince ? ago(p.outageSince) : "" }),
    p.verdict === "Degraded" && p.degradedReason
      ? el("td", { class: "degraded-reason", text: grayText(p), title: p.degradedMessage || "" })
      : el("td", { text: p.reason || "", title: p.message || "" })));
  }
  return t;
}

async function renderDetail(routeChanged) {
  const { view, arg } = state.route;
  const aside = $("detail");
  const body = $("detail-body");
  let url = "";
  if (view === "node" && arg) url = "api/v1/node/" + encodeURIComponent(arg);
  else if (view === "target" && arg) url = "api/v1/target/" + arg.split("/").map(encodeURIComponent).join("/");
  else if (view === "pair" && arg) {
    const [o, t] = arg.split(",");
    url = "api/v1/pair?observer=" + encodeURIComponent(o) + "&target=" + encodeURIComponent(t || "");
  }
  if (!url) { aside.hidden = true; return; }
  aside.hidden = false;
  if (routeChanged) body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  try {
    const r = await getJSON(url);
    if (view === "pair") body.replaceChildren(...pairDetail(r.body));
    else body.replaceChildren(...explanation(r.body));
  } catch (e) {
    body.replaceChildren(el("p", { text: e.message }));
  }
}

function explanation(e) {
  const out = [el("h2", { text: (e.kind === "Node" ? "Node " : "Pod ") + e.name })];
  out.push(el("p", {}, pill(e.verdict), e.since ? " since " + when(e.since) : ""));
  const lines = el("ul", { class: "lines", id: "why" });
  for (const l of e.lines) lines.append(el("li", { text: l }));
  out.push(lines);
  if (e.pairs.length) {
    out.push(el("h3", { text: "Pairs towards it" }));
    out.push(pairsTable(e.pairs, e.kind === "Node"));
  }
  if (e.observedGray && e.observedGray.length) {
    out.push(el("h3", { text: "Pairs it observes with a gray verdict" }));
    out.push(pairsTable(e.observedGray, true));
  }
  return out;
}

function pairDetail(r) {
  const out = [el("h2", { text: r.observer + " → " + r.target })];
  if (!r.pairs.length) out.push(el("p", { text: "No object: this pair is not probed as a stable pair and is not failing." }));
  if (r.live) {
    const l = r.live;
    out.push(el("div", { class: "object live-detail", id: "live-detail", "data-live": l.reachable ? "reachable" : "unreachable" },
      el("h3", {}, "Newest probe ", el("span", { class: "pill " + (l.reachable ? "live-ok" : "live-fail"), text: liveWord(l) })),
      el("p", {}, "observed " + secs(l.ageSeconds) + " ago (at " + l.at.replace("T", " ").replace(/\.\d+/, "") + ") as a " + (l.stable ? "stable" : "rotating") + " pair",
        el("br"), "answered: " + ((l.ok || []).join(", ") || "none") + " · no answer: " + ((l.failed || []).join(", ") || "none") +
          " · RTT p50 " + (l.p50 || "–"),
        el("br"), el("span", { class: "muted", text: "The leader gateway's newest result of one probe round: an observation, not a verdict (verdicts need a quorum of observers and several rounds)." }))));
  } else if (r.liveStatus && r.liveStatus.state !== "live") {
    out.push(el("p", { class: "muted", text: r.liveStatus.message }));
  }
  for (const p of r.pairs) {
    const st = p.status || {};
    const box = el("div", { class: "object" },
      el("h3", {}, p.namespace + "/" + p.name + " ", pill(p.verdict, p.degradedReason)),
      el("p", {}, p.sourcePod + " → " + p.targetKind.toLowerCase() + " " + p.target,
        el("br"), el("span", { class: "muted", text: (p.reason ? p.reason + ": " : "") + (p.message || "") }),
        p.degradedReason ? el("span", { class: "degraded", "data-degraded": p.degradedReason }, el("br"),
          el("b", { text: "Degraded: " + grayText(p) }), p.degradedSince ? " since " + when(p.degradedSince) : "",
          p.degradedMessage ? el("br") : null, p.degradedMessage || "") : null,
        el("br"), "RTT p50 " + (p.p50 || "–") + " · p99 " + (p.p99 || "–") + " · loss " + (p.hasLoss ? pct(p.loss) : "–") +
          " · window " + (st.window || "–"),
        el("br"), "verdict since " + (when(p.verdictSince) || "–") + " · written " + (when(p.lastObserved) || "–") +
          (p.freshUntil ? " · current until " + when(p.freshUntil) : "")));
    const probes = el("table", { class: "list" }, el("tr", {}, ...["probe", "sent", "lost", "p50", "p99", "last success", "last failure"].map((h) => el("th", { text: h }))));
    for (const pr of st.probes || []) {
      const f = pr.lastFailure;
      probes.append(el("tr", {}, el("td", { text: pr.type }), el("td", { text: pr.sent }), el("td", { text: pr.lost }),
        el("td", { text: pr.latency ? pr.latency.p50 : "–" }), el("td", { text: pr.latency ? pr.latency.p99 : "–" }),
        el("td", { text: pr.lastSuccessTime ? ago(pr.lastSuccessTime) : "never" }),
        el("td", { text: f ? f.reason + " " + ago(f.time) + (f.message ? ": " + f.message : "") : "" })));
    }
    box.append(el("h4", { text: "Probes" }), probes);
    const outages = el("table", { class: "list" }, el("tr", {}, ...["start", "end", "duration", "reason", "message"].map((h) => el("th", { text: h }))));
    for (const o of st.outages || []) {
      const end = o.end ? Date.parse(o.end) : Date.now();
      const secs = Math.max(0, Math.round((end - Date.parse(o.start)) / 1000));
      outages.append(el("tr", {}, el("td", { text: when(o.start) }), el("td", { text: o.end ? when(o.end) : "ongoing" }),
        el("td", { text: secs + "s" }), el("td", { text: o.reason || "" }), el("td", { text: o.message || "" })));
    }
    box.append(el("h4", { text: "Outage history (newest first)" }), (st.outages || []).length ? outages : el("p", { class: "muted", text: "none" }));
    const links = el("p");
    if (p.targetKind === "Pod") links.append(el("a", { href: "#target=" + p.target, text: "why is " + p.target + " judged so?" }), " · ");
    if (p.targetNode) links.append(el("a", { href: "#node=" + p.targetNode, text: "node " + p.targetNode }));
    box.append(links);
    out.push(box);
  }
  return out;
}

$("detail-close").addEventListener("click", (ev) => {
  ev.preventDefault();
  const m = state.main;
  go(m && m.view ? m.view + (m.arg ? "=" + m.arg : "") : "");
});

parseRoute();
poll();
