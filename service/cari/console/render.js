// Building the page's pieces from a search response (with `explain`). DOM nodes only, never
// HTML strings: chunk text is shown as text.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

const number = (value, digits = 4) =>
  value === null || value === undefined ? "–" : Number(value.toFixed(digits)).toString();

// The relevance bands of the 0-1 scale, coloured as people know them from search-debug tools:
// the band the API gives a result (`name`), else the one its relevance falls in.
const BANDS = {
  strong: { colour: "green", meaning: "strong match" },
  moderate: { colour: "yellow", meaning: "decent match" },
  weak: { colour: "red", meaning: "weak match, may be filtered out by an answer's threshold" },
};
export function band(relevance, name) {
  const named = name || (relevance >= 0.5 ? "strong" : relevance >= 0.3 ? "moderate" : "weak");
  return { name: named, ...BANDS[named] };
}

function badge(relevance, bandName) {
  const { name, colour, meaning } = band(relevance, bandName);
  return el(
    "span",
    { class: `badge ${colour}`, title: `relevance ${number(relevance)}: ${meaning}` },
    el("span", { class: "badge-value", text: relevance.toFixed(2) }),
    el("span", { class: "badge-band", text: name }),
  );
}

// A result's passage as the API marks it: escaped text with the matches in <mark>. Built as
// text nodes and <mark> elements, never parsed as HTML.
const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', "#x27": "'" };
export function marked(passage) {
  const fragment = document.createDocumentFragment();
  passage.split(/<mark>|<\/mark>/).forEach((part, index) => {
    const text = part.replace(/&(amp|lt|gt|quot|#x27);/g, (_, name) => ENTITIES[name]);
    if (text) fragment.append(index % 2 ? el("mark", { text }) : text);
  });
  return fragment;
}

// The passage of a chunk around the question's words as the API found it; for a structured
// source (catalog item, installments), the question's words in its text, case-insensitively,
// as whole words: the page's own reading of the question.
export function passage(result, question) {
  return result.highlight ? marked(result.highlight) : highlight(result.content, question);
}

export function highlight(text, question) {
  const words = [...new Set(question.toLowerCase().match(/[\p{L}\p{N}]+/gu) || [])]
    .filter((word) => word.length > 1)
    .sort((a, b) => b.length - a.length)
    .map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const fragment = document.createDocumentFragment();
  if (!words.length) {
    fragment.append(text);
    return fragment;
  }
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${words.join("|")})(?![\\p{L}\\p{N}])`, "giu");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    fragment.append(text.slice(last, match.index), el("mark", { text: match[0] }));
    last = match.index + match[0].length;
  }
  fragment.append(text.slice(last));
  return fragment;
}

// Every chunk the threshold weighed, by id: its evidence and the sub-query that kept it. Where
// several kept a chunk, it is the one the search merged it from (rank 1 of every sub-query, then
// rank 2, ...), whose relevance the result shows.
function weighed(explain) {
  const found = new Map();
  const parts = explain?.sub_queries || [];
  const longest = Math.max(0, ...parts.map((part) => part.kept.length));
  for (let rank = 0; rank < longest; rank++) {
    for (const part of parts) {
      const entry = part.kept[rank];
      if (entry && !found.has(entry.id)) found.set(entry.id, { ...entry, query: part.query });
    }
  }
  return found;
}

function evidence(entry) {
  const parts = [];
  if (entry.cosine !== null) parts.push(`meaning ${number(entry.dense, 2)} (cosine ${number(entry.cosine)})`);
  parts.push(`word coverage ${number(entry.coverage, 2)}`);
  return parts.join(", ");
}

function why(result, explain, kept) {
  const threshold = explain?.threshold;
  const ranked = threshold === null; // no threshold asked: the top k, ranked
  if (result.kind === "catalog") {
    return `Catalog item named by the question: relevance ${number(result.relevance, 2)}, the best of its catalog search and at least ${ranked ? "the collection's answer threshold" : `the threshold ${threshold}`}.`;
  }
  if (result.kind === "financing") {
    return result.relevance > 0
      ? "Installments computed for a product the question names."
      : "Why installments could not be computed (relevance 0: not an answer).";
  }
  const entry = kept.get(result.id);
  if (!entry || threshold === undefined) return "";
  const by = explain.sub_queries.length > 1 ? ` (sub-query “${entry.query}”)` : "";
  if (ranked) return `Ranked: relevance ${number(entry.relevance, 2)}, ${band(entry.relevance, entry.band).name}${by}; ${evidence(entry)}.`;
  const reached =
    entry.relevance >= threshold
      ? `reaches the threshold ${threshold}`
      : `is at least half the threshold ${threshold}, beside a chunk that reaches it`;
  return `Passed: relevance ${number(entry.relevance, 2)} ${reached}${by}; ${evidence(entry)}.`;
}

function retriever(result, name) {
  const hit = result.retrievers[name];
  return hit ? `#${hit.rank} · ${number(hit.score)}` : "–";
}

// `moves`: id -> text and class for the rank change against the other side (or undefined).
export function results(list, response, question, moves) {
  const kept = weighed(response.explain);
  list.replaceChildren(
    ...response.results.map((result, index) => {
      const move = moves?.get(result.id);
      const scores = el(
        "dl",
        { class: "scores" },
        el("dt", { text: "keyword" }),
        el("dd", { class: "keyword", text: retriever(result, "keyword") }),
        el("dt", { text: "vector" }),
        el("dd", { class: "vector", text: retriever(result, "vector") }),
        result.retrievers.rerank ? [el("dt", { text: "rerank" }), el("dd", { text: retriever(result, "rerank") })] : null,
        el("dt", { text: result.kind === "chunk" ? "fused" : "score" }),
        el("dd", { class: "fused", text: number(result.score) }),
      );
      return el(
        "li",
        { class: `result ${result.kind}`, "data-id": result.id },
        el(
          "div",
          { class: "result-head" },
          el("span", { class: "rank", text: index + 1 }),
          badge(result.relevance, result.band),
          el("strong", { class: "title", text: result.title || result.id }),
          el("span", { class: "source", text: result.document_id || result.kind }),
          move ? el("span", { class: `move ${move.class}`, title: move.label, text: move.text }) : null,
        ),
        scores,
        el("p", { class: "content" }, passage(result, question)),
        installments(result),
        el("p", { class: "why", text: why(result, response.explain, kept) }),
      );
    }),
  );
}

const money = new Intl.NumberFormat("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const PLAN_COLUMNS = {
  provider: (plan) => plan.provider,
  "tenor (months)": (plan) => plan.tenor_months,
  "rate / year": (plan) => `${(plan.rate * 100).toFixed(2)}% ${plan.rate_type}`,
  "down payment": (plan) => money.format(plan.down_payment),
  monthly: (plan) => (plan.monthly === undefined ? plan.note : money.format(plan.monthly)),
  total: (plan) => (plan.total === undefined ? "" : money.format(plan.total)),
};

function installments(result) {
  const plans = result.kind === "financing" ? result.metadata.plans : null;
  if (!plans?.length) return null;
  return el(
    "table",
    { class: "plans" },
    el("caption", { text: `Computed installments (${result.metadata.currency ?? "IDR"})` }),
    el("thead", {}, el("tr", {}, Object.keys(PLAN_COLUMNS).map((c) => el("th", { scope: "col", text: c })))),
    el(
      "tbody",
      {},
      plans.map((plan) => el("tr", {}, Object.values(PLAN_COLUMNS).map((cell) => el("td", { text: cell(plan) })))),
    ),
  );
}

export function dropped(details, response) {
  const entries = (response.explain?.sub_queries || []).flatMap((part) =>
    part.dropped.map((entry) => ({ ...entry, query: part.query })),
  );
  details.querySelector("summary").textContent = `Dropped by the threshold (${entries.length})`;
  details.querySelector(".dropped-list").replaceChildren(
    ...entries.map((entry) =>
      el(
        "li",
        { "data-id": entry.id },
        badge(entry.relevance, entry.band),
        ` ${entry.id}: ${entry.reason}; ${evidence(entry)}`,
      ),
    ),
  );
}

function pairs(rows) {
  return el("dl", { class: "pairs" }, rows.flatMap(([name, value]) => [el("dt", { text: name }), el("dd", {}, value)]));
}

export function plan(container, response) {
  const x = response.explain;
  if (!x) return container.replaceChildren();
  const tokens = x.signal.exact_tokens.map((t) => `${t.text} (${t.kind})`).join(", ");
  const weights = Object.entries(x.weights).map(([n, w]) => `${n} ${number(w, 3)}`).join(", ");
  const split = x.decomposition.sub_queries.length > 1;
  const settings = pairs([
    ["mode", x.mode],
    ["fusion", x.mode === "hybrid" ? `${x.fusion}${x.fusion === "rrf" ? ` (k ${x.rrf_k})` : ""}` : "none (one list)"],
    ["weights", tokens ? `${weights} — keyword boosted for exact tokens: ${tokens}` : weights],
    ["threshold", `${x.threshold ?? "none: the top k ranked"}; top k ${x.top_k}`],
    ["ef_search", `${x.ef_search.requested} requested (${x.ef_search.source}), ${x.ef_search.applied ?? "–"} applied`],
    ["candidates", `${x.candidates.requested} per retriever`],
    ["query vector", x.query_vector_cached ? "from the cache" : "embedded now"],
    ["filters", Object.keys(x.filters).length ? JSON.stringify(x.filters) : "none"],
  ]);
  const subQueries = el(
    "ol",
    { class: "sub-queries" },
    x.sub_queries.map((part) =>
      el(
        "li",
        {},
        el("q", { text: part.query }),
        // The vector side embedded it respelled: its misspelled words as keyword search reads them.
        part.embedded_query && part.embedded_query !== part.query
          ? el("span", { class: "respelled", text: ` embedded as “${part.embedded_query}”` })
          : "",
        ` — ${Object.entries(part.candidates).map(([n, c]) => `${n} ${c} candidates`).join(", ")}`,
        part.keyword_postings_read !== null ? `, ${part.keyword_postings_read} postings read` : "",
        `; ${part.kept.length} kept, ${part.dropped.length} dropped`,
      ),
    ),
  );
  const reason = split
    ? `Split (${x.decomposition.pattern}) into ${x.decomposition.sub_queries.length} sub-queries, each represented in the results:`
    : x.decomposition.kept_whole_because
      ? `Kept whole: ${x.decomposition.kept_whole_because}.`
      : "One question: nothing to split.";
  const routes = Object.entries(x.routes);
  const parts = [
    el("h3", { text: "Settings applied" }),
    settings,
    el("h3", { text: "Sub-queries" }),
    el("p", { text: reason }),
    subQueries,
    el("h3", { text: "Routes" }),
    routes.length
      ? el(
          "ul",
          { class: "routes" },
          routes.map(([name, evidence]) => el("li", {}, el("strong", { text: name }), `: ${evidence.join("; ")}`)),
        )
      : el("p", { text: "None." }),
  ];
  const structured = x.structured || {};
  if (structured.catalog?.length) {
    parts.push(el("h3", { text: "Catalog search" }));
    for (const search of structured.catalog) {
      if (!search.hits.length) {
        parts.push(el("p", {}, "No catalog item matches ", el("q", { text: search.query }), "."));
        continue;
      }
      parts.push(
        el(
          "table",
          { class: "catalog" },
          el("caption", {}, "for ", el("q", { text: search.query })),
          el(
            "thead",
            {},
            el("tr", {}, ["item", "relevance", "keyword rank", "vector rank", "cosine", "chosen"].map((c) => el("th", { scope: "col", text: c }))),
          ),
          el(
            "tbody",
            {},
            search.hits.map((hit) =>
              el(
                "tr",
                {},
                el("td", { text: hit.name }),
                el("td", {}, badge(hit.relevance)),
                el("td", { text: hit.keyword_rank ?? "–" }),
                el("td", { text: hit.vector_rank ?? "–" }),
                el("td", { text: number(hit.cosine) }),
                el("td", { text: hit.chosen ? "yes" : "no" }),
              ),
            ),
          ),
        ),
      );
    }
  }
  if (structured.financing) {
    const f = structured.financing;
    parts.push(
      el("h3", { text: "Financing terms read from the question" }),
      pairs([
        ["down payment", f.down_payment ?? (f.down_payment_share !== null ? `${f.down_payment_share * 100}%` : "the provider's minimum")],
        ["tenors", f.tenors_months.length ? `${f.tenors_months.join(", ")} months` : "all"],
        ["price stated", f.price ?? "–"],
        ["rates loaded", f.rates],
        ["notes", f.notes.join("; ") || "–"],
      ]),
    );
  }
  container.replaceChildren(...parts);
}

// Where each stage starts: the API reports durations; the order is the pipeline's (keyword
// search runs beside embedding and vector search; the rest follow one another).
const AFTER = {
  decompose: [],
  keyword: ["decompose"],
  embed: ["decompose"],
  vector: ["embed"],
  fuse: ["keyword", "vector"],
  relevance: ["fuse"],
  route: ["relevance"],
  fetch: ["route"],
  rerank: ["fetch"],
  structured: ["rerank", "fetch"],
};

export function waterfall(list, timings) {
  const starts = {};
  const ends = {};
  for (const [stage, after] of Object.entries(AFTER)) {
    if (!(stage in timings)) continue;
    starts[stage] = Math.max(0, ...after.filter((s) => s in ends).map((s) => ends[s]));
    ends[stage] = starts[stage] + timings[stage];
  }
  const total = Math.max(timings.total || 0, ...Object.values(ends), 0.001);
  const rows = Object.keys(starts).map((stage) => [stage, starts[stage], timings[stage]]);
  rows.push(["total", 0, timings.total || 0]);
  list.replaceChildren(
    ...rows.map(([stage, start, ms]) => {
      const bar = el("span", { class: `bar ${stage}` });
      bar.style.marginLeft = `${(100 * start) / total}%`;
      bar.style.width = `${Math.max((100 * ms) / total, 0.4)}%`;
      return el(
        "li",
        { "data-stage": stage },
        el("span", { class: "stage", text: stage }),
        el("span", { class: "track", "aria-hidden": "true" }, bar),
        el("span", { class: "ms", text: `${ms.toFixed(1)} ms` }),
        el("span", { class: "visually-hidden", text: ` from ${start.toFixed(1)} ms` }),
      );
    }),
  );
}

// `cari tune ef-search`'s curve: recall@k against p50 latency, a point per ef_search (hollow
// where PostgreSQL read the collection exactly), the target dashed, the recommendation ringed.
// The same picture as `--plot` (cari/tune/plot.py).
export function recallCurve(result) {
  const NS = "http://www.w3.org/2000/svg";
  const [width, height, left, right, top, bottom] = [560, 330, 60, 20, 30, 44];
  const svg = (tag, attributes = {}, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const slowest = Math.max(...result.points.map((p) => p.p50_ms)) * 1.1 || 1;
  const floor = Math.max(0, Math.min(Math.min(...result.points.map((p) => p.recall), result.target) - 0.02, 0.95));
  const x = (ms) => left + (ms / slowest) * (width - left - right);
  const y = (recall) => top + (1 - (recall - floor) / (1 - floor)) * (height - top - bottom);
  const chart = svg("svg", { width, height, class: "curve", role: "img", "aria-label": `recall@${result.k} against latency per ef_search` });
  chart.append(
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "currentColor" }),
    svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "currentColor" }),
    svg("text", { x: (width + left) / 2, y: height - 8, "text-anchor": "middle" }, "p50 ms"),
    svg("text", { x: 4, y: 14 }, `recall@${result.k}`),
    svg("line", { x1: left, y1: y(result.target), x2: width - right, y2: y(result.target), stroke: "grey", "stroke-dasharray": "4 4" }),
    svg("polyline", { points: result.points.map((p) => `${x(p.p50_ms)},${y(p.recall)}`).join(" "), fill: "none", stroke: "steelblue", "stroke-width": 2 }),
  );
  for (let tick = 0; tick <= 4; tick++) {
    chart.append(
      svg("text", { x: x((slowest * tick) / 4), y: height - bottom + 14, "text-anchor": "middle" }, ((slowest * tick) / 4).toFixed(1)),
      svg("text", { x: left - 4, y: y(floor + ((1 - floor) * tick) / 4) + 4, "text-anchor": "end" }, (floor + ((1 - floor) * tick) / 4).toFixed(3)),
    );
  }
  for (const p of result.points) {
    const [cx, cy] = [x(p.p50_ms), y(p.recall)];
    const point = svg("circle", { cx, cy, r: 4, fill: p.index_used ? "steelblue" : "white", stroke: "steelblue", "data-ef": p.ef_search });
    point.append(svg("title", {}, `ef_search ${p.ef_search}: recall ${p.recall} [${p.recall_low}, ${p.recall_high}], p50 ${p.p50_ms} ms, ${p.index_used ? "HNSW index" : "exact scan"}`));
    chart.append(point, svg("text", { x: cx + 6, y: cy - 6 }, String(p.ef_search)));
    if (p.ef_search === result.recommended) {
      chart.append(svg("circle", { cx, cy, r: 9, fill: "none", stroke: "darkorange", "stroke-width": 2, class: "recommended" }));
    }
  }
  return chart;
}
