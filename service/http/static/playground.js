// hybridrag playground: one page over the public API. No framework, no third-party code, no other host.
// The page state lives in the URL (?q=...&s=keyword,semantic&w=0.5,0.4,0.1&view=compare...), so a link
// reopens the same search and runs it on load.

const STRATEGIES = ["keyword", "semantic", "graph"];
const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
};
const svg = (tag, attrs = {}, ...children) => {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
};

// ---- state <-> form <-> URL
let weightsTouched = false;

function readForm() {
  const strategies = [...document.querySelectorAll("input[name=strategy]:checked")].map((i) => i.value);
  const types = [...document.querySelectorAll("input[name=etype]:checked")].map((i) => i.value);
  return {
    q: $("#q").value.trim(),
    strategies,
    weights: weightsTouched ? currentWeights() : null,
    limit: Number($("#limit").value) || 10,
    from: $("#date-start").value,
    to: $("#date-end").value,
    types,
    files: $("#file-ids").value.split(",").map((s) => s.trim()).filter(Boolean),
    crag: $("#crag").checked,
  };
}

function writeForm(state) {
  $("#q").value = state.q || "";
  for (const box of document.querySelectorAll("input[name=strategy]")) {
    box.checked = !state.strategies.length || state.strategies.includes(box.value);
  }
  for (const box of document.querySelectorAll("input[name=etype]")) box.checked = state.types.includes(box.value);
  $("#limit").value = state.limit;
  $("#date-start").value = state.from || "";
  $("#date-end").value = state.to || "";
  $("#file-ids").value = state.files.join(", ");
  $("#crag").checked = state.crag;
  weightsTouched = Boolean(state.weights);
  if (state.weights) setWeights(state.weights);
  showWeightsSource();
}

function stateFromUrl() {
  const p = new URLSearchParams(location.search);
  const list = (key) => (p.get(key) || "").split(",").map((s) => s.trim()).filter(Boolean);
  const w = list("w").map(Number);
  return {
    q: p.get("q") || "",
    strategies: list("s").filter((s) => STRATEGIES.includes(s)),
    weights: w.length === 3 && w.every((x) => x >= 0) ? { keyword: w[0], semantic: w[1], graph: w[2] } : null,
    limit: Math.min(100, Math.max(1, Number(p.get("limit")) || 10)),
    from: p.get("from") || "",
    to: p.get("to") || "",
    types: list("types"),
    files: list("files"),
    crag: p.get("crag") === "1",
    view: ["results", "compare", "document"].includes(p.get("view")) ? p.get("view") : "results",
    doc: p.get("doc") || "",
    chunks: list("chunks"),
  };
}

function urlFor(state, extra = {}) {
  const p = new URLSearchParams();
  if (state.q) p.set("q", state.q);
  if (state.strategies.length && state.strategies.length < 3) p.set("s", state.strategies.join(","));
  if (state.weights) p.set("w", [state.weights.keyword, state.weights.semantic, state.weights.graph].join(","));
  if (state.limit !== 10) p.set("limit", String(state.limit));
  if (state.from) p.set("from", state.from);
  if (state.to) p.set("to", state.to);
  if (state.types.length) p.set("types", state.types.join(","));
  if (state.files.length) p.set("files", state.files.join(","));
  if (state.crag) p.set("crag", "1");
  for (const [k, v] of Object.entries(extra)) if (v) p.set(k, v);
  const query = p.toString();
  return query ? `/ui?${query}` : "/ui";
}

// ---- weights: three sliders that always sum to 1.0 (the contract's rule)
function currentWeights() {
  const raw = Object.fromEntries(STRATEGIES.map((s) => [s, Number($(`#w-${s}`).value)]));
  return Object.fromEntries(STRATEGIES.map((s) => [s, Math.round(raw[s]) / 100]));
}

function setWeights(weights) {
  for (const s of STRATEGIES) {
    const value = Math.round((weights[s] || 0) * 100);
    $(`#w-${s}`).value = String(value);
    $(`#o-${s}`).value = (value / 100).toFixed(2);
  }
}

function rebalance(moved) {
  // The moved slider keeps its value; the other two share the rest in their current proportion.
  const value = Number($(`#w-${moved}`).value);
  const others = STRATEGIES.filter((s) => s !== moved);
  const rest = 100 - value;
  const before = others.map((s) => Number($(`#w-${s}`).value));
  const total = before[0] + before[1];
  let first = total > 0 ? Math.round((rest * before[0]) / total / 5) * 5 : Math.round(rest / 2 / 5) * 5;
  first = Math.min(rest, Math.max(0, first));
  $(`#w-${others[0]}`).value = String(first);
  $(`#w-${others[1]}`).value = String(rest - first);
  for (const s of STRATEGIES) $(`#o-${s}`).value = (Number($(`#w-${s}`).value) / 100).toFixed(2);
}

function showWeightsSource() {
  $("#weights-source").textContent = weightsTouched ? "(yours)" : "(classifier)";
}

// ---- API
function headers() {
  const h = { "Content-Type": "application/json", Accept: "application/json" };
  const key = $("#api-key").value || sessionStorage.getItem("hybridrag-api-key");
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function call(method, path, body) {
  const response = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = (data.errors || []).map((e) => `${e.path}: ${e.message}`).join("; ") || data.detail || "";
    throw new Error(`${response.status} ${data.title || response.statusText}${detail ? ` — ${detail}` : ""}`);
  }
  return data;
}

function requestBody(state, strategies = state.strategies) {
  // All three (or none chosen) is the contract's "hybrid".
  const chosen = strategies.length && strategies.length < STRATEGIES.length ? strategies : ["hybrid"];
  const body = { text: state.q, options: { limit: state.limit, strategies: chosen } };
  if (state.weights) body.options.weights = state.weights;
  if (state.crag) body.options.cragEnabled = true;
  const filters = {};
  if (state.from || state.to) filters.dateRange = { start: state.from || null, end: state.to || null };
  if (state.types.length) filters.entityTypes = state.types;
  if (state.files.length) filters.fileIds = state.files;
  if (Object.keys(filters).length) body.filters = filters;
  return body;
}

// ---- rendering
function status(text, error = false) {
  $("#status").textContent = text;
  $("#status").className = error ? "error" : "";
}

function highlighted(text, highlights) {
  // Offsets count Unicode code points (the service is Python); JavaScript strings count UTF-16 units,
  // so slice an array of code points.
  const chars = Array.from(text);
  const spans = highlights.flatMap((h) => h.offsets).sort((a, b) => a.start - b.start);
  const out = [];
  let at = 0;
  for (const { start, end } of spans) {
    if (start < at) continue;
    out.push(chars.slice(at, start).join(""), el("mark", { text: chars.slice(start, end).join("") }));
    at = end;
  }
  out.push(chars.slice(at).join(""));
  return out;
}

function bars(item) {
  const meta = item.metadata || {};
  const ranks = meta.ranks || {};
  const rows = [];
  for (const s of [...STRATEGIES, "rerank"]) {
    const value = item.relevance[s];
    if (value === null || value === undefined) continue;
    rows.push(
      el("span", { text: s }),
      el("span", { class: "bar-track", role: "img", "aria-label": `${s} ${value.toFixed(2)}` },
        el("span", { class: `bar-fill ${s}`, style: `display:block;width:${Math.round(value * 100)}%` })),
      el("span", { class: "score", text: value.toFixed(2) }),
      el("span", { class: "rank muted", text: ranks[s] ? `rank ${ranks[s]}` : "—" }),
    );
  }
  return el("div", { class: "bars" }, rows);
}

function pathGraph(path, onEntity) {
  // seed -> entity -> ... -> passage, drawn left to right; entity nodes open their neighbourhood.
  const w = 150, h = 30, gap = 40;
  const width = path.length * w + (path.length - 1) * gap;
  const root = svg("svg", { width: String(width), height: String(h + 20), viewBox: `0 0 ${width} ${h + 20}`,
    role: "group", "aria-label": "How the graph reached this result" });
  path.forEach((step, i) => {
    const x = i * (w + gap);
    if (i > 0) root.append(svg("line", { x1: String(x - gap), y1: String(10 + h / 2), x2: String(x), y2: String(10 + h / 2) }));
    const label = step.type === "chunk" ? (step.title || "passage") : step.name;
    const text = svg("text", { x: String(x + 8), y: String(10 + h / 2 + 4) });
    text.textContent = label.length > 18 ? `${label.slice(0, 17)}…` : label;
    const title = svg("title");
    const how = step.seed ? (step.type === "chunk" ? " — a top dense passage (seed)" : " — named in the query (seed)")
      : step.edge === "relation" ? " — related entity" : step.edge === "synonym" ? " — synonym" : " — mentioned";
    title.textContent = (step.type === "chunk" ? `passage ${step.title || step.id}` : `${step.name} (${step.entityType})`) + how;
    const node = svg("g", { class: `node ${step.type}${step.seed ? " seed" : ""}`, "data-id": step.id },
      svg("rect", { x: String(x), y: "10", width: String(w), height: String(h), rx: "6" }), text, title);
    if (step.type === "entity") {
      node.setAttribute("role", "button");
      node.setAttribute("tabindex", "0");
      const open = () => onEntity(step.name);
      node.addEventListener("click", open);
      node.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
    }
    root.append(node);
  });
  return el("div", { class: "path" }, root);
}

function resultCard(item, state, index) {
  const meta = item.metadata || {};
  const title = meta.title || item.id;
  const docId = meta.docId;
  const heading = docId
    ? el("a", { href: urlFor(state, { view: "document", doc: docId, chunks: item.id }), class: "doc-link",
        onclick: (e) => { e.preventDefault(); openDocument(docId, [item.id]); } }, title)
    : el("button", { type: "button", class: "link", onclick: () => neighbourhood(title) }, title);
  const crag = item.relevance.crag
    ? el("span", { class: `badge ${item.relevance.crag.relevance}`, text: `CRAG ${item.relevance.crag.relevance}` })
    : null;
  const details = [
    meta.url ? el("a", { href: meta.url, text: meta.url, rel: "noreferrer" }) : null,
    meta.date ? el("span", { text: meta.date.slice(0, 10) }) : null,
    meta.page ? el("span", { class: "page", text: `p. ${meta.page}` }) : null,
    meta.entityType ? el("span", { text: meta.entityType }) : null,
  ];
  return el("article", { class: "result", "data-id": item.id, "data-doc": docId || item.id },
    el("h2", {}, el("span", { class: "muted", text: `${index + 1}.` }), heading,
      el("span", { class: "badge kind", text: item.type }), crag,
      el("span", { class: "score", title: "combined score (relative to this query)", text: item.score.toFixed(3) })),
    el("div", { class: "meta" }, details),
    el("div", { class: "text" }, highlighted(item.content.text, item.highlights || [])),
    bars(item),
    meta.graphPath && meta.graphPath.length ? pathGraph(meta.graphPath, neighbourhood) : null,
  );
}

function renderClassification(result) {
  const c = result.classification;
  const box = $("#classification");
  box.replaceChildren();
  if (!c) return;
  const w = c.suggestedWeights;
  box.append(el("div", { class: "classification" },
    el("span", {}, "type ", el("strong", { id: "query-type", text: c.type })),
    el("span", { text: `confidence ${c.confidence.toFixed(2)}` }),
    el("span", { text: `suggested weights ${w.keyword} / ${w.semantic} / ${w.graph}` }),
    c.extractedEntities.length ? el("span", { text: `entities: ${c.extractedEntities.join(", ")}` }) : null,
    el("span", { text: `${result.totalCount} matches · ${result.processingTime.toFixed(0)} ms · index ${result.indexVersion || ""}` }),
  ));
  if (!weightsTouched) setWeights(result.query.options.weights);
}

function renderNotes(notes) {
  $("#notes").replaceChildren(...(notes && notes.length
    ? [el("div", { class: "notes" }, notes.map((n) => el("span", { text: `${n.stage} ${n.status}: ${n.reason}` })))]
    : []));
}

// ---- views
function show(view) {
  $("#results").hidden = view !== "results";
  $("#compare").hidden = view !== "compare";
  $("#document").hidden = view !== "document";
  $("#classification").hidden = view === "document";
  for (const tab of document.querySelectorAll(".view-tab")) tab.setAttribute("aria-pressed", String(tab.dataset.view === view));
}

async function runResults(state) {
  show("results");
  status("Searching…");
  try {
    const result = await call("POST", "/v1/search", requestBody(state));
    renderClassification(result);
    renderNotes(result.notes);
    $("#results").replaceChildren(...(result.results.length
      ? result.results.map((item, i) => resultCard(item, state, i))
      : [el("p", { class: "muted", text: "No results above minRelevance." })]));
    status(`${result.results.length} results`);
  } catch (error) {
    status(String(error.message || error), true);
  }
}

const hue = (text) => [...text].reduce((h, c) => (h * 31 + c.codePointAt(0)) % 360, 7);

async function runCompare(state) {
  show("compare");
  renderNotes([]);
  status("Comparing…");
  const columns = [["keyword"], ["semantic"], ["graph"], ["keyword", "semantic", "graph"]];
  try {
    const batch = await call("POST", "/v1/search/batch", {
      queries: columns.map((strategies) => {
        const body = requestBody({ ...state, limit: 10 }, strategies);
        if (strategies.length === 1) delete body.options.weights;
        return body;
      }),
    });
    const lists = batch.results.map((outcome) => (outcome.result ? outcome.result.results : []));
    const seen = {};
    lists.forEach((list) => list.forEach((item) => { const d = (item.metadata || {}).docId || item.id; seen[d] = (seen[d] || 0) + 1; }));
    const names = ["keyword", "semantic", "graph", "hybrid"];
    $("#compare").replaceChildren(...lists.map((list, i) => el("div", { class: "column", "data-strategy": names[i] },
      el("h2", { text: names[i] }),
      batch.results[i].error ? el("p", { class: "error", text: batch.results[i].error.detail }) : null,
      el("ol", {}, list.map((item) => {
        const doc = (item.metadata || {}).docId || item.id;
        const li = el("li", { "data-doc": doc, tabindex: "0", style: `--doc-color: hsl(${hue(doc)} 65% 55%)`,
          title: seen[doc] > 1 ? `found by ${seen[doc]} columns` : "only here" },
          el("strong", { text: (item.metadata || {}).title || item.id }), " ",
          el("span", { class: "score", text: item.score.toFixed(2) }),
          seen[doc] > 1 ? el("span", { class: "muted", text: ` ×${seen[doc]}` }) : null);
        const mark = (on) => document.querySelectorAll(`#compare li[data-doc="${CSS.escape(doc)}"]`).forEach((x) => x.classList.toggle("same", on));
        li.addEventListener("mouseenter", () => mark(true));
        li.addEventListener("mouseleave", () => mark(false));
        li.addEventListener("focus", () => mark(true));
        li.addEventListener("blur", () => mark(false));
        return li;
      })))));
    status("Same document, same colour across columns; hover or focus one to outline it everywhere.");
  } catch (error) {
    status(String(error.message || error), true);
  }
}

async function openDocument(docId, chunkIds, push = true) {
  const state = readForm();
  if (push) history.pushState(null, "", urlFor(state, { view: "document", doc: docId, chunks: chunkIds.join(",") }));
  show("document");
  status("Loading the document…");
  try {
    const doc = await call("GET", `/v1/documents/${encodeURIComponent(docId)}`);
    const chars = Array.from(doc.text);
    const wanted = doc.chunks.filter((c) => chunkIds.includes(c.id)).sort((a, b) => a.start - b.start);
    const parts = [];
    let at = 0;
    for (const c of wanted) {
      if (c.start < at) continue;
      parts.push(chars.slice(at, c.start).join(""), el("mark", { class: "chunk", "data-chunk": c.id, text: chars.slice(c.start, c.end).join("") }));
      at = c.end;
    }
    parts.push(chars.slice(at).join(""));
    $("#document").replaceChildren(
      el("p", {}, el("button", { type: "button", onclick: () => history.back(), text: "← back" })),
      el("h2", { text: doc.title || doc.id }),
      el("p", { class: "muted" }, [doc.url ? el("a", { href: doc.url, text: doc.url }) : null, doc.date ? ` · ${doc.date}` : "", ` · ${doc.chunks.length} chunks`]),
      el("article", { lang: doc.language || "en" }, parts),
    );
    const first = document.querySelector("#document mark.chunk");
    if (first) first.scrollIntoView({ block: "center" });
    status(wanted.length ? "The matched passage is highlighted." : "");
  } catch (error) {
    status(String(error.message || error), true);
  }
}

function neighbourhood(name) {
  // An entity or community opens its neighbourhood: a graph search for it.
  $("#q").value = name;
  for (const box of document.querySelectorAll("input[name=strategy]")) box.checked = box.value === "graph";
  submit("results");
}

let currentView = "results";
function submit(view = currentView) {
  const state = readForm();
  if (!state.q) return;
  currentView = view;
  history.pushState(null, "", urlFor(state, { view: view === "results" ? "" : view }));
  return view === "compare" ? runCompare(state) : runResults(state);
}

function route() {
  const state = stateFromUrl();
  writeForm(state);
  currentView = state.view === "compare" ? "compare" : "results";
  if (state.view === "document" && state.doc) return openDocument(state.doc, state.chunks, false);
  // The form is the one source of what is sent, whether the search came from a link or a click.
  const form = readForm();
  if (form.q) return currentView === "compare" ? runCompare(form) : runResults(form);
  show(currentView);
}

// ---- wiring
$("#search").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
for (const s of STRATEGIES) {
  $(`#w-${s}`).addEventListener("input", () => { weightsTouched = true; showWeightsSource(); rebalance(s); });
}
$("#w-reset").addEventListener("click", () => { weightsTouched = false; showWeightsSource(); submit(); });
$("#api-key").addEventListener("change", (e) => sessionStorage.setItem("hybridrag-api-key", e.target.value));
for (const tab of document.querySelectorAll(".view-tab")) tab.addEventListener("click", () => submit(tab.dataset.view));
document.addEventListener("keydown", (e) => {
  if (e.key === "/" && document.activeElement !== $("#q")) { e.preventDefault(); $("#q").focus(); }
});
window.addEventListener("popstate", route);
$("#api-key").value = sessionStorage.getItem("hybridrag-api-key") || "";
// On a phone the controls fold away until asked for, so the results come first.
if (window.matchMedia("(max-width: 640px)").matches) $("#controls").open = false;
route();
