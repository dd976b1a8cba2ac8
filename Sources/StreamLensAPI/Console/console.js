// StreamLens console: source tiles (WebRTC, MJPEG fallback), live stage controls, key bindings
// and the event feed. Vanilla ES2020, no dependencies; talks to the same-origin HTTP API
// (docs/http-api.md). Nothing here throws uncaught: every request goes through api(), which
// turns failures into {ok:false, error}.

const POLL_MS = 2000;            // /api/sources and the selected source's stages
const THROTTLE_MS = 150;         // slider PATCHes while dragging
const FAIL_GRACE_MS = 5000;      // WebRTC failed/disconnected this long -> MJPEG
const CONNECT_TIMEOUT_MS = 15000; // WebRTC answered but never connected -> MJPEG
const RETRY_MIN_MS = 5000, RETRY_MAX_MS = 60000; // WebRTC retries from MJPEG (doubling)
const EDIT_HOLD_MS = 1500;       // a control the user just changed is not overwritten by polls
const MAX_EVENTS = 200;
const LOGIN_PAGE = '/console/login.html';

const $ = (sel, root = document) => root.querySelector(sel);
const enc = encodeURIComponent;
const sourcePath = name => `/api/sources/${enc(name)}`;
const isNum = v => typeof v === 'number' && Number.isFinite(v);

/** Creates an element: attributes (on* = listeners, text = textContent), then children. */
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) if (c != null && c !== false) e.append(c);
  return e;
}

// ---------------------------------------------------------------------------------------------
// HTTP
let leaving = false; // set once we go to the login page: no more requests, no more messages

/** fetch + JSON; never throws. Returns {ok, status, data, error, property}. */
async function api(method, path, body) {
  if (leaving) return { ok: false, status: 0, error: 'logging in' };
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  let r, text = '';
  try { r = await fetch(path, init); text = await r.text(); } catch (e) {
    return { ok: false, status: 0, error: `${method} ${path}: ${e && e.message || 'network error'}` };
  }
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (r.status === 401 && !leaving) { leaving = true; location.assign(LOGIN_PAGE); } // no/stale cookie
  if (!r.ok) {
    const error = (data && typeof data === 'object' && data.error) || `${r.status} ${r.statusText || 'error'}`;
    return { ok: false, status: r.status, data, error, property: data && data.property };
  }
  return { ok: true, status: r.status, data };
}

/** A setTimeout chain that never overlaps itself and sleeps while the page is hidden.
 *  Returns a function that polls now (or right after the poll in progress). */
function poller(fn, ms) {
  let timer = 0, running = false, again = false;
  async function run() {
    clearTimeout(timer); timer = 0;
    if (running) { again = true; return; }
    if (document.hidden || leaving) return; // visibilitychange restarts it
    running = true;
    try { await fn(); } catch (e) { console.warn('StreamLens console:', e); }
    running = false;
    if (again) { again = false; run(); return; }
    if (!document.hidden) timer = setTimeout(run, ms);
  }
  document.addEventListener('visibilitychange', () => { if (!document.hidden && !timer && !running) run(); });
  return run;
}

// ---------------------------------------------------------------------------------------------
// Status line: a summary (sources, events, the last poll error), or a transient message.
const status = { pollError: '', eventsLive: false, until: 0, timer: 0 };

function refreshStatus() {
  if (Date.now() < status.until) return;
  const line = $('#status');
  const n = tiles.size;
  line.dataset.kind = status.pollError ? 'error' : 'info';
  line.textContent = status.pollError ||
    `${n} source${n === 1 ? '' : 's'} · events ${status.eventsLive ? 'live' : 'offline'}`;
}

/** Shows a message for `ms`, then the summary again. kind: info | ok | error. */
function say(text, kind = 'info', ms = 4000) {
  const line = $('#status');
  line.textContent = text; line.dataset.kind = kind;
  status.until = Date.now() + ms;
  clearTimeout(status.timer);
  status.timer = setTimeout(() => { status.until = 0; refreshStatus(); }, ms);
}

// ---------------------------------------------------------------------------------------------
// Live video: WHEP (WebRTC) with an MJPEG fallback.
class Live {
  constructor(tile) {
    // session: the WHEP session's URL (DELETE ends it); timers: connect, grace, retry
    Object.assign(this, { tile, pc: null, session: null, timers: {}, retryMs: RETRY_MIN_MS, closed: false });
    this.start();
  }
  async start() {
    if (this.closed) return;
    if (typeof RTCPeerConnection !== 'function') { this.fallback('no WebRTC in this browser'); return; }
    let pc;
    try {
      pc = this.pc = new RTCPeerConnection();
      pc.addTransceiver('video', { direction: 'recvonly' });
      // The stream is attached now, shown (and MJPEG stopped) once the connection is up.
      pc.ontrack = e => { this.tile.video.srcObject = e.streams[0] || new MediaStream([e.track]); };
      pc.onconnectionstatechange = () => this.watch(pc);
      if (pc.connectionState === undefined) pc.oniceconnectionstatechange = () => this.watch(pc);
      await pc.setLocalDescription(await pc.createOffer());
      // No wait for ICE gathering: the server does not need the browser's candidates.
      const r = await fetch(`${sourcePath(this.tile.name)}/whep`, {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp,
      });
      const where = r.headers.get('Location');
      const session = where ? new URL(where, location.href).href : null;
      if (pc !== this.pc) { // closed (tile removed, page left) while we waited
        if (r.status === 201 && session) endSession(session);
        return;
      }
      if (r.status !== 201) { this.fallback(`WebRTC: HTTP ${r.status}`); return; }
      this.session = session;
      await pc.setRemoteDescription({ type: 'answer', sdp: await r.text() });
      this.timers.connect = setTimeout(() => {
        if (pc === this.pc && !isUp(pc)) this.fallback('WebRTC did not connect');
      }, CONNECT_TIMEOUT_MS);
    } catch (e) {
      // (pc undefined: the constructor threw, e.g. WebRTC disabled)
      if (!pc || pc === this.pc) this.fallback(`WebRTC: ${e && e.message || e}`);
    }
  }
  /** connected: show the video; failed/disconnected for FAIL_GRACE_MS: fall back. */
  watch(pc) {
    if (pc !== this.pc) return;
    const s = stateOf(pc);
    if (isUp(pc)) {
      clearTimeout(this.timers.connect);
      clearTimeout(this.timers.grace);
      this.timers.grace = 0;
      this.retryMs = RETRY_MIN_MS;
      this.tile.showVideo();
    } else if ((s === 'failed' || s === 'disconnected') && !this.timers.grace) {
      this.timers.grace = setTimeout(() => {
        this.timers.grace = 0;
        if (pc === this.pc && !isUp(pc)) this.fallback(`WebRTC ${stateOf(pc)}`);
      }, FAIL_GRACE_MS);
    }
  }
  fallback(reason) {
    this.teardown();
    if (this.closed) return;
    this.tile.showMjpeg(reason);
    this.timers.retry = setTimeout(() => this.start(), this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }
  teardown(endOnServer = true) {
    for (const t of Object.values(this.timers)) clearTimeout(t);
    this.timers = {};
    const pc = this.pc;
    this.pc = null;
    if (pc) {
      pc.ontrack = pc.onconnectionstatechange = pc.oniceconnectionstatechange = null;
      try { pc.close(); } catch { /* already closed */ }
    }
    if (this.session && endOnServer) endSession(this.session);
    this.session = null;
  }
  // Tile removed, page left. A source that is gone took its sessions with it: nothing to end.
  close(endOnServer = true) { this.closed = true; this.teardown(endOnServer); }
  resume() { if (this.closed) { this.closed = false; this.start(); } }
}

const stateOf = pc => pc.connectionState ?? pc.iceConnectionState; // older browsers: ICE's
const isUp = pc => ['connected', 'completed'].includes(stateOf(pc));

/** Ends a WHEP session; keepalive lets it go out while the page unloads. */
function endSession(url) {
  fetch(url, { method: 'DELETE', credentials: 'same-origin', keepalive: true }).catch(() => {});
}

// ---------------------------------------------------------------------------------------------
// Tiles
const tiles = new Map(); // source name -> Tile
let selected = null;     // the selected source's name

class Tile {
  constructor(name) {
    this.name = name;
    this.mjpeg = null;
    this.video = h('video', { autoplay: true, muted: true, playsinline: true, hidden: true });
    this.video.muted = true; // the property, not only the attribute, lets autoplay happen
    this.placeholder = h('div', { class: 'placeholder', text: 'connecting…' });
    const fig = (cls, label) => h('span', { class: 'fig' }, `${label} `, h('b', { class: cls, text: '–' }));
    this.el = h('section', { class: 'tile', 'data-source': name, onclick: () => select(name) },
      h('div', { class: 'view' }, this.video, this.placeholder),
      h('div', { class: 'caption' },
        h('span', { class: 'name', text: name, title: name }),
        this.state = h('span', { class: 'state', text: '' }),
        h('button', { type: 'button', class: 'remove', title: `remove ${name}`, text: 'Remove',
          onclick: e => { e.stopPropagation(); removeSource(name); } })),
      h('div', { class: 'figures' },
        fig('fps', 'fps'), fig('latency', 'latency'), fig('drops', 'drops'),
        this.zonesFig = h('span', { class: 'fig', hidden: true }, 'zones ', this.zones = h('b', { class: 'zones' }))),
      this.error = h('div', { class: 'tile-error', hidden: true }));
    this.figs = { fps: $('.fps', this.el), latency: $('.latency', this.el), drops: $('.drops', this.el) };
    this.live = new Live(this);
  }
  update(src) {
    this.el.dataset.state = src.state || '';
    this.state.textContent = src.state || '?';
    this.figs.fps.textContent = isNum(src.fps) ? src.fps.toFixed(1) : '–';
    this.figs.drops.textContent = isNum(src.drops) ? String(src.drops) : '–';
    const ms = src.latency_ms;
    this.figs.latency.textContent = isNum(ms) ? `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms` : '–';
    this.error.hidden = !src.error;
    this.error.textContent = src.error || '';
  }
  setZones(text) { this.zonesFig.hidden = !text; this.zones.textContent = text || ''; }
  showVideo(stream) {
    if (stream && this.video.srcObject !== stream) this.video.srcObject = stream;
    if (!this.video.srcObject) return;
    this.video.hidden = false;
    this.placeholder.hidden = true;
    this.stopMjpeg();
    const p = this.video.play();
    if (p) p.catch(() => {}); // autoplay refusals are not errors here (muted video plays)
  }
  showMjpeg(reason) {
    this.video.hidden = true;
    this.video.srcObject = null;
    if (this.mjpeg) return; // keep the running stream
    const img = this.mjpeg = h('img', { class: 'mjpeg', alt: `${this.name} (MJPEG)`, title: reason });
    img.onerror = () => { // no MJPEG either: say so, try again at the next fallback
      this.stopMjpeg();
      this.placeholder.hidden = false;
      this.placeholder.textContent = `no video (${reason})`;
    };
    img.src = `${sourcePath(this.name)}/mjpeg?fps=10`;
    this.placeholder.hidden = true;
    $('.view', this.el).append(img);
  }
  stopMjpeg() {
    if (!this.mjpeg) return;
    this.mjpeg.onerror = null;
    this.mjpeg.removeAttribute('src'); // ends the multipart stream
    this.mjpeg.remove();
    this.mjpeg = null;
  }
  destroy() {
    this.live.close(false); // called when the source is no longer listed
    this.stopMjpeg();
    this.video.srcObject = null;
    this.el.remove();
  }
}

function syncTiles(list) {
  const names = new Set(list.map(s => s.name));
  for (const [name, tile] of tiles) if (!names.has(name)) { tile.destroy(); tiles.delete(name); }
  const grid = $('#grid');
  for (const src of list) {
    let tile = tiles.get(src.name);
    if (!tile) { tile = new Tile(src.name); tiles.set(src.name, tile); grid.append(tile.el); }
    tile.update(src);
  }
  $('#empty').hidden = list.length > 0;
}

function select(name) {
  if (name === selected) return;
  selected = name;
  for (const [n, tile] of tiles) tile.el.classList.toggle('selected', n === name);
  panel.reset(name);
  pollStagesNow();
}

let zoneCursor = 0; // round-robin over the other sources, for their tiles' zone counts

async function pollSources() {
  const r = await api('GET', '/api/sources');
  if (!r.ok) { status.pollError = `sources: ${r.error}`; refreshStatus(); return; }
  status.pollError = '';
  const list = Array.isArray(r.data) ? r.data.filter(s => s && typeof s.name === 'string') : [];
  for (const name of removing) if (!list.some(s => s.name === name)) removing.delete(name);
  syncTiles(list);
  if (!selected || !tiles.has(selected)) select(list.length ? list[0].name : null);
  const current = list.find(s => s.name === selected);
  if (current) panel.title(current);
  refreshStatus();
  // One other source's stages per round, so every tile's zone counts stay fresh.
  const others = list.filter(s => s.name !== selected && !removing.has(s.name));
  if (others.length) {
    const other = others[zoneCursor++ % others.length];
    const st = await api('GET', `${sourcePath(other.name)}/stages`);
    const tile = tiles.get(other.name);
    if (st.ok && tile && Array.isArray(st.data)) tile.setZones(zoneText(st.data));
  }
}

// Sources whose removal the page asked for: not asked about again (a request for a source
// removed meanwhile is a 404 the browser logs as an error), until the list no longer has them.
const removing = new Set();

async function removeSource(name) {
  removing.add(name);
  const r = await api('DELETE', sourcePath(name));
  if (r.ok) { say(`removed ${name}`, 'ok'); pollSourcesNow(); }
  else { removing.delete(name); say(`remove ${name}: ${r.error}`, 'error', 8000); }
}

async function addSource(e) {
  e.preventDefault();
  const form = e.currentTarget;
  const name = form.elements.namedItem('name').value.trim();
  const uri = form.elements.namedItem('uri').value.trim();
  const error = $('#add-error'), button = $('button', form);
  if (!name || !uri) return;
  error.textContent = '';
  button.disabled = true;
  say(`adding ${name}…`, 'info', 30000); // answered once the source plays
  const r = await api('POST', '/api/sources', { name, uri });
  button.disabled = false;
  if (r.ok) { form.reset(); say(`added ${name}`, 'ok'); pollSourcesNow(); return; }
  error.textContent = r.error; // e.g. the 409 of `streamlens run`: it says why
  say(`add ${name}: ${r.error}`, 'error', 8000);
}

// ---------------------------------------------------------------------------------------------
// Readings: lenszone's "counts" is a JSON text, per zone an object of counters.
/** {"door":{"in":3,"out":1}} -> "door in 3 out 1"; plain strings as they are. */
function readingText(value) {
  let v = value;
  try { if (typeof v === 'string') v = JSON.parse(v); } catch { return value; }
  if (!v || typeof v !== 'object') return String(value);
  return Object.entries(v).map(([k, x]) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? `${k} ${Object.entries(x).map(([a, b]) => `${a} ${b}`).join(' ')}`
      : `${k} ${x}`).join(' · ');
}

const propOf = (stage, name) => (stage.properties || []).find(p => p.name === name);
const liveProps = stage => (stage.properties || []).filter(p => p.live && !p.readonly);

/** The zone counts of a source's lenszone stages (readings.counts, or the older read-only
 *  "counts" property). */
function zoneText(stages) {
  return stages.filter(s => s.factory === 'lenszone').map(s => {
    const counts = (s.readings && s.readings.counts) ?? (propOf(s, 'counts') || {}).value;
    return counts ? readingText(counts) : '';
  }).filter(Boolean).join(' · ');
}

/** The manifests of a lensstylize stage's `styles` property. */
function stylesOf(stage) {
  const p = propOf(stage, 'styles');
  return p && typeof p.value === 'string' ? p.value.split(',').map(s => s.trim()).filter(Boolean) : [];
}

const baseName = path => path.split('/').pop().replace(/\.json$/, '');

// ---------------------------------------------------------------------------------------------
// The side panel: controls for the selected source's stages.
let dragging = null; // the slider under the pointer
addEventListener('pointerup', () => { dragging = null; });
addEventListener('pointercancel', () => { dragging = null; });

/** Text fields and selects (focus there means typing: keys are not sent, values not replaced). */
function isTextField(e) {
  if (!e || !e.tagName) return false;
  if (e.isContentEditable || e.tagName === 'TEXTAREA' || e.tagName === 'SELECT') return true;
  return e.tagName === 'INPUT' &&
    !['range', 'checkbox', 'radio', 'button', 'submit', 'reset', 'color', 'file', 'image'].includes(e.type);
}

/** Whether the user holds the control (dragged, just changed, typing): polls leave it alone. */
const userHolds = c => c === dragging || Date.now() - (c._editedAt || 0) < EDIT_HOLD_MS ||
  (document.activeElement === c && isTextField(c));

const panel = {
  source: null,    // whose stages are shown
  signature: '',   // the shape of what is built; a new shape rebuilds the controls
  controls: new Map(), // "stage\0property" -> the control element
  styleImgs: new Map(), // stage name -> its style thumbnails
  reset(name) {
    this.source = name;
    this.signature = '';
    this.controls.clear();
    this.styleImgs.clear();
    $('#stages').replaceChildren();
    $('#panel-error').hidden = true;
    $('#panel-title').textContent = name || 'No source selected';
  },
  title(src) { $('#panel-title').textContent = `${src.name} · ${src.state}`; },
  render(stages) {
    const sig = JSON.stringify(stages.map(s => [s.name, s.factory,
      liveProps(s).map(p => [p.name, p.type, p.minimum, p.maximum, p.choices]),
      (s.keys || []).map(k => [k.key, k.help]), s.factory === 'lensstylize' ? stylesOf(s) : []]));
    if (sig !== this.signature) {
      // Never pull a control from under the user: rebuild at a later poll.
      if ([...this.controls.values()].some(userHolds)) return;
      this.build(stages);
      this.signature = sig;
    }
    for (const s of stages) this.update(s);
    const tile = tiles.get(this.source);
    if (tile) tile.setZones(zoneText(stages));
  },
  build(stages) {
    this.controls.clear();
    this.styleImgs.clear();
    const fieldsets = stages.map(stage => {
      const props = liveProps(stage).map(p => this.control(stage, p));
      const keys = (stage.keys || []).filter(k => k && k.key);
      return h('fieldset', { class: 'stage', 'data-name': stage.name, 'data-factory': stage.factory || '' },
        h('legend', {}, stage.name, h('small', { text: stage.factory || '' })),
        stage.factory === 'lensstylize' ? this.styles(stage) : null,
        props,
        props.length ? null : h('p', { class: 'none', text: 'no live properties' }),
        h('p', { class: 'readings', hidden: true }),
        keys.length ? h('p', { class: 'keys' }, 'Keys: ',
          keys.map((k, i) => [i ? ' · ' : '', h('kbd', { text: k.key }), ` ${k.help || ''}`])) : null);
    });
    $('#stages').replaceChildren(...fieldsets);
  },
  /** One row: label, the control (data-stage, data-property), the value, an error line. */
  control(stage, p) {
    const data = { 'data-stage': stage.name, 'data-property': p.name };
    const id = `c-${stage.name}-${p.name}`.replace(/[^\w-]/g, '_');
    let c, out = null;
    if ((p.type === 'number' || p.type === 'integer') && isNum(p.minimum) && isNum(p.maximum)) {
      const span = p.maximum - p.minimum;
      const step = p.type === 'integer' ? 1 : span <= 1 ? 0.01 : span / 100;
      c = h('input', { ...data, id, type: 'range', min: p.minimum, max: p.maximum, step });
      out = h('output', { class: 'value', for: id });
    } else if (Array.isArray(p.choices) && p.choices.length) {
      c = h('select', { ...data, id }, p.choices.map(v => h('option', { value: v, text: v })));
    } else if (p.type === 'boolean') {
      c = h('input', { ...data, id, type: 'checkbox' });
    } else if (p.type === 'number' || p.type === 'integer') {
      c = h('input', { ...data, id, type: 'number', step: p.type === 'integer' ? 1 : 'any',
        min: p.minimum, max: p.maximum });
    } else {
      c = h('input', { ...data, id, type: 'text', spellcheck: 'false' });
    }
    const row = h('div', { class: 'prop', title: p.help || '' },
      h('label', { for: id, text: p.name }), c, out || h('span'),
      h('div', { class: 'control-error', role: 'alert' }));
    Object.assign(c, { _type: p.type, _out: out, _row: row, _server: p.value }); // _server: last known value
    this.controls.set(`${stage.name}\0${p.name}`, c);
    this.set(c, p.value);
    const sender = patcher(this.source, stage.name, p.name, c);
    if (c.type === 'range') {
      c.addEventListener('pointerdown', () => { dragging = c; });
      c.addEventListener('input', () => { c._editedAt = Date.now(); this.show(c); sender.soon(); });
      c.addEventListener('change', () => { c._editedAt = Date.now(); sender.now(); });
    } else if (c.type === 'text' || c.type === 'number') {
      // Apply on Enter or change (blur); the same value is not sent twice.
      const apply = () => {
        if (c.value !== c._pending && c.value !== String(c._server ?? '')) { c._editedAt = Date.now(); sender.now(); }
      };
      c.addEventListener('keydown', e => { if (e.key === 'Enter') apply(); });
      c.addEventListener('change', apply);
    } else {
      c.addEventListener('change', () => { c._editedAt = Date.now(); sender.now(); });
    }
    return row;
  },
  /** A lensstylize stage's styles as thumbnails; a click PATCHes {"model": manifest}. */
  styles(stage) {
    const imgs = stylesOf(stage).map((path, i) => {
      const img = h('img', { class: 'style', 'data-stage': stage.name, 'data-style-index': i,
        title: path, alt: baseName(path), width: 96, height: 72, loading: 'lazy' });
      img.onerror = () => { img.onerror = null; img.src = textPicture(baseName(path)); };
      img.src = `${sourcePath(this.source)}/stages/${enc(stage.name)}/styles/${i}`;
      img._path = path;
      img.addEventListener('click', async () => {
        const source = this.source;
        say(`${stage.name}: model ${path}…`);
        const r = await api('PATCH', `${sourcePath(source)}/stages/${enc(stage.name)}`, { model: path });
        if (source !== this.source) return;
        if (r.ok) { say(`${stage.name}: model ${path}`, 'ok'); if (r.data && r.data.properties) this.update(r.data); }
        else say(`${stage.name}: model ${path}: ${r.error}`, 'error', 8000);
      });
      return img;
    });
    this.styleImgs.set(stage.name, imgs);
    return imgs.length ? h('div', { class: 'styles' }, imgs) : null;
  },
  /** New values for a stage's controls (skipping those the user holds), readings, styles. */
  update(stage) {
    for (const p of liveProps(stage)) {
      const c = this.controls.get(`${stage.name}\0${p.name}`);
      if (!c) continue;
      c._server = p.value;
      if (!userHolds(c)) this.set(c, p.value);
    }
    const model = (propOf(stage, 'model') || {}).value;
    for (const img of this.styleImgs.get(stage.name) || []) {
      img.classList.toggle('current', typeof model === 'string' &&
        (img._path === model || baseName(img._path) === baseName(model)));
    }
    const fs = [...$('#stages').children].find(f => f.dataset.name === stage.name);
    const readings = fs && $('.readings', fs);
    if (readings) {
      const entries = Object.entries(stage.readings || {}).filter(([, v]) => v != null && v !== '');
      readings.hidden = !entries.length;
      readings.replaceChildren(...entries.map(([k, v], i) =>
        [i ? ' · ' : '', h('b', { text: k }), `: ${readingText(v)}`]).flat());
    }
  },
  set(c, v) {
    if (c.type === 'checkbox') c.checked = v === true || v === 'true';
    else if (c.tagName === 'SELECT' && v != null && ![...c.options].some(o => o.value === String(v))) {
      c.append(h('option', { value: String(v), text: String(v) })); // a value outside the choices
      c.value = String(v);
    } else c.value = v == null ? '' : String(v);
    this.show(c);
  },
  show(c) { if (c._out) c._out.textContent = formatValue(c.value, c._type); },
};

function formatValue(v, type) {
  const n = Number(v);
  if (v === '' || !Number.isFinite(n)) return String(v);
  return type === 'integer' ? String(Math.round(n)) : String(Number(n.toFixed(3)));
}

/** The control's value as JSON: numbers, booleans, strings. undefined when not a number. */
function readValue(c) {
  if (c.type === 'checkbox') return c.checked;
  if (c.tagName === 'SELECT' || (c._type !== 'number' && c._type !== 'integer')) return c.value;
  const n = c._type === 'integer' ? Math.round(Number(c.value)) : Number(c.value);
  return c.value.trim() === '' || !Number.isFinite(n) ? undefined : n;
}

/** PATCHes one property: never two requests at once for a control (the newest value waits,
 *  older queued values are dropped), soon() at most every THROTTLE_MS, now() at once. */
function patcher(source, stage, prop, c) {
  let inflight = false, queued = false, timer = 0, last = 0;
  const url = `${sourcePath(source)}/stages/${enc(stage)}`;
  const errorLine = () => $('.control-error', c._row);
  async function send() {
    if (inflight) { queued = true; return; }
    const value = readValue(c);
    if (value === undefined) { errorLine().textContent = `${prop}: not a number`; return; }
    inflight = true; last = Date.now(); c._pending = c.value;
    const r = await api('PATCH', url, { [prop]: value });
    inflight = false; c._pending = undefined;
    if (panel.source !== source) return; // another source is shown now
    if (r.ok) {
      errorLine().textContent = '';
      c._row.classList.remove('refused');
      if (r.data && r.data.properties) panel.update(r.data);
    } else {
      // Refused (422) or failed: say why next to the control and put it back.
      errorLine().textContent = r.error;
      c._row.classList.add('refused');
      if (!queued && c !== dragging) { c._editedAt = 0; panel.set(c, c._server); }
    }
    if (queued) { queued = false; send(); }
  }

  return {
    soon() {
      if (timer) return;
      const wait = THROTTLE_MS - (Date.now() - last);
      if (wait <= 0) send();
      else timer = setTimeout(() => { timer = 0; send(); }, wait);
    },
    now() { clearTimeout(timer); timer = 0; send(); },
  };
}

/** A picture with a word on it (a style without a picture), as an inline SVG: no request. */
function textPicture(text) {
  const safe = text.replace(/[<>&"']/g, ch => `&#${ch.charCodeAt(0)};`);
  return 'data:image/svg+xml,' + enc(`<svg xmlns="http://www.w3.org/2000/svg" width="96" height="72">` +
    `<rect width="96" height="72" fill="#1f242c"/><text x="48" y="40" font-family="sans-serif" ` +
    `font-size="11" fill="#8b95a3" text-anchor="middle">${safe}</text></svg>`);
}

async function pollStages() {
  const name = selected;
  if (!name || removing.has(name)) return;
  const r = await api('GET', `${sourcePath(name)}/stages`);
  if (name !== selected) return;
  const error = $('#panel-error');
  if (!r.ok) { error.hidden = false; error.textContent = `stages: ${r.error}`; return; }
  error.hidden = true;
  panel.render(Array.isArray(r.data) ? r.data : []);
}

// ---------------------------------------------------------------------------------------------
// Key bindings: every key press (outside text fields) goes to the selected source.
let keyQueue = Promise.resolve(), keysWaiting = 0;

function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing || !selected) return;
  if (isTextField(e.target)) return;
  const key = e.key === ' ' ? 'space' : e.key;
  if (!key || (key.length !== 1 && key !== 'space')) return; // Shift, Tab, arrows…: not bindings
  if (key === 'space') e.preventDefault(); // no scrolling, no checkbox toggling
  if (keysWaiting > 8) return; // a held key: don't pile up requests
  keysWaiting++;
  const source = selected;
  keyQueue = keyQueue.then(async () => {
    const r = await api('POST', `${sourcePath(source)}/keys`, { key });
    keysWaiting--;
    if (!r.ok) { say(`key ${key}: ${r.error}`, 'error'); return; }
    const done = r.data && Array.isArray(r.data.done) ? r.data.done : [];
    say(`key ${key}: ${done.length ? done.join('; ') : 'nothing bound'}`, 'ok');
    if (source === selected) pollStagesNow(); // show what the key changed
  });
}

// ---------------------------------------------------------------------------------------------
// Events (Server-Sent Events)
const seenEvents = new Set();
const REFRESHING = new Set(['source-added', 'source-removed', 'source-ended', 'source-failed',
  'source-playing', 'source-restarted']);
const ZONE_EVENTS = new Set(['crossed', 'entered', 'left']);

/** time_unix (seconds), else an ISO `time` (a number `time` is the stream's), else now. */
function eventTime(ev) {
  const d = isNum(ev.time_unix) ? new Date(ev.time_unix * 1000) : new Date(typeof ev.time === 'string' ? ev.time : NaN);
  return Number.isNaN(d.getTime()) ? new Date() : d;
}

function eventDetail(ev) {
  if (ZONE_EVENTS.has(ev.type)) {
    const who = [ev.label, ev.object_id != null ? `#${ev.object_id}` : ''].filter(Boolean).join(' ');
    return [ev.zone, ev.direction, who].filter(Boolean).join(' · ');
  }
  if (ev.type === 'text') { // a tracked object's settled reading (lensclassify)
    const who = ev.object_id != null ? `#${ev.object_id}` : '';
    return [ev.text, who, isNum(ev.votes) ? `${ev.votes} votes` : '', isNum(ev.score) ? `score ${ev.score}` : ''].filter(Boolean).join(' · ');
  }
  const skip = new Set(['id', 'time', 'time_unix', 'source', 'type']);
  return Object.entries(ev).filter(([k, v]) => !skip.has(k) && v != null && v !== '')
    .map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ');
}

function addEvent(ev, lastId) {
  if (!ev || typeof ev !== 'object') return;
  const id = lastId || ev.id; // the SSE `id:` line is the event's id (so is JSON "id" today)
  if (id != null && id !== '') {
    if (seenEvents.has(String(id))) return; // a reconnect's replay
    seenEvents.add(String(id));
  }
  const when = eventTime(ev);
  const li = h('li', { class: 'event', 'data-type': ev.type || '', 'data-source': ev.source || '', 'data-id': id },
    h('time', { datetime: when.toISOString(), text: when.toLocaleTimeString([], { hour12: false }) }),
    h('span', { class: 'src', text: ev.source || '' }),
    h('span', { class: 'type', text: ev.type || 'event' }),
    h('span', { class: 'detail', text: eventDetail(ev) }));
  if (ev.type === 'snapshot' && id != null) {
    // The picture is written right after the event: ask a moment later, and once more on error.
    const img = h('img', { loading: 'lazy', alt: `snapshot ${ev.path || ''}`, title: ev.path || '' });
    const url = `/api/events/${enc(id)}/picture`;
    img.onerror = () => { img.onerror = () => img.remove(); setTimeout(() => { img.src = `${url}?again=1`; }, 1500); };
    setTimeout(() => { img.src = url; }, 500);
    li.append(img);
  }
  const list = $('#events');
  list.prepend(li);
  while (list.children.length > MAX_EVENTS) {
    seenEvents.delete(list.lastElementChild.dataset.id);
    list.lastElementChild.remove();
  }
  if (REFRESHING.has(ev.type)) pollSourcesNow();
}

let events = null;

function connectEvents() {
  if (typeof EventSource !== 'function' || leaving) return;
  const es = events = new EventSource('/api/events');
  es.onopen = () => { status.eventsLive = true; refreshStatus(); };
  es.onmessage = m => {
    try { addEvent(JSON.parse(m.data), m.lastEventId); } catch { /* not JSON: skip it */ }
  };
  es.onerror = () => {
    status.eventsLive = false;
    refreshStatus();
    // EventSource reconnects by itself unless the server refused it (readyState CLOSED).
    if (es.readyState === EventSource.CLOSED && es === events) {
      es.close(); events = null;
      setTimeout(() => { if (!events && !document.hidden) connectEvents(); }, 10000);
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Start
let pollSourcesNow = () => {}, pollStagesNow = () => {};

function startConsole() {
  pollSourcesNow = poller(pollSources, POLL_MS);
  pollStagesNow = poller(pollStages, POLL_MS);
  $('#add').addEventListener('submit', addSource);
  document.addEventListener('keydown', onKey);
  document.addEventListener('keyup', e => { // a focused checkbox toggles on keyup of space
    if (e.key === ' ' && !isTextField(e.target) && selected) e.preventDefault();
  });
  // Leaving (or entering the back/forward cache): end every WebRTC session and the stream.
  addEventListener('pagehide', () => {
    for (const tile of tiles.values()) tile.live.close();
    if (events) { events.close(); events = null; }
  });
  addEventListener('pageshow', e => {
    if (!e.persisted) return;
    for (const tile of tiles.values()) tile.live.resume();
    connectEvents();
  });
  document.addEventListener('visibilitychange', () => { if (!document.hidden && !events) connectEvents(); });
  pollSourcesNow();
  connectEvents();
}

function startLogin() {
  if (new URLSearchParams(location.search).has('failed')) $('#login-failed').hidden = false;
}

if (document.body.dataset.page === 'login') startLogin();
else startConsole();
