// The chat page's view: settings form, conversation list, messages with branches, the
// context meter. Generation lives in chat.js; main.js hands its entry point to init(), so the
// view never imports chat.js (which imports the view).
import * as store from './store.js';
import {copyText, fillMarkdown, throttle} from './render.js';
import {state} from './state.js';

const $ = id => document.getElementById(id);
const RENDER_MS = 250;   // markdown re-rendered at most this often while a reply streams
let generate = null;   // chat.generate, from init()

export function init(generateFn) { generate = generateFn; }

// ---- settings (localStorage), defaults from /props ----
const FIELDS = ['temperature', 'top_k', 'top_p', 'min_p', 'repetition_penalty', 'max_tokens', 'seed'];

function loadSettings() {
  try { state.settings = JSON.parse(localStorage.getItem('sluice.settings') || '{}'); } catch (_) { state.settings = {}; }
}

function showSettings() {
  const f = $('settings-form'), d = (state.props && state.props.default_generation_settings) || {};
  f.system.value = state.settings.system || '';
  for (const k of FIELDS) {
    f[k].value = state.settings[k] ?? '';
    f[k].placeholder = d[k] !== undefined ? String(d[k]) : (k === 'seed' ? 'random' : 'default');
  }
  f.extra.value = state.settings.extra ? JSON.stringify(state.settings.extra) : '';
  f.thinking.checked = !!state.settings.thinking;
  f.thinking.disabled = !(state.props && state.props.chat_template.reasoning);
  $('settings').showModal();
}

function saveSettings(reset) {
  const f = $('settings-form');
  const s = {system: reset ? '' : f.system.value, thinking: reset ? false : f.thinking.checked};
  if (!reset) for (const k of FIELDS) if (f[k].value !== '') s[k] = Number(f[k].value);
  if (!reset && f.extra.value.trim()) {
    try {
      const extra = JSON.parse(f.extra.value);
      if (extra && typeof extra === 'object' && !Array.isArray(extra)) s.extra = extra;
    } catch (_) { /* not JSON: dropped */ }
  }
  state.settings = s;
  localStorage.setItem('sluice.settings', JSON.stringify(s));
}

function samplingParams() {
  const p = {};
  for (const k of FIELDS) if (state.settings[k] !== undefined) p[k] = state.settings[k];
  return {...p, ...(state.settings.extra || {})};
}

// ---- conversation list ----
let listGeneration = 0;   // a newer refresh makes an older one's result stale

async function refreshList() {
  const ul = $('conv-list'), q = state.filter.toLowerCase(), gen = ++listGeneration;
  const all = await store.listConversations();
  if (gen !== listGeneration) return;
  ul.replaceChildren();
  for (const c of all) {
    if (q && !c.title.toLowerCase().includes(q) &&
        !Object.values(c.nodes).some(n => n.content.toLowerCase().includes(q))) continue;
    const li = document.createElement('li');
    li.dataset.id = c.id;
    if (state.conv && c.id === state.conv.id) li.className = 'active';
    const t = document.createElement('span');
    t.className = 'title';
    t.textContent = c.title;
    t.addEventListener('click', () => openConversation(c));
    li.append(t, iconButton('✎', 'Rename', () => renameInline(li, c)), iconButton('✕', 'Delete', () => removeConversation(c)));
    ul.append(li);
  }
}

function iconButton(text, label, onclick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'icon';
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.title = label;
  b.addEventListener('click', onclick);
  return b;
}

function textButton(text, onclick) {
  const b = iconButton(text, text, onclick);
  b.className = 'icon text';
  return b;
}

function renameInline(li, c) {
  const input = document.createElement('input');
  input.value = c.title;
  input.className = 'rename';
  li.replaceChildren(input);
  input.focus();
  let finished = false;   // Enter, Esc and the blur that follows them: act once
  const done = async save => {
    if (finished) return;
    finished = true;
    if (save && input.value.trim()) {
      c.title = input.value.trim();
      await store.saveConversation(c);
      if (state.conv && state.conv.id === c.id) state.conv.title = c.title;
    }
    refreshList();
  };
  input.addEventListener('keydown', e => {
    if (e.key === 'Enter') done(true);
    if (e.key === 'Escape') done(false);
  });
  input.addEventListener('blur', () => done(true));
}

async function removeConversation(c) {
  await store.deleteConversation(c.id);
  if (state.conv && state.conv.id === c.id) newConversation();
  refreshList();
}

function openConversation(c) {
  if (state.running) return;
  state.conv = c;
  localStorage.setItem('sluice.current', c.id);
  document.body.classList.remove('side-open');
  renderAll();
  refreshList();
}

function newConversation() {
  if (state.running) return;
  state.conv = store.newConversation();
  localStorage.removeItem('sluice.current');
  renderAll();
  refreshList();
  $('input').focus();
}

async function persist() {
  const c = state.conv;
  c.updated = Date.now();
  if (c.title === 'New chat') {
    const first = store.path(c).find(n => n.role === 'user');
    if (first) c.title = first.content.slice(0, 60).replace(/\s+/g, ' ').trim() || 'New chat';
  }
  await store.saveConversation(c);
  localStorage.setItem('sluice.current', c.id);
  refreshList();
}

// ---- messages ----
function renderAll() {
  const box = $('messages');
  box.replaceChildren();
  for (const n of store.path(state.conv)) box.append(messageElement(n));
  updateMeter();
  box.scrollTop = box.scrollHeight;
}

function messageElement(n) {
  const el = document.createElement('div');
  el.className = 'msg ' + n.role;
  el.dataset.id = n.id;
  if (n.reasoning) el.append(reasoningBlock(n.reasoning, false));
  if (n.images && n.images.length) el.append(imageStrip(n.images));
  if (n.audio && n.audio.length) el.append(audioStrip(n.audio));
  const body = document.createElement('div');
  body.className = 'content';
  if (n.role === 'assistant' && !state.textMode) fillMarkdown(body, n.content);
  else body.textContent = n.content;
  el.append(body);
  if (n.tool_calls && n.tool_calls.length) el.append(toolCallsBlock(n.tool_calls));
  el.append(messageFooter(n));
  return el;
}

// A row of a message's attachments: `item(x, i)` makes each element; `remove(i)`, when given,
// adds a button labelled "Remove <noun> i+1" that drops attachment i.
function attachmentStrip(items, className, noun, item, remove) {
  const box = document.createElement('div');
  box.className = className;
  items.forEach((x, i) => {
    const el = item(x, i);
    if (remove) el.append(iconButton('✕', `Remove ${noun} ${i + 1}`, () => remove(i)));
    box.append(el);
  });
  return box;
}

// Thumbnails of a message's images (data: URLs, which the page's CSP allows as img-src).
function imageStrip(urls, remove) {
  return attachmentStrip(urls, 'images', 'image', (url, i) => {
    const fig = document.createElement('span');
    fig.className = 'thumb';
    const img = document.createElement('img');
    img.src = url;
    img.alt = 'attached image ' + (i + 1);
    fig.append(img);
    return fig;
  }, remove);
}

// A message's audio clips as labelled chips (name and length).
function audioStrip(clips, remove) {
  return attachmentStrip(clips, 'images audio', 'audio', (c) => {
    const chip = document.createElement('span');
    chip.className = 'clip';
    chip.textContent = `🎤 ${c.name} (${c.seconds ? c.seconds.toFixed(1) + ' s' : c.format})`;
    return chip;
  }, remove);
}

// The images and clips attached to the message being written.
function renderPending() {
  const box = $('attachments');
  box.hidden = !state.pending.length && !state.pendingAudio.length;
  box.replaceChildren(imageStrip(state.pending, i => {
    state.pending.splice(i, 1);
    renderPending();
  }), audioStrip(state.pendingAudio, i => {
    state.pendingAudio.splice(i, 1);
    renderPending();
  }));
}

function reasoningBlock(text, open) {
  const d = document.createElement('details');
  d.className = 'reasoning';
  d.open = open;
  const s = document.createElement('summary');
  s.textContent = open ? 'Thinking…' : 'Thoughts';
  const p = document.createElement('div');
  p.className = 'reasoning-text';
  p.textContent = text;
  d.append(s, p);
  return d;
}

function toolCallsBlock(calls) {
  const box = document.createElement('div');
  box.className = 'tool-calls';
  for (const c of calls) {
    const item = document.createElement('div');
    item.className = 'tool-call';
    const name = document.createElement('div');
    name.className = 'tool-name';
    name.textContent = '→ tool call: ' + ((c.function && c.function.name) || '?');
    const args = document.createElement('pre');
    let a = (c.function && c.function.arguments) || '';
    try { a = JSON.stringify(JSON.parse(a), null, 2); } catch (_) { /* shown as sent */ }
    args.textContent = a;
    item.append(name, args);
    box.append(item);
  }
  return box;
}

function messageFooter(n) {
  const f = document.createElement('div');
  f.className = 'meta';
  const sibs = store.siblings(state.conv, n);
  if (sibs.length > 1) {
    const i = sibs.findIndex(s => s.id === n.id);
    const nav = document.createElement('span');
    nav.className = 'branch';
    const label = document.createElement('span');
    label.textContent = `${i + 1}/${sibs.length}`;
    nav.append(iconButton('‹', 'Previous branch', () => switchBranch(sibs[i - 1])), label,
               iconButton('›', 'Next branch', () => switchBranch(sibs[i + 1])));
    nav.firstChild.disabled = i === 0;
    nav.lastChild.disabled = i === sibs.length - 1;
    f.append(nav);
  }
  if (n.stats) {
    const s = document.createElement('span');
    s.className = 'stats';
    s.textContent = statsText(n.stats);
    f.append(s);
  }
  if (n.role === 'user') f.append(textButton('Edit', () => editMessage(n)));
  if (n.role === 'assistant') {
    f.append(textButton('Copy', () => copyText(n.content, null)));
    f.append(textButton('Regenerate', () => regenerate(n)));
  }
  return f;
}

function statsText(s) {
  const parts = [`${s.completion_tokens} tokens`];
  if (s.tps) parts.push(`${s.tps.toFixed(1)} t/s`);
  if (s.prompt_tokens !== undefined) parts.push(`prompt ${s.prompt_tokens}`);
  if (s.finish && s.finish !== 'stop') parts.push(s.finish === 'length' ? 'cut at the token limit' : s.finish);
  return parts.join(' · ');
}

function switchBranch(node) {
  if (!node || state.running) return;
  store.selectBranch(state.conv, node);
  renderAll();
  persist();
}

function editMessage(n) {
  if (state.running) return;
  const el = document.querySelector(`.msg[data-id="${n.id}"] .content`);
  const ta = document.createElement('textarea');
  ta.className = 'edit';
  ta.value = n.content;
  const save = document.createElement('button');
  save.className = 'primary';
  save.textContent = 'Send edit';
  save.addEventListener('click', () => {
    const m = store.addNode(state.conv, n.parent, 'user', ta.value);
    if (n.images) m.images = n.images;   // an edit keeps the message's images and clips
    if (n.audio) m.audio = n.audio;
    renderAll();
    generate(m);
  });
  el.replaceChildren(ta, save);
  ta.focus();
}

function regenerate(n) {
  if (state.running) return;
  generate(state.conv.nodes[n.parent]);
}

function updateMeter() {
  const last = store.path(state.conv).filter(n => n.stats).pop();
  const n_ctx = state.props ? state.props.n_ctx : 0;
  const used = last ? (last.stats.prompt_tokens || 0) + last.stats.completion_tokens : 0;
  $('ctx-bar').style.width = n_ctx ? Math.min(100, 100 * used / n_ctx) + '%' : '0';
  $('ctx-text').textContent = n_ctx ? `${used}/${n_ctx}` : '';
}

export {renderAll, renderPending, messageElement, reasoningBlock, toolCallsBlock, statsText, updateMeter, persist,
  refreshList, newConversation, openConversation, loadSettings, showSettings, saveSettings, samplingParams};
