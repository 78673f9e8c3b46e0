// Message text -> safe HTML: math is cut out first (so markdown leaves TeX alone) and
// rendered by KaTeX, markdown by marked with raw HTML shown as text, code highlighted by
// highlight.js (only below a size bound, so a huge block costs bounded time), and the
// result sanitised by DOMPurify before it reaches the page.

/* global marked, DOMPurify, hljs, katex */

const MAX_HIGHLIGHT = 20000;      // characters: longer code blocks are shown plain
const MAX_AUTODETECT = 4000;      // language guessing is slower: only for short blocks

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}

function highlight(code, lang) {
  if (code.length > MAX_HIGHLIGHT || typeof hljs === 'undefined') return escapeHtml(code);
  try {
    if (lang && hljs.getLanguage(lang)) return hljs.highlight(lang, code, true).value;
    if (code.length <= MAX_AUTODETECT) return hljs.highlightAuto(code).value;
  } catch (_) { /* fall through to plain */ }
  return escapeHtml(code);
}

const renderer = new marked.Renderer();
renderer.html = html => escapeHtml(html);   // raw HTML in a reply is text, never markup
renderer.image = (href, title, text) => escapeHtml(text || '');   // no remote images
marked.setOptions({renderer, highlight, gfm: true, breaks: false, headerIds: false, mangle: false});

DOMPurify.addHook('afterSanitizeAttributes', node => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});
const PURIFY = {FORBID_TAGS: ['style', 'img', 'form', 'input', 'iframe', 'object', 'embed'], FORBID_ATTR: ['style']};

// Code spans/blocks pass through untouched; math outside them becomes a placeholder.
const SEGMENTS = /(```[\s\S]*?(?:```|$)|`[^`\n]*`)|(\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$[^$\n]+?\$)/g;

function cutMath(text) {
  const math = [];
  const out = text.replace(SEGMENTS, (m, code, tex) => {
    if (code) return m;
    const display = m.startsWith('$$') || m.startsWith('\\[');
    const body = display || m.startsWith('\\(') ? m.slice(2, -2) : m.slice(1, -1);
    if (!display && /^\s|\s$/.test(body)) return m;   // "$5 and $6" is money, not math
    math.push({body, display});
    return `\u2060MATH${math.length - 1}\u2060`;
  });
  return {out, math};
}

function mathHtml(m) {
  if (typeof katex === 'undefined') return escapeHtml(m.body);
  try {
    return katex.renderToString(m.body, {displayMode: m.display, throwOnError: false, trust: false, output: 'html'});
  } catch (_) {
    return escapeHtml(m.body);
  }
}

export function renderMarkdown(text) {
  const {out, math} = cutMath(text);
  let html = DOMPurify.sanitize(marked.parse(out), PURIFY);
  // KaTeX output (trust: false) is safe markup with inline styles, added after sanitising.
  html = html.replace(/\u2060MATH(\d+)\u2060/g, (_, i) => mathHtml(math[+i]));
  return html;
}

// Puts rendered markdown into `el` and gives each code block a copy button.
export function fillMarkdown(el, text) {
  el.innerHTML = renderMarkdown(text);
  for (const pre of el.querySelectorAll('pre')) {
    const b = document.createElement('button');
    b.className = 'copy';
    b.type = 'button';
    b.textContent = 'Copy';
    b.addEventListener('click', () => copyText(pre.querySelector('code') ? pre.querySelector('code').innerText : pre.innerText, b));
    pre.appendChild(b);
  }
}

export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {   // no clipboard API outside secure contexts: the old way
    const ta = document.createElement('textarea');
    ta.value = text;
    document.body.appendChild(ta);
    ta.select();
    document.execCommand('copy');
    ta.remove();
  }
  if (button) {
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1200);
  }
}

// Calls fn at most once per `ms` while calls keep coming, and once more after the last.
export function throttle(fn, ms) {
  let last = 0, timer = null;
  return () => {
    const wait = last + ms - Date.now();
    if (wait <= 0) {
      last = Date.now();
      fn();
    } else if (!timer) {
      timer = setTimeout(() => { timer = null; last = Date.now(); fn(); }, wait);
    }
  };
}
