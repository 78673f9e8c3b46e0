// Start-up and wiring: the model's /props (asking for the API key when the server wants
// one), the mode (chat, or text completion for a model without a chat template), the
// conversation shown last, and the page's buttons and keys.
import {getProps, HttpError} from './api.js';
import * as store from './store.js';
import * as chat from './chat.js';
import {state} from './state.js';
import * as view from './view.js';
import {fileFormat, startRecording, toBase64} from './record.js';

const $ = id => document.getElementById(id);
view.init(chat.generate);

function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}

function setMode(text, remember) {
  state.textMode = text;
  document.body.classList.toggle('text-mode', text);
  $('mode-text').checked = text;
  $('input').placeholder = text ? 'Text for the model to continue (Enter sends, Shift+Enter new line, Esc stops)'
    : 'Message (Enter sends, Shift+Enter new line, Esc stops)';
  if (remember) localStorage.setItem('sluice.mode.' + state.props.model, text ? 'text' : 'chat');
  view.renderAll();
}

function applyProps(p) {
  state.props = p;
  $('model-name').textContent = p.model;
  document.title = p.model + ' · sluice';
  const base = !p.chat_template.in_file;
  const banner = $('banner');
  banner.hidden = !base;
  banner.textContent = base ? `${p.model} has no chat template: it is a base (pre-trained) model that continues ` +
    'text rather than answering turns, so the page opened in text-completion mode. Untick "text mode" to chat anyway.' : '';
  $('attach-label').hidden = !(p.modalities && p.modalities.vision);
  const hears = !!(p.modalities && p.modalities.audio);
  $('audio-label').hidden = !hears;
  $('record').hidden = !hears || !(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
  const saved = localStorage.getItem('sluice.mode.' + p.model);
  setMode(saved ? saved === 'text' : base, false);
}

async function loadProps() {
  try {
    applyProps(await getProps());
  } catch (e) {
    if (e instanceof HttpError && e.status === 401) chat.askKey(loadProps);
    else {
      $('banner').hidden = false;
      $('banner').textContent = 'Could not read the model\'s properties: ' + e.message;
    }
  }
}

async function restoreConversation() {
  const id = localStorage.getItem('sluice.current');
  let all = [];
  try {
    all = await store.listConversations();
  } catch (e) {   // private mode or a broken store: the page still works, without history
    $('banner').hidden = false;
    $('banner').textContent = 'Conversations cannot be kept in this browser: ' + e;
  }
  state.conv = all.find(c => c.id === id) || store.newConversation();
  view.renderAll();
  view.refreshList();
}

function download(name, text) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type: 'application/json'}));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

async function importFile(file) {
  try {
    const n = await store.importAll(JSON.parse(await file.text()));
    view.refreshList();
    $('banner').hidden = false;
    $('banner').textContent = `Imported ${n} conversation${n === 1 ? '' : 's'}.`;
  } catch (e) {
    $('banner').hidden = false;
    $('banner').textContent = 'Import failed: ' + e.message;
  }
}

// Image files (picked or pasted) read as data: URLs into the message being written. Only when
// the model takes images (/props modalities.vision).
async function attach(files) {
  if (!state.props || !state.props.modalities || !state.props.modalities.vision) return;
  for (const f of files) {
    if (!/^image\/(png|jpeg|webp|gif)$/.test(f.type)) continue;
    state.pending.push(await new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.readAsDataURL(f);
    }));
  }
  view.renderPending();
}

// Audio files (WAV, MP3, FLAC, Ogg) read as base64 clips into the message being written.
async function attachAudio(files) {
  for (const f of files) {
    const format = fileFormat(f);
    if (!format) continue;
    const data = toBase64(new Uint8Array(await f.arrayBuffer()));
    state.pendingAudio.push({data, format, name: f.name});
  }
  view.renderPending();
}

// Record toggles: the first click starts the microphone, the second stops it and attaches the WAV.
let recording = null;
async function toggleRecording() {
  const b = $('record');
  if (recording) {
    const r = recording;
    recording = null;
    b.textContent = 'Record';
    b.classList.remove('recording');
    state.pendingAudio.push(await r.stop());
    view.renderPending();
    return;
  }
  try {
    recording = await startRecording();
    b.textContent = 'Stop recording';
    b.classList.add('recording');
  } catch (e) {
    $('banner').hidden = false;
    $('banner').textContent = 'Cannot record: ' + e.message;
  }
}

function wire() {
  $('attach-audio').addEventListener('change', e => { attachAudio([...e.target.files]); e.target.value = ''; });
  $('record').addEventListener('click', toggleRecording);
  $('attach').addEventListener('change', e => { attach([...e.target.files]); e.target.value = ''; });
  $('input').addEventListener('paste', e => {
    const files = [...(e.clipboardData ? e.clipboardData.files : [])].filter(f => f.type.startsWith('image/'));
    if (files.length) {
      e.preventDefault();
      attach(files);
    }
  });
  $('composer').addEventListener('submit', e => {
    e.preventDefault();
    const text = $('input').value;
    if ((!text.trim() && !state.pending.length && !state.pendingAudio.length) || state.running) return;
    $('input').value = '';
    chat.send(text);
  });
  $('input').addEventListener('keydown', e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  document.addEventListener('keydown', e => { if (e.key === 'Escape' && state.running) chat.stop(); });
  $('stop').addEventListener('click', chat.stop);
  $('new-chat').addEventListener('click', view.newConversation);
  $('search').addEventListener('input', e => { state.filter = e.target.value; view.refreshList(); });
  $('export').addEventListener('click', async () =>
    download('sluice-chats.json', JSON.stringify(await store.exportAll(), null, 1)));
  $('import').addEventListener('change', e => { if (e.target.files[0]) importFile(e.target.files[0]); e.target.value = ''; });
  $('mode-text').addEventListener('change', e => setMode(e.target.checked, true));
  $('open-settings').addEventListener('click', view.showSettings);
  $('settings').addEventListener('close', () => {
    const v = $('settings').returnValue;
    if (v === 'ok' || v === 'reset') view.saveSettings(v === 'reset');
  });
  $('theme').addEventListener('click', () => {
    const dark = document.documentElement.dataset.theme ? document.documentElement.dataset.theme === 'dark'
      : matchMedia('(prefers-color-scheme: dark)').matches;
    const t = dark ? 'light' : 'dark';
    localStorage.setItem('sluice.theme', t);
    applyTheme(t);
  });
  $('open-side').addEventListener('click', () => document.body.classList.add('side-open'));
  $('close-side').addEventListener('click', () => document.body.classList.remove('side-open'));
}

applyTheme(localStorage.getItem('sluice.theme'));
view.loadSettings();
wire();
await restoreConversation();
await loadProps();
document.body.dataset.ready = '1';
