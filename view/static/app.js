// modelcalls view: the front end. Plain DOM, no libraries. Payload text is only ever placed with
// text nodes (h() below) and attribute setters, never parsed as HTML.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

// h builds an element: attrs set with setAttribute (on* handlers as listeners), children appended
// as nodes or as text nodes.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

async function api(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const nf = new Intl.NumberFormat("en-US");
const fmtInt = (n) => (n === null || n === undefined ? "—" : nf.format(n));
const fmtMS = (v) => (v === null || v === undefined ? "—" : v >= 10000 ? nf.format(Math.round(v)) : v.toFixed(v >= 100 ? 0 : 1));
const fmtS = (v) => (v === null || v === undefined ? "—" : v.toFixed(v >= 100 ? 0 : 2));
const fmtPct = (v) => (v === null || v === undefined ? "—" : (v * 100).toFixed(1) + " %");
const fmtTime = (t) => (t === null || t === undefined ? "—" : new Date(t * 1000).toISOString().replace("T", " ").replace("Z", " UTC"));
// list and obj read a field the page expects to be a list or an object: a missing or null one (an
// older server, a field an answer left out) reads as empty instead of stopping the page.
const list = (v) => (Array.isArray(v) ? v : []);
const obj = (v) => (v !== null && typeof v === "object" && !Array.isArray(v) ? v : {});
const orDash = (v) => (v === null || v === undefined || v === "" ? "—" : v);

const rolloutHref = (id, call) => "#/rollout/" + encodeURIComponent(id) + (call !== undefined ? "?call=" + call : "");
const callHref = (id, n) => "#/rollout/" + encodeURIComponent(id) + "/call/" + n;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query || "") };
}

// ---- page state and live updates ----------------------------------------------------------------

let current = null; // { render: async () => version, key: string }
let shownVersion = 0;
let lastData = ""; // JSON of the data last rendered, to skip re-rendering what did not change

const main = () => document.getElementById("main");

function setLive(ok, text) {
  const el = document.getElementById("live");
  el.className = "live " + (ok ? "on" : "off");
  el.textContent = text;
}

async function route() {
  const { parts, params } = parseHash();
  let page;
  if (parts.length === 0) page = overviewPage();
  else if (parts[0] === "rollouts") page = listPage(params);
  else if (parts[0] === "search") page = searchPage(params);
  else if (parts[0] === "diff") page = diffPage(params);
  else if (parts[0] === "rollout" && parts.length === 2) page = rolloutPage(parts[1], params);
  else if (parts[0] === "rollout" && parts.length === 3 && parts[2] === "transcript") page = transcriptPage(parts[1]);
  else if (parts[0] === "rollout" && parts.length === 4 && parts[2] === "call") page = callPage(parts[1], Number(parts[3]));
  else page = { title: "Not found", load: async () => ({ version: shownVersion }), draw: () => [h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the overview"))] };
  for (const a of document.querySelectorAll("[data-nav]")) {
    const on = (a.dataset.nav === "overview" && parts.length === 0) || (a.dataset.nav === "rollouts" && parts[0] === "rollouts") || (a.dataset.nav === "search" && parts[0] === "search");
    if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  current = page;
  lastData = "";
  const m = main();
  m.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  await refresh(true);
  document.title = page.title + " · modelcalls view";
  m.focus({ preventScroll: true });
}

// refresh reloads the current page's data and redraws it when it changed.
async function refresh(first) {
  const page = current;
  let data;
  try {
    data = await page.load();
  } catch (e) {
    if (page !== current) return;
    main().replaceChildren(h("h1", {}, page.title), h("p", { class: "notice err", role: "alert" }, "Could not load: " + e.message));
    return;
  }
  if (page !== current) return;
  shownVersion = Math.max(shownVersion, data.version || 0);
  const { version, progress, ...rest } = data;
  const key = JSON.stringify(rest) + JSON.stringify(progress || null);
  if (!first && key === lastData) return;
  lastData = key;
  const y = window.scrollY;
  if (page.update && !first) page.update(data);
  else main().replaceChildren(...page.draw(data).flat(Infinity).filter(Boolean));
  if (!first) window.scrollTo(0, y);
}

async function liveLoop() {
  for (;;) {
    try {
      const r = await api("/api/changes?since=" + shownVersion + "&timeout=25");
      setLive(true, "live · checked " + new Date().toLocaleTimeString());
      if (r.version !== shownVersion) {
        shownVersion = r.version;
        if (current) await refresh(false);
        await sleep(700); // at most ~1.5 redraws a second while a large dir is being indexed
      }
    } catch (e) {
      setLive(false, "offline: " + e.message);
      await sleep(2000);
    }
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- charts ---------------------------------------------------------------------------------------

// barChart draws labelled vertical bars as SVG; each bar carries a <title> with its value.
function barChart(id, title, labels, values, opts = {}) {
  const W = 420, H = 170, L = 34, B = 32, T = 10;
  const n = Math.max(values.length, 1);
  const max = Math.max(1, ...values);
  const bw = (W - L - 10) / n;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": id + "-t " + id + "-d" },
    s("title", { id: id + "-t" }, title),
    s("desc", { id: id + "-d" }, labels.map((l, i) => `${l}: ${values[i]}`).join("; ")));
  svg.appendChild(s("line", { x1: L, y1: H - B, x2: W - 5, y2: H - B, stroke: "#d0d7de" }));
  svg.appendChild(s("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, fmtInt(max)));
  svg.appendChild(s("text", { x: L - 4, y: H - B, "text-anchor": "end" }, "0"));
  const every = Math.ceil(n / 7);
  values.forEach((v, i) => {
    const bh = ((H - B - T) * v) / max;
    const x = L + i * bw;
    const err = opts.errors ? opts.errors[i] : 0;
    const g = s("g", {}, s("title", {}, `${labels[i]}: ${fmtInt(v)}${opts.errors ? ", errors " + fmtInt(err) : ""}`));
    g.appendChild(s("rect", { class: "bar", x: x + 1, y: H - B - bh, width: Math.max(bw - 2, 1), height: bh }));
    if (err) {
      const eh = ((H - B - T) * err) / max;
      g.appendChild(s("rect", { class: "bar err", x: x + 1, y: H - B - eh, width: Math.max(bw - 2, 1), height: eh }));
    }
    svg.appendChild(g);
    if (i % every === 0) svg.appendChild(s("text", { x: x + bw / 2, y: H - B + 14, "text-anchor": "middle" }, labels[i]));
  });
  if (opts.xlabel) svg.appendChild(s("text", { x: W / 2, y: H - 4, "text-anchor": "middle" }, opts.xlabel));
  return h("figure", {}, svg, h("figcaption", {}, opts.caption || title));
}

function histChart(id, title, hist) {
  hist = obj(hist);
  const labels = list(hist.edges).map((e) => "≥" + fmtEdge(e));
  const cap = `${title}: ${fmtInt(hist.count)} calls; p50 ${fmtMS(hist.p50)} ms, p90 ${fmtMS(hist.p90)} ms, p99 ${fmtMS(hist.p99)} ms, max ${fmtMS(hist.max)} ms`;
  return barChart(id, title, labels, list(hist.counts), { caption: cap, xlabel: "milliseconds (bucket lower edge)" });
}
// fmtOffset writes a time offset in seconds, in ms when the whole span is under 2 s.
const fmtOffset = (sec, span) => (span < 2 ? "+" + fmtMS(sec * 1000) + " ms" : "+" + fmtS(sec) + " s");
const fmtEdge = (ms) => (ms >= 1000 ? ms / 1000 + "s" : ms + "ms");

// ---- overview ---------------------------------------------------------------------------------

function overviewPage() {
  return {
    title: "Run overview",
    load: () => api("/api/overview"),
    draw: (o) => {
      const out = [h("h1", {}, "Run overview")];
      const tokens = obj(o.tokens), over = obj(o.calls_over_time), overCalls = list(over.calls);
      out.push(progressNote(o.progress));
      out.push(h("p", { class: "muted" }, "Capture dirs: " + list(o.capture_dirs).join(", ") + (o.rollouts_file ? " · rollouts file: " + o.rollouts_file : "")));
      out.push(h("dl", { class: "cards", "aria-label": "Totals" },
        card("Rollouts", fmtInt(o.rollouts), "rollouts"),
        card("Calls", fmtInt(o.calls), "calls"),
        card("Calls with error", fmtInt(o.calls_with_error), "errors"),
        card("Pending calls", fmtInt(o.pending_calls), "pending"),
        card("Tokens in", fmtInt(tokens.in), "tokens-in"),
        card("Tokens out", fmtInt(tokens.out), "tokens-out"),
        card("Cached tokens", fmtInt(tokens.cached), "tokens-cached"),
        card("Reasoning tokens", fmtInt(tokens.reasoning), "tokens-reasoning"),
        card("Cache hit rate", fmtPct(obj(o.cache).hit_rate), "cache-hit-rate"),
        card("Unreadable lines", fmtInt(o.damaged_lines), "damaged")));

      out.push(h("h2", {}, "Gaps"));
      const g = obj(o.gaps);
      const gapList = [
        ["pending", "Pending (a call is in flight)", list(g.pending), g.pending_count],
        ["incomplete", "Incomplete (a capture write failed)", list(g.incomplete), g.incomplete_count],
        ["unreadable", "Unreadable lines (torn or invalid)", list(g.unreadable), g.unreadable_count],
        ["abandoned", "Abandoned writes (stale claims)", list(g.abandoned), g.abandoned_count],
        ["no-capture", "In the rollouts file, nothing captured", list(g.no_capture), g.no_capture_count],
      ].filter((x) => x[3] > 0);
      if (gapList.length === 0) out.push(h("p", { id: "gaps-none" }, "No gaps: every rollout is fully readable and nothing is in flight."));
      else out.push(h("ul", { class: "gaps", id: "gaps" }, gapList.map(([k, label, ids, n]) =>
        h("li", { "data-gap": k }, h("strong", {}, label + ": " + fmtInt(n) + " "),
          ids.map((id, i) => [i ? ", " : "", h("a", { href: rolloutHref(id) }, id)]), n > ids.length ? " …" : ""))));

      out.push(h("div", { class: "grid2" },
        h("section", { "aria-labelledby": "h-errors" }, h("h2", { id: "h-errors" }, "Errors by category"),
          list(o.errors).length === 0 ? h("p", { id: "errors-none" }, "No call has an error.") :
            table("Errors", ["category", "calls"], list(o.errors).map((e) => [e.name, fmtInt(e.count)]), [false, true], "errors-table")),
        h("section", { "aria-labelledby": "h-time" }, h("h2", { id: "h-time" }, "Calls over time"),
          over.start === null || over.start === undefined || overCalls.length === 0 ? h("p", { id: "time-none" }, "No calls yet.") :
            barChart("time", "Calls started per " + over.bucket_s + " s",
              overCalls.map((_, i) => "+" + fmtS(i * over.bucket_s) + "s"), overCalls,
              { errors: list(over.errors), caption: `Calls started per ${over.bucket_s} s from ${fmtTime(over.start)} (errors in red)` })),
        h("section", { "aria-labelledby": "h-lat" }, h("h2", { id: "h-lat" }, "Latency"), histChart("lat", "Latency (latency_total_ms)", o.latency_ms)),
        h("section", { "aria-labelledby": "h-ttft" }, h("h2", { id: "h-ttft" }, "Time to first token"), histChart("ttft", "TTFT (latency_ttft_ms)", o.ttft_ms))));

      const groupRows = (groups) => list(groups).map((m) => [cutName(m.name), fmtInt(m.calls), fmtInt(m.errors), fmtInt(obj(m.tokens).in), fmtInt(obj(m.tokens).out),
        fmtInt(obj(m.tokens).cached), fmtInt(obj(m.tokens).reasoning), fmtMS(m.latency_p50_ms), fmtMS(m.ttft_p50_ms)]);
      const gcols = ["calls", "errors", "tokens in", "tokens out", "cached", "reasoning", "latency p50 ms", "TTFT p50 ms"];
      const right = [false, true, true, true, true, true, true, true, true];
      out.push(h("h2", {}, "Per model"), table("Per model", ["model", ...gcols], groupRows(o.models), right, "models-table"));
      out.push(h("h2", {}, "Per dialect"), table("Per dialect", ["dialect", ...gcols], groupRows(o.dialects), right, "dialects-table"));
      return out;
    },
  };
}

// cutName shows a name (a model, a path) on one line, cut with an ellipsis, whole in its tooltip.
function cutName(v) {
  return v === null || v === undefined || v === "" ? "—" : h("span", { class: "cut", title: String(v) }, String(v));
}

function card(label, value, id) {
  return h("div", {}, h("dt", {}, label), h("dd", { id: "card-" + id }, value));
}

function progressNote(p) {
  if (!p) return null;
  const out = [];
  if (!p.complete) out.push(h("p", { class: "notice", id: "indexing" }, `Indexing: ${fmtInt(p.indexed)} of ${fmtInt(p.total)} rollouts read so far.`));
  for (const e of list(p.errors)) out.push(h("p", { class: "notice err" }, e));
  return out;
}

// table renders rows of strings or nodes; right[i] right-aligns column i.
function table(caption, cols, rows, right, id) {
  return h("div", { class: "scroll" }, h("table", { id },
    h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {}, cols.map((c, i) => h("th", { scope: "col", class: right && right[i] ? "num" : null }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: right && right[i] ? "num" : null }, c)))))));
}

// ---- rollout list -----------------------------------------------------------------------------

// listCols are the list's own columns: [field, label, numeric, shown by default]. The record's
// fields (reward, ...) come right after the rollout id by default; the column chooser changes which
// columns show, remembered in the browser (localStorage).
const listCols = [
  ["id", "rollout", false, true], ["calls", "calls", true, true], ["errors", "errors", true, true], ["pending", "pending", true, true],
  ["abandoned", "abandoned", true, false], ["damaged_lines", "unreadable", true, true], ["incomplete", "incomplete", false, false],
  ["tokens_in", "tokens in", true, true], ["tokens_out", "tokens out", true, true],
  ["tokens_cached", "cached", true, true], ["tokens_reasoning", "reasoning", true, true], ["latency_ms", "latency ms (sum)", true, true],
  ["max_ttft_ms", "max TTFT ms", true, false], ["duration_s", "duration s", true, true], ["started_at", "started", false, true],
  ["ended_at", "ended", false, false], ["model", "model", false, true], ["dialect", "dialect", false, true], ["dir", "capture dir", false, false],
];
const nameCols = new Set(["id", "model", "dialect", "dir"]); // text that must not wrap: cut with an ellipsis, whole in a tooltip
const colsKey = "modelcalls.view.columns";

// listColumns returns every column of the list (own fields, then record fields; a record field
// named like an own field is "record.NAME", so every column is one field) and which are shown.
function listColumns(recordFields) {
  const own = new Set(listCols.map((c) => c[0]));
  // reward first; NeMo Gym's own bookkeeping fields (_ng_...) last and hidden until chosen.
  const rank = (f) => (f === "reward" ? 0 : f.startsWith("_") ? 2 : 1);
  const recs = recordFields.filter((f) => f !== "_ng_rollout_id").sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))
    .map((f) => ["record." + f, own.has(f) ? "record." + f : f, true, !own.has(f) && !f.startsWith("_")]);
  const all = [listCols[0], ...recs, ...listCols.slice(1)];
  let chosen = null;
  try { chosen = JSON.parse(localStorage.getItem(colsKey) || "null"); } catch { chosen = null; }
  const shown = new Set(all.filter((c) => (chosen && c[0] in chosen ? chosen[c[0]] : c[3])).map((c) => c[0]));
  shown.add("id");
  return { all, shown };
}
function saveColumn(field, on) {
  let chosen = {};
  try { chosen = JSON.parse(localStorage.getItem(colsKey) || "{}") || {}; } catch { chosen = {}; }
  chosen[field] = on;
  try { localStorage.setItem(colsKey, JSON.stringify(chosen)); } catch { /* storage off: the choice lasts this page */ }
}

function listPage(params) {
  const q = { sort: params.get("sort") || "id", order: params.get("order") || "asc", filter: params.get("filter") || "",
    offset: Number(params.get("offset") || 0), limit: Number(params.get("limit") || 50) };
  const go = (patch) => {
    const n = { ...q, ...patch };
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(n)) if (v !== "" && v !== null) p.set(k, v);
    location.hash = "#/rollouts?" + p.toString();
  };
  let region, chooser;
  const drawTable = (res) => {
    if (res.error) return [h("p", { class: "notice err", id: "filter-error", role: "alert" }, res.error)];
    const out = [progressNote(res.progress)];
    const rows = list(res.rows), recordFields = list(res.record_fields);
    const from = res.matched === 0 ? 0 : res.offset + 1, to = res.offset + rows.length;
    out.push(h("p", { id: "list-count", role: "status" }, `Rollouts ${fmtInt(from)}–${fmtInt(to)} of ${fmtInt(res.matched)}` +
      (res.matched !== res.total ? ` (filtered from ${fmtInt(res.total)})` : "")));
    const { all, shown } = listColumns(recordFields);
    const cols = all.filter((c) => shown.has(c[0]));
    if (chooser) chooser.replaceChildren(...columnChooser(all, shown, () => region.replaceChildren(...drawTable(res).flat().filter(Boolean))));
    const head = h("tr", {}, cols.map(([field, label, num]) => {
      const sorted = res.sort === field || res.sort === field.replace(/^record\./, "");
      return h("th", { scope: "col", class: num ? "num" : null, "aria-sort": sorted ? (res.order === "desc" ? "descending" : "ascending") : null },
        h("button", { type: "button", "data-sort": field, onclick: () => go({ sort: field, order: sorted && res.order === "asc" ? "desc" : "asc", offset: 0 }) }, label));
    }));
    const body = h("tbody", {}, rows.map((r) => h("tr", { "data-rollout": r.id }, cols.map(([field, , num]) => {
      // A name or a time stays on one line (a name cut by span.cut).
      const td = h("td", { class: num ? "num" : nameCols.has(field) || field.endsWith("ed_at") ? "name" : null });
      if (field === "id") {
        td.append(h("a", { class: "cut", href: rolloutHref(r.id), title: r.id }, r.id));
        if (r.pending) td.append(h("span", { class: "badge b-pending" }, r.pending + " pending"));
        if (r.incomplete) td.append(h("span", { class: "badge b-warn" }, "incomplete"));
        if (r.damaged_lines) td.append(h("span", { class: "badge b-err" }, "unreadable lines"));
        if (!r.has_capture && !r.pending && !r.incomplete) td.append(h("span", { class: "badge b-hist" }, "no capture"));
      } else if (field.startsWith("record.")) {
        const v = r.record ? r.record[field.slice(7)] : undefined;
        td.textContent = v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v);
      } else if (field === "latency_ms") td.textContent = fmtMS(r.latency_ms);
      else if (field === "duration_s") td.textContent = fmtS(r.duration_s);
      else if (field === "started_at" || field === "ended_at") td.textContent = fmtTime(r[field]);
      else if (field === "max_ttft_ms") td.textContent = fmtMS(r[field]);
      else if (num) td.textContent = fmtInt(r[field]);
      else td.textContent = orDash(r[field] === true ? "yes" : r[field] === false ? "no" : r[field]);
      if (nameCols.has(field) && field !== "id" && r[field]) {
        td.title = String(r[field]);
        td.replaceChildren(h("span", { class: "cut" }, td.textContent));
      }
      return td;
    }))));
    out.push(h("div", { class: "scroll" }, h("table", { id: "rollouts-table" }, h("caption", {}, "Rollouts (select a column to sort)"), h("thead", {}, head), body)));
    out.push(h("nav", { class: "pager", "aria-label": "Pages" },
      h("button", { type: "button", id: "prev-page", disabled: res.offset === 0, onclick: () => go({ offset: Math.max(0, res.offset - res.limit) }) }, "← Previous"),
      h("button", { type: "button", id: "next-page", disabled: to >= res.matched, onclick: () => go({ offset: res.offset + res.limit }) }, "Next →")));
    return out;
  };
  return {
    title: "Rollouts",
    // A bad filter or sort is shown under the form (the answer's error names the unknown field),
    // keeping the form to fix it in.
    load: () => api("/api/rollouts?" + new URLSearchParams({ sort: q.sort, order: q.order, filter: q.filter, offset: q.offset, limit: q.limit }))
      .catch((e) => ({ version: shownVersion, error: e.message })),
    draw: (res) => {
      const input = h("input", { type: "search", id: "filter", name: "filter", value: q.filter, "aria-describedby": "filter-help",
        placeholder: "e.g. errors>0 model~gpt reward>=0.5" });
      const size = h("select", { id: "page-size", name: "limit" }, [25, 50, 100, 200, 500].map((n) => h("option", { value: n, selected: n === q.limit }, n)));
      const form = h("form", { class: "filter", role: "search", onsubmit: (e) => { e.preventDefault(); go({ filter: input.value.trim(), limit: Number(size.value), offset: 0 }); } },
        h("label", {}, "Filter", input), h("label", {}, "Rows per page", size), h("button", { type: "submit", id: "apply-filter" }, "Apply"));
      const fields = [...list(res.fields), ...list(res.record_fields)].join(", ");
      chooser = h("div", { class: "chooser", id: "column-chooser" });
      region = h("div", { id: "list-region" }, drawTable(res));
      return [h("h1", {}, "Rollouts"), form, h("details", { class: "columns" }, h("summary", { id: "columns-summary" }, "Columns"), chooser),
        h("p", { id: "filter-help", class: "muted" }, "Terms are ANDed. FIELD=VALUE, !=, >, >=, <, <=, ~ (contains); a bare word matches the id or model. Fields: " + fields + "."),
        region];
    },
    update: (res) => region.replaceChildren(...drawTable(res).flat().filter(Boolean)),
  };
}

// columnChooser is one checkbox per column; a change redraws the table and is remembered.
function columnChooser(all, shown, redraw) {
  return all.filter((c) => c[0] !== "id").map(([field, label]) => h("label", {},
    h("input", { type: "checkbox", "data-column": field, checked: shown.has(field),
      onchange: (e) => { saveColumn(field, e.target.checked); redraw(); } }), " " + label));
}

// ---- one rollout --------------------------------------------------------------------------------

function rolloutPage(id, params) {
  const want = params.has("call") ? Number(params.get("call")) : null;
  return {
    title: "Rollout " + id,
    load: async () => {
      const d = await api("/api/rollouts/" + encodeURIComponent(id));
      d.calls = list(d.calls).map((c) => ({ ...c, record: obj(c.record) }));
      d.damaged = list(d.damaged);
      d.summary = obj(d.summary);
      const calls = d.calls.map((c) => c.record);
      const sel = want !== null && calls.some((c) => c.call_index === want) ? want : calls.length ? calls[calls.length - 1].call_index : null;
      const [conv, lin] = await Promise.all([
        sel === null ? null : api("/api/rollouts/" + encodeURIComponent(id) + "/calls/" + sel),
        loadLineage(id)]);
      d.conv = conv;
      if (d.conv) delete d.conv.version;
      d.lineage = lin;
      d.selected = sel;
      return d;
    },
    draw: (d) => {
      const sum = d.summary;
      const out = [h("h1", {}, "Rollout ", h("span", { id: "rollout-id" }, id))];
      const other = h("input", { type: "text", id: "compare-with", name: "b", placeholder: "another rollout id", size: 24 });
      out.push(h("p", {}, h("a", { href: "#/rollouts" }, "← all rollouts"), " · ",
        h("a", { href: "#/rollout/" + encodeURIComponent(id) + "/transcript", id: "transcript-link" }, "whole transcript (every message once, in order)")),
        h("form", { class: "filter", onsubmit: (e) => { e.preventDefault(); location.hash = "#/diff?" + new URLSearchParams({ a: id, b: other.value.trim() || id }); } },
          h("label", {}, "Compare with another run", other), h("button", { type: "submit", id: "compare" }, "Compare")));
      if (sum.pending) out.push(h("p", { class: "notice", id: "pending-note", role: "status" }, `${sum.pending} call${sum.pending > 1 ? "s" : ""} pending: the capture write is in progress.`));
      if (sum.abandoned) out.push(h("p", { class: "notice err" }, `${sum.abandoned} abandoned capture write(s): the writing process is gone, those calls are missing.`));
      if (sum.incomplete) out.push(h("p", { class: "notice err", id: "incomplete-note" }, "Marked incomplete: a capture write failed, calls may be missing."));
      if (d.damaged.length) out.push(h("div", { class: "notice err", id: "damaged-note" }, h("strong", {}, `${d.damaged.length} unreadable line(s):`),
        h("ul", {}, d.damaged.map((x) => h("li", {}, `line ${x.line} (capture index ${x.call_index}): ${x.error}`)))));
      const t = { in: sum.tokens_in, out: sum.tokens_out, cached: sum.tokens_cached };
      out.push(h("dl", { class: "cards" }, card("Calls", fmtInt(d.calls.length), "calls"), card("Errors", fmtInt(sum.errors), "errors"),
        card("Pending", fmtInt(sum.pending), "pending"), card("Tokens in", fmtInt(t.in), "tokens-in"), card("Tokens out", fmtInt(t.out), "tokens-out"),
        card("Cached", fmtInt(t.cached), "tokens-cached"), card("Duration s", fmtS(sum.duration_s), "duration"),
        card("Max concurrency", fmtInt(d.max_concurrency), "concurrency")));
      const kv = [["capture file", d.path || "—"], ["capture dir", sum.dir || "—"]];
      if (sum.record) for (const [k, v] of Object.entries(sum.record)) kv.push(["record." + k, typeof v === "string" ? v : JSON.stringify(v)]);
      out.push(h("dl", { class: "kv", id: "rollout-fields" }, kv.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));

      out.push(h("h2", {}, "Timeline"), waterfall(id, d.calls, sum.pending, d.selected));
      out.push(h("h2", { id: "lineage-h" }, "Lineage"), lineageView(id, d.lineage, d.selected));
      out.push(h("h2", {}, "Calls"), callsTable(id, d.calls, d.selected, d.lineage));
      if (d.conv) {
        const picker = h("select", { id: "conv-call", onchange: (e) => { location.hash = rolloutHref(id, e.target.value); } },
          d.calls.map((c) => h("option", { value: c.record.call_index, selected: c.record.call_index === d.selected }, "call " + c.record.call_index)));
        out.push(h("h2", { id: "conv-h" }, "Conversation as the model saw it"),
          h("p", {}, h("label", {}, "Show the request of ", picker), " · ", h("a", { href: callHref(id, d.selected) }, "open call " + d.selected)),
          conversationView(d.conv.conversation, true, authorsOf(d.lineage, d.selected)));
      }
      return out;
    },
  };
}


// waterfall draws one row per call, sorted by start: the wait until the first token (light), then
// the rest of the response (dark), errors in red; overlapping bars are concurrent calls. Pending
// calls (no timing yet) get a dashed row at the right edge.
function waterfall(id, calls, pending, selected) {
  const rows = calls.map((c) => c.record).filter((r) => r.started_at !== null).sort((a, b) => a.started_at - b.started_at || a.call_index - b.call_index);
  if (rows.length === 0 && !pending) return h("p", {}, "No calls with timing.");
  const t0 = rows.length ? rows[0].started_at : 0;
  const t1 = Math.max(t0 + 0.001, ...rows.map((r) => r.completed_at ?? r.started_at + (r.latency_total_ms || 0) / 1000));
  const span = t1 - t0;
  const W = 800, L = 90, R = 10, RH = 18, top = 18;
  const H = top + (rows.length + pending) * RH + 8;
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const svg = s("svg", { class: "chart waterfall", id: "waterfall", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "wf-t", style: null },
    s("title", { id: "wf-t" }, `Timeline of ${rows.length} calls over ${fmtS(span)} s` + (pending ? `, ${pending} pending` : "")));
  svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
  for (let i = 0; i <= 4; i++) {
    const tx = L + (i / 4) * (W - L - R);
    svg.appendChild(s("line", { x1: tx, y1: top - 4, x2: tx, y2: H - 4, stroke: "#eaeef2" }));
    svg.appendChild(s("text", { x: tx, y: 11, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, fmtOffset((span * i) / 4, span)));
  }
  rows.forEach((r, i) => {
    const y = top + i * RH;
    const start = x(r.started_at);
    const end = x(r.completed_at ?? r.started_at + (r.latency_total_ms || 0) / 1000);
    const ttft = r.latency_ttft_ms !== null ? Math.min(end, x(r.started_at + r.latency_ttft_ms / 1000)) : start;
    const label = `call ${r.call_index}: ${orDash(r.model)}, status ${orDash(r.status_code)}, start +${fmtS(r.started_at - t0)} s, TTFT ${fmtMS(r.latency_ttft_ms)} ms, latency ${fmtMS(r.latency_total_ms)} ms` + (r.error_category ? ", error " + r.error_category : "");
    const a = s("a", { href: rolloutHref(id, r.call_index), "aria-label": label, "data-call": r.call_index },
      s("title", {}, label),
      s("text", { x: 4, y: y + 12 }, "#" + r.call_index + (r.call_index === selected ? " ◀" : "")),
      s("rect", { class: "wait", x: start, y: y + 3, width: Math.max(ttft - start, 0), height: RH - 6 }),
      s("rect", { class: "bar" + (r.error_category ? " err" : ""), x: ttft, y: y + 3, width: Math.max(end - ttft, 2), height: RH - 6 }));
    svg.appendChild(a);
  });
  for (let i = 0; i < pending; i++) {
    const y = top + (rows.length + i) * RH;
    svg.appendChild(s("g", { "data-pending": i }, s("title", {}, "pending call: capture write in progress"),
      s("text", { x: 4, y: y + 12 }, "pending"), s("rect", { class: "pend", x: W - R - 80, y: y + 3, width: 78, height: RH - 6 })));
  }
  return h("figure", {}, svg, h("figcaption", {}, "Light: waiting for the first token (TTFT); dark: the rest of the response; red: error; dashed: pending. Bars that overlap ran concurrently."));
}

function callsTable(id, calls, selected, lin) {
  const cols = ["#", "status", "finish", "model", "dialect", "tokens in", "out", "cached", "reasoning", "latency ms", "TTFT ms", "tool calls", "new / sent messages", "lineage", "token data", "error"];
  const right = [true, true, false, false, false, true, true, true, true, true, true, false, true, false, false, false];
  const rows = calls.map((c) => {
    const r = c.record;
    const node = lin && lin.byIndex ? lin.byIndex.get(r.call_index) : null, tok = lin && lin.tokens ? lin.tokens.get(r.call_index) : null;
    return { sel: r.call_index === selected, idx: r.call_index, cells: [
      h("a", { href: callHref(id, r.call_index), "aria-label": "open call " + r.call_index }, String(r.call_index)),
      orDash(r.status_code), orDash(r.finish_reason ?? r.response_status), cutName(r.model), orDash(r.dialect),
      fmtInt(r.tokens_in), fmtInt(r.tokens_out), fmtInt(r.cached_tokens), fmtInt(r.tokens_reasoning),
      fmtMS(r.latency_total_ms), fmtMS(r.latency_ttft_ms),
      list(r.tool_calls).length ? list(r.tool_calls).map((t) => t.name || "?").join(", ") : "—",
      `${c.new_messages} / ${c.input_messages}`,
      node ? [relationBadge(node.relation), node.parent !== null ? " of #" + node.parent : "", node.main_chain ? h("span", { class: "badge b-main", title: "on the main chain" }, "main") : ""] : "—",
      tokenBadge(tok),
      r.error_category ? h("span", { class: "badge b-err" }, r.error_category) : "—",
    ] };
  });
  return h("div", { class: "scroll" }, h("table", { id: "calls-table" }, h("caption", {}, "Calls in capture order"),
    h("thead", {}, h("tr", {}, cols.map((c, i) => h("th", { scope: "col", class: right[i] ? "num" : null }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", { class: r.sel ? "sel" : null, "data-call": r.idx, "aria-current": r.sel ? "true" : null },
      r.cells.map((c, i) => h("td", { class: right[i] ? "num" : null }, c)))))));
}

// conversationView shows the request's messages, the resent history folded away, then the output.
// Long system prompts and long tool lists are folded too, so the page opens on the user's words.
function conversationView(conv, foldHistory, authors) {
  const out = [];
  conv = obj(conv);
  const tools = list(conv.tools), inputs = list(conv.input), outputs = list(conv.output);
  if (tools.length > foldTools) out.push(h("details", { class: "tools", id: "tools-offered" }, h("summary", {}, `${tools.length} tools offered`), h("p", { class: "muted" }, tools.join(", "))));
  else if (tools.length) out.push(h("p", { class: "muted", id: "tools-offered" }, "Tools offered: " + tools.join(", ")));
  const input = h("div", { class: "conv", id: "conv-input" });
  let run = [];
  const flush = () => {
    if (!run.length) return;
    if (foldHistory && run.length > 0) input.append(h("details", { class: "hist" }, h("summary", {}, `${run.length} message${run.length > 1 ? "s" : ""} of resent history`), run));
    else input.append(...run);
    run = [];
  };
  // authors: lineage's author of each request message, used only when it names as many messages as
  // the page shows (both read the same request; a dialect whose items the two count differently
  // is left unmarked rather than marked wrong).
  const au = authors && authors.messages.length === inputs.length ? authors : null;
  if (authors && !au) out.push(h("p", { class: "muted", id: "authors-note" }, "Authorship not shown: the lineage counts this request's messages differently."));
  inputs.forEach((m, i) => {
    const el = foldLong(m, messageView(m, m.new ? "new" : "history", au ? authorBadge(au.messages[i], au.byID) : null));
    if (m.new) { flush(); input.append(el); } else run.push(el);
  });
  flush();
  if (!inputs.length) input.append(h("p", { class: "muted" }, "The request holds no messages (or was not a JSON object: see the raw request)."));
  out.push(h("h3", {}, "Request"), input);
  out.push(h("h3", {}, "Response"));
  if (conv.error) out.push(h("p", { class: "notice err", id: "response-error" }, "Error: " + conv.error));
  out.push(h("div", { class: "conv", id: "conv-output" }, outputs.length ? outputs.map((m) => messageView(m, "output")) : h("p", { class: "muted" }, "No response messages.")));
  return out;
}

const foldTools = 8; // more tools than this are listed folded
const foldChars = 1500; // a system or developer message longer than this is folded

const msgChars = (m) => list(m.parts).reduce((n, p) => n + (p.text || "").length + (p.arguments || "").length, 0);

// foldLong folds a long system or developer message behind a summary giving its length and start.
function foldLong(m, el) {
  const n = msgChars(m);
  if ((m.role !== "system" && m.role !== "developer") || n <= foldChars) return el;
  const first = list(m.parts).map((p) => p.text || "").join(" ").replace(/\s+/g, " ").slice(0, 100);
  return h("details", { class: "long", "data-role": m.role }, h("summary", {}, `${m.role} prompt · ${fmtInt(n)} characters: ${first}…`), el);
}

function messageView(m, kind, extra) {
  const badge = kind === "new" ? h("span", { class: "badge b-new" }, "new on this call") : kind === "history" ? h("span", { class: "badge b-hist" }, "resent history") : null;
  const parts = list(m.parts);
  // In what the model answered, its text is the answer: labelled, so it stands apart from the
  // reasoning before it (in the same message, or in an item of its own).
  const answer = kind === "output";
  return h("article", { class: "msg " + (kind === "output" ? "" : kind), "data-role": m.role, "data-author": extra && extra.dataset ? extra.dataset.author : null },
    h("header", {}, m.role || "?", badge, extra),
    parts.map((p) => partView(p, answer)));
}

function partView(p, answer) {
  switch (p.kind) {
    case "text": return h("div", { class: "part text" + (answer ? " answer" : "") }, answer ? h("div", { class: "label" }, "Answer") : null, h("pre", {}, p.text));
    case "reasoning": return h("details", { class: "part reasoning", open: true }, h("summary", {}, "Reasoning"), h("pre", {}, p.text));
    case "tool_call": return h("div", { class: "part tool-call" }, h("div", { class: "label" }, "Tool call ", h("strong", {}, p.name || "?"), p.call_id ? " (" + p.call_id + ")" : ""), h("pre", {}, prettyJSON(p.arguments)));
    case "tool_result": return h("div", { class: "part tool-result" }, h("div", { class: "label" }, "Tool result", p.name ? [" of ", h("strong", {}, p.name)] : "", p.call_id ? " (" + p.call_id + ")" : ""), h("pre", {}, p.text));
    case "image": return h("div", { class: "part" }, h("span", { class: "label" }, "[" + (p.name || "image") + " not shown]"));
    default: return h("div", { class: "part other" }, h("div", { class: "label" }, p.name || "other"), h("pre", {}, p.text));
  }
}

function prettyJSON(text) {
  if (!text) return "";
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// ---- one call -----------------------------------------------------------------------------------

const provenanceFields = ["response_source", "upstream_attempted", "upstream_status_code", "local_response_reason", "client_session_id", "client_assistant_message_id", "model_ref"];

function callPage(id, n) {
  return {
    title: `Call ${n} of ${id}`,
    load: async () => {
      const [d, lin] = await Promise.all([api("/api/rollouts/" + encodeURIComponent(id) + "/calls/" + n), loadLineage(id)]);
      d.lineage = lin;
      return d;
    },
    draw: (d) => {
      const r = obj(d.record), units = obj(d.units), raw = obj(d.raw);
      const out = [h("h1", {}, "Call ", h("span", { id: "call-index" }, String(n)), " of rollout ", h("a", { href: rolloutHref(id, n) }, id))];
      out.push(h("nav", { class: "pager", "aria-label": "Calls" },
        d.prev !== null && d.prev !== undefined ? h("a", { href: callHref(id, d.prev), id: "prev-call" }, "← call " + d.prev) : null,
        h("a", { href: rolloutHref(id, n) }, "rollout"),
        d.next !== null && d.next !== undefined ? h("a", { href: callHref(id, d.next), id: "next-call" }, "call " + d.next + " →") : null));
      out.push(h("dl", { class: "cards" }, card("Status", orDash(r.status_code), "status"), card("Finish", orDash(r.finish_reason ?? r.response_status), "finish"),
        card("Model", orDash(r.model), "model"),
        card("Tokens in", fmtInt(r.tokens_in), "tokens-in"), card("Tokens out", fmtInt(r.tokens_out), "tokens-out"),
        card("Reasoning tokens", fmtInt(r.tokens_reasoning), "tokens-reasoning"), card("Cached", fmtInt(r.cached_tokens), "tokens-cached"),
        card("Latency ms", fmtMS(r.latency_total_ms), "latency"), card("TTFT ms", fmtMS(r.latency_ttft_ms), "ttft"),
        card("Started", fmtTime(r.started_at), "started"),
        card("Error", orDash(r.error_category), "error")));
      if (list(r.tool_calls).length) {
        out.push(h("h2", {}, "Tool calls"), h("ol", { id: "tool-calls" }, list(r.tool_calls).map((t) =>
          h("li", {}, h("strong", {}, t.name || "?"), t.call_id ? " (" + t.call_id + ")" : "", h("pre", {}, prettyJSON(typeof t.arguments === "string" ? t.arguments : JSON.stringify(t.arguments)))))));
      }
      const node = d.lineage && d.lineage.byIndex ? d.lineage.byIndex.get(n) : null;
      if (node) out.push(h("p", { id: "call-lineage" }, "Lineage: ", relationBadge(node.relation),
        node.parent !== null ? [" of ", h("a", { href: callHref(id, node.parent) }, "call " + node.parent)] : " (no parent)",
        node.evidence && node.evidence !== "messages" && node.evidence !== "none" ? ` (evidence: ${node.evidence})` : "",
        declaredIgnoredBadge(node, d.lineage.byID),
        node.main_chain ? h("span", { class: "badge b-main" }, "main chain") : h("span", { class: "badge b-hist" }, "off the main chain")));
      out.push(conversationView(d.conversation, true, authorsOf(d.lineage, n)));
      out.push(tokensView(d.tokens));
      if (r.reasoning_content) out.push(h("h3", {}, "Reasoning content (record)"), h("pre", { id: "reasoning-content" }, r.reasoning_content));
      out.push(h("h2", {}, "Provenance"), h("dl", { class: "kv", id: "provenance" }, provenanceFields.map((f) => [h("dt", {}, f), h("dd", {}, valueText(r[f]))])));
      const rows = Object.entries(r).filter(([k]) => k !== "tool_calls" && !provenanceFields.includes(k)).map(([k, v]) =>
        [k, units[k] === "s since epoch" && typeof v === "number" ? fmtTime(v) + " (" + v + ")" : valueText(v), units[k] || ""]);
      out.push(h("h2", {}, "Record"), table("Record fields (ModelCallRecord, line " + d.line + " of the capture file)", ["field", "value", "unit"], rows, [false, false, false], "record-table"));
      out.push(h("h2", {}, "Stored payloads"));
      const parts = Object.keys(raw);
      if (!parts.length) out.push(h("p", {}, "No payload was stored."));
      for (const part of ["request", "response", "request_raw", "response_raw"]) {
        if (!(part in raw)) continue;
        const pre = h("pre", { class: "raw", id: "raw-" + part, hidden: true, tabindex: 0 });
        const btn = h("button", { type: "button", "aria-expanded": "false", "aria-controls": "raw-" + part, id: "show-" + part,
          onclick: async () => {
            const open = btn.getAttribute("aria-expanded") === "true";
            if (!open && !pre.dataset.loaded) {
              const res = await fetch(`/api/rollouts/${encodeURIComponent(id)}/calls/${n}/raw?part=${part}&indent=1`);
              pre.textContent = await res.text();
              pre.dataset.loaded = "1";
            }
            pre.hidden = open;
            btn.setAttribute("aria-expanded", String(!open));
            btn.textContent = (open ? "Show " : "Hide ") + part + ` (${fmtInt(raw[part])} bytes)`;
          } }, `Show ${part} (${fmtInt(raw[part])} bytes)`);
        out.push(h("div", { class: "part" }, btn, pre));
      }
      return out;
    },
  };
}

// ---- lineage and tokens ---------------------------------------------------------------------------

// loadLineage fetches a rollout's lineage and indexes it by call_index; null when it cannot be
// read (the rest of the page still draws).
async function loadLineage(id) {
  let l;
  try { l = await api("/api/rollouts/" + encodeURIComponent(id) + "/lineage"); } catch (e) { return { error: e.message }; }
  const nodes = list(l.calls), byID = new Map(nodes.map((c) => [c.model_call_id, c.call_index]));
  const byIndex = new Map(), tokens = new Map();
  for (const c of nodes) byIndex.set(c.call_index, { ...c, parent: c.parent_call_id !== null && byID.has(c.parent_call_id) ? byID.get(c.parent_call_id) : null, messages: list(c.messages) });
  for (const t of list(l.call_tokens)) tokens.set(t.call_index, t);
  return { nodes: [...byIndex.values()], byIndex, byID, tokens, summary: obj(l.summary), mainChain: list(l.main_chain), audits: nodes.filter((c) => c.token_audit) };
}

function authorsOf(lin, n) {
  const node = lin && lin.byIndex ? lin.byIndex.get(n) : null;
  return node ? { messages: node.messages, byID: lin.byID } : null;
}

function authorBadge(a, byID) {
  if (!a) return null;
  if (a.author === "model") {
    const from = a.from_call_id && byID.has(a.from_call_id) ? byID.get(a.from_call_id) : null;
    const el = h("span", { class: "badge b-model", title: "the model wrote this turn" + (from !== null ? ": the answer of call " + from : "") }, "model-written" + (from !== null ? " (call " + from + ")" : ""));
    el.dataset.author = "model";
    return el;
  }
  const el = h("span", { class: "badge b-client", title: "the client wrote this message (or edited the model's turn)" }, "client-written");
  el.dataset.author = "client";
  return el;
}

const relationHelp = {
  root: "not explained by any earlier call", extends: "continues the parent: its context, its answer, then new messages",
  retry: "the same request again after the parent failed", resample: "the same request again after the parent answered",
  fork: "continues from an earlier point than the latest call there", compaction: "a new history holding a summary of the parent's answer",
};
function relationBadge(rel) {
  return h("span", { class: "badge rel rel-" + rel, title: relationHelp[rel] || "" }, rel);
}

// declaredIgnoredBadge says that the client declared a parent lineage did not use (the call
// itself, a later call, or an id the rollout does not have), naming it; "" when there is none.
function declaredIgnoredBadge(c, byID) {
  const id = c.declared_parent_ignored;
  if (!id) return "";
  const at = byID && byID.has(id) ? byID.get(id) : null;
  const what = at === null ? "an id this rollout does not have" : at === c.call_index ? "this call itself" : "a later call, #" + at;
  const el = h("span", { class: "badge b-warn", title: `the client declared parent ${id} (${what}); not used, the call is placed by the other evidence` },
    "declared parent ignored: " + (at === null ? "unknown id" : at === c.call_index ? "itself" : "#" + at));
  el.dataset.declaredParentIgnored = id;
  return el;
}

function tokenBadge(t) {
  if (!t || (t.token_source === "absent" && t.prompt_token_source === "absent" && !list(t.findings).length)) return "—";
  const tip = `generated ids: ${t.token_source} (${t.generated_tokens}); prompt ids: ${t.prompt_token_source} (${t.prompt_tokens})` + (list(t.findings).length ? "; findings: " + t.findings.join(", ") : "");
  return h("span", { class: "badge b-tok" + (list(t.findings).length ? " b-warn" : ""), title: tip, "data-token-source": t.token_source },
    t.token_source === "absent" ? "no ids" : `${fmtInt(t.generated_tokens)} ids`, list(t.findings).length ? ` · ${t.findings.length} finding${t.findings.length > 1 ? "s" : ""}` : "");
}

// lineageView draws the calls as trees: the tree holding the main chain first (its main-chain
// child first under each call), then the other roots (side calls) apart, in capture order.
function lineageView(id, lin, selected) {
  if (!lin) return h("p", { class: "muted" }, "No lineage.");
  if (lin.error) return h("p", { class: "notice err", id: "lineage-error" }, "Lineage not derived: " + lin.error);
  if (!lin.nodes.length) return h("p", { class: "muted" }, "No readable calls.");
  const kids = new Map();
  for (const c of lin.nodes) if (c.parent !== null) { if (!kids.has(c.parent)) kids.set(c.parent, []); kids.get(c.parent).push(c); }
  for (const k of kids.values()) k.sort((a, b) => (b.main_chain - a.main_chain) || a.call_index - b.call_index);
  const item = (c, depth) => {
    const t = lin.tokens.get(c.call_index);
    const row = h("div", { class: "lin-row" + (c.main_chain ? " main" : "") + (c.call_index === selected ? " sel" : "") },
      h("span", { class: "lin-mark", "aria-hidden": "true" }, c.main_chain ? "★" : "·"),
      h("a", { href: rolloutHref(id, c.call_index), "aria-label": "show call " + c.call_index }, "#" + c.call_index), " ",
      relationBadge(c.relation),
      c.parent !== null ? h("span", { class: "lin-parent" }, " of #" + c.parent) : "",
      c.evidence && c.evidence !== "messages" && c.evidence !== "none" ? h("span", { class: "muted" }, ` (${c.evidence})`) : "",
      declaredIgnoredBadge(c, lin.byID),
      c.main_chain ? h("span", { class: "badge b-main", title: "on the main chain" }, "main chain") : "",
      c.completed ? "" : h("span", { class: "badge b-err" }, "not completed"),
      h("span", { class: "muted" }, ` +${c.new_messages} message${c.new_messages === 1 ? "" : "s"}`), " ",
      tokenBadge(t) === "—" ? "" : tokenBadge(t),
      c.token_audit && !c.token_audit.ok ? h("span", { class: "badge b-err", title: `token ids differ at ${c.token_audit.position} (${c.token_audit.in})` }, "token audit failed") : "");
    const sub = kids.get(c.call_index) || [];
    return h("li", { "data-call": c.call_index, "data-relation": c.relation, "data-parent": c.parent ?? "", "data-main": c.main_chain ? "true" : "false" },
      row, sub.length ? h("ul", {}, sub.map((k) => item(k, depth + 1))) : null);
  };
  const roots = lin.nodes.filter((c) => c.parent === null);
  const inMain = (r) => { const stack = [r]; while (stack.length) { const c = stack.pop(); if (c.main_chain) return true; stack.push(...(kids.get(c.call_index) || [])); } return false; };
  const main = roots.filter(inMain), side = roots.filter((r) => !inMain(r));
  const sm = lin.summary;
  const out = [h("p", { id: "lineage-summary" }, `Main chain ${fmtInt(sm.main_chain_length)} call${sm.main_chain_length === 1 ? "" : "s"}; ${fmtInt(sm.roots)} roots, ${fmtInt(sm.extends)} extends, ${fmtInt(sm.forks)} forks, ${fmtInt(sm.retries)} retries, ${fmtInt(sm.resamples)} resamples, ${fmtInt(sm.compactions)} compactions; ${fmtInt(sm.off_main_chain)} calls off the main chain.`)];
  out.push(h("ul", { class: "lin-tree", id: "lineage-main", "aria-label": "Calls continuing the main chain" }, main.map((r) => item(r, 0))));
  if (side.length) out.push(h("h3", {}, "Side calls (other roots)"), h("ul", { class: "lin-tree", id: "lineage-side", "aria-label": "Side calls" }, side.map((r) => item(r, 0))));
  out.push(h("p", { class: "muted" }, "★ main chain. A call sits under its parent: extends (continues it), retry / resample (the same request again), fork (from an earlier point), compaction (a summary of it)."));
  return h("section", { id: "lineage" }, out);
}

// lpColour maps a logprob to a background: probability 1 white-green, low probability red.
function lpClass(lp) {
  if (lp === null || lp === undefined) return "lp-none";
  const p = Math.exp(lp);
  return p >= 0.9 ? "lp-0" : p >= 0.5 ? "lp-1" : p >= 0.2 ? "lp-2" : p >= 0.05 ? "lp-3" : "lp-4";
}

// tokensView shows what package tokens read from the call: sources, counts, findings, then each
// choice's generated tokens coloured by logprob, with the id, logprob and top logprobs on hover.
function tokensView(t) {
  const out = [h("h2", { id: "tokens-h" }, "Token data")];
  if (!t) { out.push(h("p", { class: "muted", id: "tokens-none" }, "This call carries no token ids or logprobs.")); return out; }
  t = obj(t);
  out.push(h("dl", { class: "cards" }, card("Token source", orDash(t.token_source), "token-source"), card("Prompt token source", orDash(t.prompt_token_source), "prompt-token-source"),
    card("Prompt ids", fmtInt(list(t.prompt_token_ids).length), "prompt-ids"), card("usage prompt", fmtInt(t.usage_prompt_tokens), "usage-prompt"),
    card("usage completion", fmtInt(t.usage_completion_tokens), "usage-completion"), card("Streamed", t.streamed ? "yes" : "no", "streamed")));
  const f = list(t.findings);
  out.push(h("h3", {}, "Findings"), f.length ? h("ul", { id: "token-findings", class: "notice err" }, f.map((x) => h("li", { "data-code": x.code }, h("code", {}, x.code), x.choice !== undefined && x.choice !== null ? ` (choice ${x.choice})` : "", ": ", x.detail)))
    : h("p", { id: "token-findings-none" }, "None: the ids, logprobs and usage agree."));
  for (const c of list(t.choices)) {
    const ids = list(c.token_ids), lps = list(c.logprobs), n = Math.max(ids.length, lps.length);
    const spans = [];
    for (let i = 0; i < n; i++) {
      const lp = lps[i] || null, id = ids[i] ?? (lp ? lp.id : null);
      const text = lp && lp.token !== "" ? lp.token : "⟨" + (id ?? "?") + "⟩";
      let tip = `#${i} id ${id ?? "—"} · logprob ${lp && lp.logprob !== null ? lp.logprob.toFixed(4) + " (p " + Math.exp(lp.logprob).toFixed(3) + ")" : "—"}`;
      for (const x of list(lp && lp.top_logprobs)) tip += `\n  ${JSON.stringify(x.token)}${x.id !== null && x.id !== undefined ? " id " + x.id : ""}: ${x.logprob !== null ? x.logprob.toFixed(4) : "—"}`;
      spans.push(h("span", { class: "tok " + lpClass(lp ? lp.logprob : null), title: tip, tabindex: 0, "data-id": id ?? "", "data-i": i }, text));
    }
    out.push(h("h3", {}, `Choice ${c.index}: ${fmtInt(ids.length)} generated ids (${c.token_source}), ${fmtInt(lps.length)} logprobs`),
      spans.length ? h("div", { class: "tokens", id: "tokens-" + c.index }, spans) : h("p", { class: "muted" }, "No generated tokens."));
  }
  out.push(h("p", { class: "muted" }, "Colour: the probability of the sampled token (exp logprob): green ≥ 0.9, then lighter to red below 0.05; grey without a logprob. Hover or focus a token for its id and top logprobs."));
  return out;
}

function valueText(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// ---- search across the run ----------------------------------------------------------------------

function searchPage(params) {
  const q = params.get("q") || "";
  return {
    title: q ? "Search: " + q : "Search",
    load: () => (q ? api("/api/search?" + new URLSearchParams({ q, limit: 200 })).catch((e) => ({ version: shownVersion, error: e.message })) : Promise.resolve({ version: shownVersion })),
    draw: (res) => {
      const input = h("input", { type: "search", id: "search-q", name: "q", value: q, placeholder: "text in prompts, answers, tool names, errors" });
      const form = h("form", { class: "filter", role: "search", onsubmit: (e) => { e.preventDefault(); location.hash = "#/search?" + new URLSearchParams({ q: input.value.trim() }); } },
        h("label", {}, "Search every rollout", input), h("button", { type: "submit", id: "run-search" }, "Search"));
      const out = [h("h1", {}, "Search"), form];
      if (!q) { out.push(h("p", { class: "muted" }, "Finds text, case-insensitive, in the messages of every call (prompts, answers, reasoning, tool calls and results), the tools offered, and errors. A message resent on later calls is found once, at the first call that carried it.")); return out; }
      if (res.error) { out.push(h("p", { class: "notice err", id: "search-error", role: "alert" }, res.error)); return out; }
      const hits = list(res.hits);
      out.push(h("p", { id: "search-count", role: "status" }, `${fmtInt(hits.length)}${res.truncated ? "+" : ""} matches in ${fmtInt(res.calls_searched)} calls of ${fmtInt(res.rollouts_searched)} rollouts` + (res.truncated ? " (only the first are shown)" : "")));
      if (hits.length) out.push(table("Search results", ["rollout", "call", "where", "what", "text"], hits.map((x) => [
        h("a", { href: rolloutHref(x.rollout_id, x.call_index), title: x.rollout_id }, x.rollout_id),
        h("a", { href: callHref(x.rollout_id, x.call_index) }, String(x.call_index)),
        x.where, [x.role, x.kind.replace("_", " "), x.name].filter(Boolean).join(" · "), x.snippet]), [false, true, false, false, false], "search-results"));
      return out;
    },
  };
}

// ---- two runs side by side ------------------------------------------------------------------------

function diffPage(params) {
  const q = { a: params.get("a") || "", b: params.get("b") || "", a_dir: params.get("a_dir") || "", b_dir: params.get("b_dir") || "" };
  const query = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== ""));
  return {
    title: `Compare ${q.a} with ${q.b}`,
    load: () => api("/api/diff?" + query).catch((e) => ({ version: shownVersion, error: e.message })),
    draw: (d) => {
      const out = [h("h1", {}, "Compare two runs")];
      const inputs = {};
      const field = (k, label) => (inputs[k] = h("input", { type: "text", id: "diff-" + k, name: k, value: q[k], size: k.endsWith("dir") ? 3 : 24 }), h("label", {}, label, inputs[k]));
      out.push(h("form", { class: "filter", onsubmit: (e) => { e.preventDefault();
        location.hash = "#/diff?" + new URLSearchParams(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]).filter(([, v]) => v !== "")); } },
        field("a", "Run A: rollout"), field("a_dir", "dir #"), field("b", "Run B: rollout"), field("b_dir", "dir #"), h("button", { type: "submit", id: "diff-go" }, "Compare")));
      const dirs = list(d.dirs);
      if (dirs.length > 1) out.push(h("p", { class: "muted" }, "Capture dirs: " + dirs.map((x, i) => `#${i} ${x}`).join(", ") + ". Without a dir #, a rollout is read from the first dir that holds it."));
      if (d.error) { out.push(h("p", { class: "notice err", id: "diff-error", role: "alert" }, d.error)); return out; }
      const A = obj(d.a), B = obj(d.b), pairs = list(d.pairs);
      out.push(table("The two runs", ["", "run A", "run B"], [
        ["rollout", A.rollout, B.rollout], ["capture dir", A.dir, B.dir], ["calls", fmtInt(A.calls), fmtInt(B.calls)],
        ["calls with an error", fmtInt(A.errors), fmtInt(B.errors)], ["tokens in", fmtInt(A.tokens_in), fmtInt(B.tokens_in)],
        ["tokens out", fmtInt(A.tokens_out), fmtInt(B.tokens_out)], ["latency ms (sum)", fmtMS(A.latency_ms), fmtMS(B.latency_ms)],
        ["tool calls", fmtInt(A.tool_calls), fmtInt(B.tool_calls)], ["unreadable lines", fmtInt(A.damaged_lines), fmtInt(B.damaged_lines)]],
        [false, false, false], "diff-totals"));
      if (d.same) out.push(h("p", { class: "notice", id: "diff-first", role: "status" }, `The runs match: ${pairs.length} calls with the same models, messages, statuses, tool calls and answers.`));
      else {
        const f = obj(d.first);
        out.push(h("div", { class: "notice err", id: "diff-first", role: "status" },
          h("strong", {}, `First difference: call #${f.position} (A call ${orDash(f.call_a)}, B call ${orDash(f.call_b)}): ${f.what}` + (f.message !== null && f.message !== undefined ? `, message ${f.message}` : "")),
          h("div", { class: "sbs" }, h("div", {}, h("div", { class: "label" }, "A"), h("pre", { id: "diff-first-a" }, f.a)), h("div", {}, h("div", { class: "label" }, "B"), h("pre", { id: "diff-first-b" }, f.b))),
          f.note ? h("p", { id: "diff-first-note" }, "Note: " + f.note) : null));
      }
      const link = (id, c) => (c ? h("a", { href: callHref(id, c.call_index) }, String(c.call_index)) : "—");
      const both = (p, f) => (p.a ? f(p.a) : "—") + " / " + (p.b ? f(p.b) : "—");
      const tools = (c) => (list(c.tool_calls).length ? list(c.tool_calls).map((t) => t.split("(")[0]).join(", ") : "none");
      out.push(h("h2", {}, "Calls side by side"));
      out.push(h("div", { class: "scroll" }, h("table", { id: "diff-table" }, h("caption", {}, "Calls paired by start order; A / B in each cell"),
        h("thead", {}, h("tr", {}, ["#", "A call", "B call", "differs", "model", "status", "tokens in", "tokens out", "latency ms", "tool calls", "answer A", "answer B"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, pairs.map((p) => h("tr", { class: list(p.differs).length ? "differs" : null, "data-position": p.position },
          h("td", {}, String(p.position)), h("td", {}, link(A.rollout, p.a)), h("td", {}, A.rollout !== B.rollout ? link(B.rollout, p.b) : p.b ? String(p.b.call_index) : "—"),
          h("td", {}, list(p.differs).length ? list(p.differs).map((x) => h("span", { class: "badge b-err" }, x)) : "—"),
          h("td", {}, both(p, (c) => orDash(c.model))), h("td", {}, both(p, (c) => orDash(c.status_code))),
          h("td", { class: "num" }, both(p, (c) => fmtInt(c.tokens_in))), h("td", { class: "num" }, both(p, (c) => fmtInt(c.tokens_out))),
          h("td", { class: "num" }, both(p, (c) => fmtMS(c.latency_total_ms))), h("td", {}, both(p, tools)),
          h("td", {}, p.a ? p.a.answer : "—"), h("td", {}, p.b ? p.b.answer : "—")))))));
      return out;
    },
  };
}

// ---- a rollout's transcript ----------------------------------------------------------------------

function transcriptPage(id) {
  return {
    title: "Transcript of " + id,
    load: () => api("/api/rollouts/" + encodeURIComponent(id) + "/transcript"),
    draw: (d) => {
      const entries = list(d.entries);
      const out = [h("h1", {}, "Transcript of ", h("a", { href: rolloutHref(id) }, id))];
      out.push(h("p", { class: "muted" }, `Every message of the rollout once, in the order its ${fmtInt(d.calls)} calls started: what the client sent first on a call (system prompt, user turns, tool results), then what the model answered on it. Resent history is left out.`));
      if (d.error) out.push(h("p", { class: "notice err", role: "alert" }, d.error));
      const box = h("div", { class: "conv", id: "transcript" });
      for (const e of entries) {
        const m = obj(e.message);
        const from = h("span", { class: "badge " + (e.source === "response" ? "b-new" : "b-hist") }, e.source === "response" ? "model" : "client");
        const at = h("a", { class: "call-ref", href: callHref(id, e.call_index) }, "call " + e.call_index);
        const el = messageView(m, e.source === "response" ? "output" : "client", [from, at, e.model ? h("span", { class: "muted" }, e.model) : null]);
        el.dataset.call = e.call_index;
        el.dataset.source = e.source;
        box.append(foldLong(m, el));
      }
      if (!entries.length) box.append(h("p", { class: "muted" }, "No messages."));
      out.push(box);
      return out;
    },
  };
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => { route(); liveLoop(); });
