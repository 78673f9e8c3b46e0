// Conversations kept in IndexedDB. A conversation is a tree of messages (edits and
// regenerations are siblings under one parent) and a `leaf`: the branch on screen is the
// path from the root to the leaf.
//   {id, title, updated, leaf, nodes: {id: {id, parent, role, content, reasoning,
//    tool_calls, stats, time}}}

const DB = 'sluice', STORE = 'conversations';
let dbp = null;

const OPEN_TIMEOUT_MS = 5000;

// A page left for another (or kept in the back/forward cache) must not hold the database:
// a newer page's open would wait on it. Its connection closes on pagehide and reopens on use.
function db() {
  if (!dbp) {
    dbp = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB, 1);
      const timer = setTimeout(() => reject(new Error('IndexedDB did not open (another tab holds it?)')), OPEN_TIMEOUT_MS);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE, {keyPath: 'id'});
      req.onsuccess = () => {
        clearTimeout(timer);
        const d = req.result;
        d.onversionchange = () => { d.close(); dbp = null; };
        resolve(d);
      };
      req.onerror = () => { clearTimeout(timer); reject(req.error); };
    });
    dbp.catch(() => { dbp = null; });
  }
  return dbp;
}

addEventListener('pagehide', () => {
  if (dbp) dbp.then(d => d.close(), () => {});
  dbp = null;
});

async function tx(mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const t = d.transaction(STORE, mode);
    const req = fn(t.objectStore(STORE));
    t.oncomplete = () => resolve(req && req.result);
    t.onerror = () => reject(t.error);
  });
}

export const listConversations = async () =>
  (await tx('readonly', s => s.getAll())).sort((a, b) => b.updated - a.updated);
export const saveConversation = c => tx('readwrite', s => s.put(c));
export const deleteConversation = id => tx('readwrite', s => s.delete(id));

export function newId() {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
}

export function newConversation() {
  return {id: newId(), title: 'New chat', updated: Date.now(), leaf: null, nodes: {}};
}

// Messages from the root to the leaf.
export function path(c) {
  const out = [];
  for (let id = c.leaf; id; id = c.nodes[id] && c.nodes[id].parent) out.unshift(c.nodes[id]);
  return out;
}

export function addNode(c, parent, role, content) {
  const n = {id: newId(), parent, role, content, reasoning: '', time: Date.now()};
  c.nodes[n.id] = n;
  c.leaf = n.id;
  return n;
}

export function siblings(c, node) {
  return Object.values(c.nodes).filter(n => n.parent === node.parent && n.role === node.role)
    .sort((a, b) => a.time - b.time);
}

// Shows `node`'s branch: the leaf becomes its newest descendant.
export function selectBranch(c, node) {
  let cur = node;
  for (;;) {
    const kids = Object.values(c.nodes).filter(n => n.parent === cur.id).sort((a, b) => b.time - a.time);
    if (!kids.length) break;
    cur = kids[0];
  }
  c.leaf = cur.id;
}

// The whole store as one JSON document, and back.
export async function exportAll() {
  return {format: 'sluice-chat', version: 1, conversations: await listConversations()};
}

export async function importAll(doc) {
  if (!doc || doc.format !== 'sluice-chat' || !Array.isArray(doc.conversations))
    throw new Error('not a sluice chat export (expected {"format": "sluice-chat", "conversations": [...]})');
  for (const c of doc.conversations) {
    if (typeof c.id !== 'string' || typeof c.nodes !== 'object' || c.nodes === null)
      throw new Error('a conversation in the file has no id or nodes');
    for (const n of Object.values(c.nodes))
      if (typeof n.content !== 'string' || !['system', 'user', 'assistant', 'tool'].includes(n.role))
        throw new Error('a message in the file has no text or an unknown role');
  }
  for (const c of doc.conversations) await saveConversation(c);
  return doc.conversations.length;
}
