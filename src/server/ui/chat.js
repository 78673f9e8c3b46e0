// One generation: the request built from the branch on screen and the settings, the reply
// streamed into a new assistant message (markdown re-rendered on a timer, not per token),
// Stop, and the errors a person can act on (busy server, full context, API key).
import {HttpError, setApiKey, streamJson} from './api.js';
import * as store from './store.js';
import {fillMarkdown, throttle} from './render.js';
import {state} from './state.js';
import * as view from './view.js';

const $ = id => document.getElementById(id);

// A message's content: its text, or with images or audio OpenAI content parts (media first, as
// Gemma reads them best; the server puts each where the chat template says).
function messageContent(n) {
  const images = n.images || [], audio = n.audio || [];
  if (!images.length && !audio.length) return n.content;
  const parts = images.map(url => ({type: 'image_url', image_url: {url}}));
  for (const a of audio) parts.push({type: 'input_audio', input_audio: {data: a.data, format: a.format}});
  if (n.content) parts.push({type: 'text', text: n.content});
  return parts;
}

function chatRequest(parent) {
  const messages = [];
  if (state.settings.system) messages.push({role: 'system', content: state.settings.system});
  for (const n of store.path({nodes: state.conv.nodes, leaf: parent.id})) {
    const m = {role: n.role, content: messageContent(n)};
    if (n.tool_calls) m.tool_calls = n.tool_calls;
    messages.push(m);
  }
  const body = {model: state.props ? state.props.model : undefined, messages, stream: true, stream_options: {include_usage: true}, ...view.samplingParams()};
  if (state.props && state.props.chat_template.reasoning)
    body.chat_template_kwargs = {enable_thinking: !!state.settings.thinking};
  return ['/v1/chat/completions', body];
}

// Text mode: the branch is one document the model continues.
function textRequest(parent) {
  const prompt = store.path({nodes: state.conv.nodes, leaf: parent.id}).map(n => n.content).join('');
  return ['/v1/completions', {model: state.props ? state.props.model : undefined, prompt, stream: true, stream_options: {include_usage: true}, ...view.samplingParams()}];
}

function mergeToolCalls(node, deltas) {
  node.tool_calls = node.tool_calls || [];
  for (const d of deltas) {
    const i = d.index ?? node.tool_calls.length;
    const cur = node.tool_calls[i] || (node.tool_calls[i] = {id: d.id, type: 'function', function: {name: '', arguments: ''}});
    if (d.function && d.function.name) cur.function.name += d.function.name;
    if (d.function && d.function.arguments) cur.function.arguments += d.function.arguments;
  }
}

function errorText(e) {
  if (e.status === 429) return 'The server is busy: every generation slot and queue place is taken (HTTP 429). Try again in a moment.';
  if (e.status === 400 && /context/i.test(e.message))
    return 'The conversation no longer fits the model\'s context: start a new chat, or edit an earlier message to branch off. (' + e.message + ')';
  return `Error${e.status ? ' ' + e.status : ''}: ${e.message}`;
}

function showError(text) {
  const el = document.createElement('div');
  el.className = 'msg error';
  el.setAttribute('role', 'alert');
  el.textContent = text;
  $('messages').append(el);
}

function liveView(node) {
  const el = view.messageElement(node);
  $('messages').append(el);
  const body = el.querySelector('.content');
  let thinking = null;
  const paint = () => {
    if (node.reasoning) {
      if (!thinking) {
        thinking = view.reasoningBlock('', true);
        el.insertBefore(thinking, body);
      }
      thinking.querySelector('.reasoning-text').textContent = node.reasoning;
    }
    if (state.textMode) body.textContent = node.content;
    else fillMarkdown(body, node.content);
    const box = $('messages');
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
  };
  return throttle(paint, 250);
}

function onEvent(node, t, paint) {
  return ev => {
    if (ev.usage) t.usage = ev.usage;
    const c = ev.choices && ev.choices[0];
    if (!c) return;
    const d = c.delta || {text: c.text};
    const piece = (d.content ?? d.text) || '';
    if (piece || d.reasoning_content) {
      if (!t.first) t.first = performance.now();
      t.chunks++;
    }
    node.content += piece;
    if (d.reasoning_content) node.reasoning += d.reasoning_content;
    if (d.tool_calls) mergeToolCalls(node, d.tool_calls);
    if (c.finish_reason) t.finish = c.finish_reason;
    paint();
  };
}

function setRunning(on) {
  $('send').hidden = on;
  $('stop').hidden = !on;
  document.body.classList.toggle('running', on);
}

export async function generate(parent) {
  if (state.running) return;
  const node = store.addNode(state.conv, parent.id, 'assistant', '');
  const [path, body] = state.textMode ? textRequest(parent) : chatRequest(parent);
  const ctl = new AbortController();
  state.running = ctl;
  setRunning(true);
  const paint = liveView(node);
  const t = {start: performance.now(), first: 0, chunks: 0, usage: null, finish: null};
  try {
    const r = await streamJson(path, body, ctl.signal, onEvent(node, t, paint));
    const end = performance.now();
    const n = t.usage ? t.usage.completion_tokens : t.chunks;
    node.stats = {completion_tokens: n, finish: r.aborted ? 'stopped' : t.finish,
                  tps: t.first && n > 1 && end > t.first ? (n - 1) / ((end - t.first) / 1000) : 0};
    if (t.usage) node.stats.prompt_tokens = t.usage.prompt_tokens;
    state.running = null;
    view.renderAll();
    await view.persist();
  } catch (e) {
    delete state.conv.nodes[node.id];
    state.conv.leaf = parent.id;
    if (e instanceof HttpError && e.status === 401) {
      state.running = null;
      setRunning(false);
      askKey(() => generate(parent));
      view.renderAll();
      return;
    }
    view.renderAll();
    showError(errorText(e));
    await view.persist();
  } finally {
    state.running = null;
    setRunning(false);
  }
}

export function stop() {
  if (state.running) state.running.abort();
}

// The API key dialog; `then` runs once a key is given.
export function askKey(then) {
  const d = $('key-dialog');
  $('key-input').value = '';
  d.onclose = () => {
    const k = $('key-input').value.trim();
    if (d.returnValue === 'ok' && k) {
      setApiKey(k);
      then();
    }
  };
  d.showModal();
}

// The user's text (and the attached images and clips): a new user message on the branch, then
// its reply.
export function send(text) {
  const images = state.textMode ? [] : state.pending;
  const audio = state.textMode ? [] : state.pendingAudio;
  if (state.running || (!text.trim() && !images.length && !audio.length)) return;
  const leaf = state.conv.leaf;
  const m = store.addNode(state.conv, leaf, 'user', text);
  if (images.length) m.images = images;
  if (audio.length) m.audio = audio;
  state.pending = [];
  state.pendingAudio = [];
  view.renderPending();
  view.renderAll();
  generate(m);
}
