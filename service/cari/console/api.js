// Calls to Cari's /v1 API, with the API key the user gave (if any).

const KEY = "cari-console-api-key";

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem.detail || problem.title || `HTTP ${status}`;
    super(status === 401 ? `${detail} (enter the API key above)` : detail);
    this.status = status;
    this.problem = problem;
  }
}

function headers(extra = {}) {
  const key = apiKey();
  return {
    "content-type": "application/json",
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...extra,
  };
}

async function failure(response) {
  let problem = {};
  try {
    problem = await response.json();
  } catch {
    problem = { detail: `${response.status} ${response.statusText}` };
  }
  return new ApiError(response.status, problem);
}

export async function call(method, path, body, { signal } = {}) {
  const response = await fetch(`/v1${path}`, {
    method,
    headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

// POST a body and call `onEvent(name, data)` for each server-sent event as it arrives.
// EventSource cannot POST or send a header, so the stream is read and parsed here
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
export async function stream(path, body, onEvent, { signal } = {}) {
  const response = await fetch(`/v1${path}`, {
    method: "POST",
    headers: headers({ accept: "text/event-stream" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let name = "message";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
        name = "message";
        data = [];
      } else if (line.startsWith("event:")) {
        name = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }
}
