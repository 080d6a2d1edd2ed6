// The search console: one question, one or two sets of search settings, their results and
// explanations side by side, and a streamed answer.

import { ApiError, apiKey, call, setApiKey, stream } from "./api.js";
import { el, band, dropped, highlight, marked, plan, recallCurve, results, waterfall } from "./render.js";

const $ = (selector, root = document) => root.querySelector(selector);

// Request fields the collection keeps as defaults, by the console's setting name.
const DEFAULTS = {
  mode: "search_mode",
  fusion: "fusion",
  keyword_weight: "keyword_weight",
  vector_weight: "vector_weight",
  threshold: "search_threshold", // a search's; answers apply the collection's `threshold`
  top_k: "top_k",
  rrf_k: "rrf_k",
  ef_search: "ef_search", // `cari tune ef-search --apply` stores it too
};
// What the answer endpoint accepts of the settings.
const ANSWER_SETTINGS = ["mode", "top_k", "threshold", "filters"];

const state = { collection: null, responses: {}, run: 0, answering: null };
const sides = {};

class FieldError extends Error {}

function makeSide(name, title) {
  const section = $("#side-template").content.firstElementChild.cloneNode(true);
  section.id = `side-${name}`;
  const heading = $(".side-title", section);
  heading.id = `side-${name}-title`;
  heading.textContent = title;
  section.setAttribute("aria-labelledby", heading.id);
  // Unique ids for the labels' inputs (tests and assistive technology find them by id).
  for (const input of section.querySelectorAll("[data-setting]")) {
    input.id = `${name}-${input.dataset.setting}`;
    input.addEventListener(input.type === "checkbox" || input.tagName === "SELECT" ? "change" : "input", schedule);
  }
  $(".results", section).setAttribute("aria-label", `Results of ${title}`);
  $("#sides").append(section);
  sides[name] = section;
  return section;
}

function settingsOf(name) {
  const chosen = {};
  const section = sides[name];
  const error = $(".field-error", section);
  error.textContent = "";
  for (const input of section.querySelectorAll("[data-setting]")) {
    const key = input.dataset.setting;
    input.removeAttribute("aria-invalid");
    if (input.validity.badInput) {
      // A number field holding what is not a number reads as empty: say so, do not search.
      input.setAttribute("aria-invalid", "true");
      error.textContent = `${input.labels[0].textContent.trim()}: not a number`;
      throw new FieldError(error.textContent);
    }
    if (input.type === "checkbox") {
      chosen[key] = input.checked;
    } else if (input.value.trim() !== "") {
      if (key === "filters") {
        try {
          chosen.filters = JSON.parse(input.value);
        } catch (exc) {
          input.setAttribute("aria-invalid", "true");
          error.textContent = `Filters: not JSON (${exc.message})`;
          throw new FieldError(error.textContent);
        }
      } else if (input.type === "number") {
        chosen[key] = Number(input.value);
      } else {
        chosen[key] = input.value;
      }
    }
  }
  return chosen;
}

function setStatus(text, kind = "info") {
  const status = $("#status");
  status.textContent = text;
  status.dataset.kind = kind;
}

function showError(exc) {
  setStatus(exc.message, "error");
  if (exc instanceof ApiError && exc.status === 401) $("#api-key").focus();
}

// Results are busy from a change until the search it starts has been shown (or not started).
function busy(on) {
  for (const section of Object.values(sides)) {
    if (on) $(".results", section).setAttribute("aria-busy", "true");
    else $(".results", section).removeAttribute("aria-busy");
  }
}

let timer = null;
function schedule() {
  clearTimeout(timer);
  busy(true);
  timer = setTimeout(refresh, 250);
}

function comparing() {
  return $("#compare").checked;
}

async function refresh() {
  const query = $("#query").value.trim();
  const names = comparing() ? ["a", "b"] : ["a"];
  if (!query || !state.collection) return busy(false);
  const run = ++state.run;
  let bodies;
  try {
    bodies = names.map((name) => ({ query, explain: true, ...settingsOf(name) }));
  } catch (exc) {
    busy(false);
    if (exc instanceof FieldError) return;
    throw exc;
  }
  busy(true);
  const path = `/collections/${encodeURIComponent(state.collection.name)}/search`;
  const outcomes = await Promise.allSettled(bodies.map((body) => call("POST", path, body)));
  if (run !== state.run) return; // a newer search has started: its results will show
  busy(false);
  state.responses = {};
  names.forEach((name, index) => {
    const outcome = outcomes[index];
    if (outcome.status === "fulfilled") state.responses[name] = outcome.value;
    else {
      $(".summary", sides[name]).textContent = `Search failed: ${outcome.reason.message}`;
      showError(outcome.reason);
    }
  });
  if (outcomes.every((o) => o.status === "fulfilled")) setStatus("");
  render(query, names, run);
}

// Rank movement of `list`'s results against `other`'s: text, class, and a spoken label.
function movements(list, other, otherName) {
  if (!other) return undefined;
  const before = new Map(other.results.map((result, index) => [result.id, index]));
  const moves = new Map();
  list.results.forEach((result, index) => {
    const was = before.get(result.id);
    if (was === undefined) {
      moves.set(result.id, { text: "new", class: "new", label: `not in ${otherName}'s results` });
    } else if (was === index) {
      moves.set(result.id, { text: "=", class: "same", label: `same rank as in ${otherName}` });
    } else {
      const up = was > index;
      moves.set(result.id, {
        text: `${up ? "▲" : "▼"}${Math.abs(was - index)}`,
        class: up ? "up" : "down",
        label: `${up ? "up" : "down"} ${Math.abs(was - index)} from rank ${was + 1} in ${otherName}`,
      });
    }
  });
  return moves;
}

function onlyIn(list, other, otherName) {
  if (!other) return undefined;
  const there = new Set(other.results.map((result) => result.id));
  const moves = new Map();
  for (const result of list.results) {
    if (!there.has(result.id)) {
      moves.set(result.id, { text: `not in ${otherName}`, class: "gone", label: `not in ${otherName}'s results` });
    }
  }
  return moves;
}

function comparison(moves) {
  const all = [...moves.values()];
  const moved = all.filter((move) => move.class === "up" || move.class === "down").length;
  const fresh = all.filter((move) => move.class === "new").length;
  return moved || fresh ? `against A: ${moved} moved, ${fresh} new` : "same order as A";
}

function render(query, names, run) {
  const { a, b } = state.responses;
  for (const name of names) {
    const section = sides[name];
    const response = state.responses[name];
    const list = $(".results", section);
    section.dataset.run = run;
    if (!response) {
      list.replaceChildren();
      for (const part of [".dropped-list", ".plan-body", ".waterfall"]) $(part, section).replaceChildren();
      continue;
    }
    const moves = name === "b" ? movements(b, a, "A") : onlyIn(a, b, "B");
    results(list, response, query, moves);
    dropped($(".dropped", section), response);
    plan($(".plan-body", section), response);
    waterfall($(".waterfall", section), response.explain.timings_ms);
    const count = response.results.length;
    const notes = [...response.warnings];
    if (moves && name === "b") notes.push(comparison(moves));
    if (!count) notes.unshift(response.explain.threshold === null ? "nothing found" : "nothing passes the threshold");
    $(".summary", section).textContent =
      `${count} result${count === 1 ? "" : "s"} · ${response.mode} · ` +
      `${response.explain.timings_ms.total.toFixed(0)} ms` +
      (notes.length ? ` · ${notes.join("; ")}` : "");
    for (const setting of ["ef_search", "candidates"]) {
      $(`[data-setting="${setting}"]`, section).placeholder = response.explain[setting].requested;
    }
  }
}

// What the key may do, from the server (GET /v1/access), beside the key field.
function describeAccess(access) {
  const who = access.key ? `Key ${access.key} (${access.name})` : access.name;
  const where = access.collections.includes("*") ? "every collection" : access.collections.join(", ");
  const seen = access.filter ? `, only documents matching ${JSON.stringify(access.filter)}` : "";
  return `${who}: ${access.actions.join(", ")} on ${where}${seen}.`;
}

async function showAccess() {
  const line = $("#key-scope");
  line.textContent = "";
  try {
    line.textContent = describeAccess(await call("GET", "/access"));
  } catch (exc) {
    if (!(exc instanceof ApiError)) throw exc; // a refused key: the status line says why
  }
}

async function loadCollections() {
  const select = $("#collection");
  let collections;
  try {
    collections = await call("GET", "/collections");
  } catch (exc) {
    select.replaceChildren();
    state.collection = null;
    showError(exc);
    return;
  }
  const previous = select.value || sessionStorage.getItem("cari-console-collection");
  select.replaceChildren(...collections.map((c) => el("option", { value: c.name, text: c.name })));
  if (!collections.length) {
    setStatus("No collection yet: create one with the API or `cari`.");
    return;
  }
  if (collections.some((c) => c.name === previous)) select.value = previous;
  setStatus(`${collections.length} collection${collections.length === 1 ? "" : "s"}.`);
  await chooseCollection();
}

async function chooseCollection() {
  const name = $("#collection").value;
  try {
    state.collection = await call("GET", `/collections/${encodeURIComponent(name)}`);
  } catch (exc) {
    showError(exc);
    return;
  }
  sessionStorage.setItem("cari-console-collection", name);
  showDefaults();
  schedule();
}

// The collection's defaults as each empty field's placeholder.
function showDefaults() {
  const c = state.collection;
  for (const section of Object.values(sides)) {
    for (const [setting, field] of Object.entries(DEFAULTS)) {
      const input = $(`[data-setting="${setting}"]`, section);
      if (input.tagName === "SELECT") input.options[0].textContent = `(${c[field]})`;
      else input.placeholder = c[field] ?? (field === "search_threshold" ? "none" : "");
    }
  }
}

function copySettings(from, to) {
  for (const input of sides[from].querySelectorAll("[data-setting]")) {
    const target = $(`[data-setting="${input.dataset.setting}"]`, sides[to]);
    if (input.type === "checkbox") target.checked = input.checked;
    else target.value = input.value;
  }
}

async function saveDefaults() {
  let chosen;
  try {
    chosen = settingsOf("b");
  } catch (exc) {
    if (exc instanceof FieldError) return;
    throw exc;
  }
  const change = {};
  for (const [setting, field] of Object.entries(DEFAULTS)) {
    if (setting in chosen) change[field] = chosen[setting];
  }
  if (!Object.keys(change).length) {
    setStatus("B sets none of the collection's defaults (candidates and filters are per search).");
    return;
  }
  const name = state.collection.name;
  try {
    state.collection = await call("PATCH", `/collections/${encodeURIComponent(name)}`, change);
  } catch (exc) {
    showError(exc);
    return;
  }
  const saved = Object.entries(change).map(([k, v]) => `${k} ${v}`).join(", ");
  setStatus(`Saved as the defaults of ${name}: ${saved}.`, "done");
  showDefaults();
  schedule();
}

// The answer, streamed: sources first, then the text as it comes, citations linked to sources.
async function answer() {
  const query = $("#query").value.trim();
  if (!query || !state.collection) return;
  let chosen;
  try {
    chosen = settingsOf("a");
  } catch (exc) {
    if (exc instanceof FieldError) return;
    throw exc;
  }
  state.answering?.abort();
  const controller = new AbortController();
  state.answering = controller;
  const section = $("#answer");
  const text = $("#answer-text");
  const sources = $("#answer-sources");
  section.hidden = false;
  section.dataset.state = "streaming";
  text.replaceChildren();
  text.setAttribute("aria-busy", "true");
  sources.replaceChildren();
  $("#answer-meta").textContent = "";
  const used = ANSWER_SETTINGS.filter((s) => s in chosen);
  $("#answer-note").textContent = used.length
    ? `With A's ${used.join(", ")}; the rest are the collection's defaults.`
    : "With the collection's defaults.";
  const body = { query, stream: true };
  for (const setting of used) body[setting] = chosen[setting];
  let written = "";
  let failed = false;
  const numbers = new Set();
  const onEvent = (name, data) => {
    if (name === "search_complete") {
      for (const { number, result } of data.sources) {
        numbers.add(number);
        sources.append(source(number, result, query));
      }
    } else if (name === "llm_chunk") {
      written += data.text;
      text.replaceChildren(...cited(written, numbers));
    } else if (name === "citations") {
      for (const number of Object.keys(data.citations)) {
        $(`#source-${number}`)?.classList.add("cited");
      }
    } else if (name === "metadata") {
      const parts = [`model: ${data.model ?? "none (no information)"}`];
      if (data.timings_ms.total !== undefined) parts.push(`${data.timings_ms.total.toFixed(0)} ms`);
      parts.push(...data.warnings);
      $("#answer-meta").textContent = parts.join(" · ");
    } else if (name === "error") {
      failed = true;
      text.append(el("p", { class: "error", role: "alert", text: `The answer stopped: ${data.message}` }));
    }
  };
  try {
    await stream(`/collections/${encodeURIComponent(state.collection.name)}/answer`, body, onEvent, {
      signal: controller.signal,
    });
    section.dataset.state = failed ? "failed" : "done";
  } catch (exc) {
    if (exc.name === "AbortError") return; // a newer answer replaced this one
    section.dataset.state = "failed";
    showError(exc);
  }
  text.setAttribute("aria-busy", "false");
}

function source(number, result, query) {
  const snippet = result.content.length > 400 ? `${result.content.slice(0, 400)}…` : result.content;
  const text = result.highlight ? marked(result.highlight) : highlight(snippet, query);
  const { colour } = band(result.relevance, result.band);
  return el(
    "li",
    { id: `source-${number}`, tabindex: "-1", "data-id": result.id },
    el("span", { class: "source-number", text: `[${number}]` }),
    " ",
    el("strong", { text: result.title || result.id }),
    " ",
    el("span", { class: `dot ${colour}`, title: `relevance ${result.relevance}`, text: result.relevance.toFixed(2) }),
    " ",
    el("span", { class: "source", text: result.document_id || result.kind }),
    el("p", { class: "content" }, text),
  );
}

// The answer text with each [n] that names a source turned into a link to it.
function cited(text, numbers) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    const number = Number(match[1]);
    if (!numbers.has(number)) continue;
    nodes.push(text.slice(last, match.index));
    nodes.push(el("a", { href: `#source-${number}`, class: "cite", "data-source": number, text: match[0] }));
    last = match.index + match[0].length;
  }
  nodes.push(text.slice(last));
  return nodes;
}

function followCitation(event) {
  const link = event.target.closest("a.cite");
  if (!link) return;
  event.preventDefault();
  const target = $(`#source-${link.dataset.source}`);
  for (const item of document.querySelectorAll("#answer-sources li.target")) item.classList.remove("target");
  target.classList.add("target");
  target.scrollIntoView({ block: "nearest" });
  target.focus();
}

// `cari tune ef-search` on the chosen collection: its recall-latency curve, and the
// recommendation to apply.
async function tuneEfSearch() {
  if (!state.collection) return;
  const name = state.collection.name;
  const section = $("#tuning");
  const apply = $("#tuning-apply");
  section.hidden = false;
  apply.hidden = true;
  $("#tuning-note").textContent = "Measuring 100 key-phrase questions at each ef_search…";
  $("#tuning-curve").replaceChildren();
  let result;
  try {
    result = await call("POST", `/collections/${encodeURIComponent(name)}/tune/ef-search`, { sample: 100 });
  } catch (exc) {
    $("#tuning-note").textContent = "";
    showError(exc);
    return;
  }
  if (!result.points.length) {
    $("#tuning-note").textContent = "The collection has no embedded chunk yet: nothing to measure.";
    return;
  }
  const uses = `its searches use ${result.current} (${result.current_source === "collection" ? "its own" : "the server's"})`;
  $("#tuning-note").textContent = !result.points.some((p) => p.index_used)
    ? `PostgreSQL read this collection exactly at every ef_search: nothing to tune yet; ${uses}.`
    : result.recommended === null
      ? `No value reaches recall ${result.target}; ${uses}.`
      : `Recall@${result.k} against the exact top ${result.k} on ${result.questions} questions: ` +
        `${result.recommended} is the smallest ef_search reaching ${result.target}; ${uses}.`;
  $("#tuning-curve").replaceChildren(recallCurve(result));
  if (result.recommended !== null && result.recommended !== result.current) {
    apply.textContent = `Use ef_search ${result.recommended} for ${name}`;
    apply.onclick = async () => {
      try {
        state.collection = await call("PATCH", `/collections/${encodeURIComponent(name)}`, { ef_search: result.recommended });
      } catch (exc) {
        showError(exc);
        return;
      }
      apply.hidden = true;
      setStatus(`Saved as the defaults of ${name}: ef_search ${result.recommended}.`, "done");
      showDefaults();
      schedule();
    };
    apply.hidden = false;
  }
}

function start() {
  makeSide("a", "A");
  const b = makeSide("b", "B");
  b.hidden = true;
  const save = $(".save", b);
  save.hidden = false;
  save.addEventListener("click", saveDefaults);
  $("#api-key").value = apiKey();
  $("#access").addEventListener("submit", (event) => {
    event.preventDefault();
    setApiKey($("#api-key").value.trim());
    showAccess();
    loadCollections();
  });
  $("#question").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    refresh();
  });
  $("#query").addEventListener("input", schedule);
  $("#collection").addEventListener("change", chooseCollection);
  $("#compare").addEventListener("change", () => {
    const on = comparing();
    if (on && !sides.b.dataset.touched) {
      copySettings("a", "b");
      sides.b.dataset.touched = "yes";
    }
    b.hidden = !on;
    $("#sides").classList.toggle("two", on);
    schedule();
  });
  $("#ask").addEventListener("click", answer);
  $("#tune-ef").addEventListener("click", tuneEfSearch);
  $("#answer-text").addEventListener("click", followCitation);
  showAccess();
  loadCollections();
}

start();
