// Talking to sluice serve: the API key kept in this browser, /props, and streamed
// completions read as server-sent events. Aborting the signal closes the connection, which
// is how the server learns to cancel the generation.

const KEY = 'sluice.key';

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function apiKey() { return localStorage.getItem(KEY) || ''; }
export function setApiKey(k) { if (k) localStorage.setItem(KEY, k); else localStorage.removeItem(KEY); }

function headers() {
  const h = {'Content-Type': 'application/json'};
  const k = apiKey();
  if (k) h.Authorization = 'Bearer ' + k;
  return h;
}

async function failure(res) {
  let msg = res.statusText || ('HTTP ' + res.status);
  try {
    const j = await res.json();
    if (j && j.error && j.error.message) msg = j.error.message;
  } catch (_) { /* not JSON */ }
  return new HttpError(res.status, msg);
}

export async function getProps() {
  const res = await fetch('/props', {headers: headers()});
  if (!res.ok) throw await failure(res);
  return res.json();
}

// POSTs `body` (stream: true) to `path` and calls onEvent(json) per SSE data line until
// [DONE], the end of the stream or `signal` aborts (then it resolves with aborted: true).
export async function streamJson(path, body, signal, onEvent) {
  const res = await fetch(path, {method: 'POST', headers: headers(), body: JSON.stringify(body), signal});
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of block.split('\n')) {
          if (!line.startsWith('data:')) continue;   // comments (keep-alives) and other fields
          const data = line.slice(5).trim();
          if (data === '[DONE]') return {aborted: false};
          const ev = JSON.parse(data);
          if (ev.error) throw new HttpError(500, ev.error.message || 'the server ended the stream');
          onEvent(ev);
        }
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') return {aborted: true};
    throw e;
  }
  return {aborted: false};
}
