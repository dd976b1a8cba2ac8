// bench/console.py's browser side: injected (Selenium execute_script) into a page of the
// server's own origin (/healthz), so fetch() of the WHEP routes is same-origin. Defines
// window.benchViewers:
//   start(n, {measure, at})  n bare WHEP viewers (n RTCPeerConnections, n <video> elements); with
//                            measure, the first one also reads the time code of every frame it
//                            presents (requestVideoFrameCallback) for the latency figures.
//   status()                 per viewer: ICE/connection state, frames decoded, errors.
//   begin() / collect()      open / read the measured window (the records since begin()).
//   picture()                the first viewer's current frame, full size, as a PNG data URL.
//   stop()                   DELETE every WHEP session, close every peer connection.
//   clock()                  performance.timeOrigin + performance.now(), Date.now() (ms since the epoch).
// The time code (bench/live_peer.py): 64 bits (sequence 16 | CLOCK_MONOTONIC µs mod 2^32 | CRC-16/
// CCITT-FALSE of those six bytes), each bit a Manchester pair of 32-px squares (1: white then
// black), 16 squares a row, 8 rows, top-right corner (16-px margin) of the 1280x720 frame. A pair
// is read by comparing the means of its squares' inner halves (luma), as live_peer.py does: from
// the frame's own luma plane (VideoFrame.copyTo of the code's corner), or, when the frame has no
// planes to give, from the corner drawn into a canvas (RGB -> luma). The first frame that fails
// the CRC is kept as a PNG (the canvas) for a look.
(() => {
  if (window.benchViewers) return;
  const W = 1280, BLOCK = 32, COLS = 16, ROWS = 8, MARGIN = 16, BITS = 64;
  const CX = W - MARGIN - COLS * BLOCK, CY = MARGIN;
  const LO = BLOCK / 4, HI = BLOCK - BLOCK / 4;

  function crc16(bytes) {
    let crc = 0xFFFF;
    for (const b of bytes) {
      crc ^= b << 8;
      for (let i = 0; i < 8; i++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xFFFF : (crc << 1) & 0xFFFF;
    }
    return crc;
  }

  /** The bits (0/1, most significant first) -> {seq, micros} or null when the CRC does not match. */
  function decode(bits) {
    const bytes = [];
    for (let i = 0; i < 8; i++) {
      let v = 0;
      for (let j = 0; j < 8; j++) v = (v << 1) | bits[i * 8 + j];
      bytes.push(v);
    }
    const check = (bytes[6] << 8) | bytes[7];
    if (crc16(bytes.slice(0, 6)) !== check) return null;
    const seq = (bytes[0] << 8) | bytes[1];
    const micros = ((bytes[2] << 24) >>> 0) + (bytes[3] << 16) + (bytes[4] << 8) + bytes[5];
    return { seq, micros };
  }

  const canvas = document.createElement('canvas');
  canvas.width = COLS * BLOCK; canvas.height = ROWS * BLOCK;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });

  /** Reads the code from a frame (a VideoFrame, or the video's current frame): {seq, micros} or null. */
  function readCode(frame, width) {
    const s = width / W; // 1 unless the stream is scaled
    ctx.drawImage(frame, CX * s, CY * s, COLS * BLOCK * s, ROWS * BLOCK * s, 0, 0, canvas.width, canvas.height);
    const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    const means = new Float64Array(ROWS * COLS);
    for (let r = 0; r < ROWS; r++) {
      for (let c = 0; c < COLS; c++) {
        let sum = 0;
        for (let y = r * BLOCK + LO; y < r * BLOCK + HI; y++) {
          let o = (y * canvas.width + c * BLOCK + LO) * 4;
          for (let x = LO; x < HI; x++, o += 4) sum += 0.299 * px[o] + 0.587 * px[o + 1] + 0.114 * px[o + 2];
        }
        means[r * COLS + c] = sum;
      }
    }
    return bitsOf(means);
  }

  /** Pair means -> bits -> {seq, micros} or null. */
  function bitsOf(means) {
    const bits = new Array(BITS);
    for (let i = 0; i < BITS; i++) bits[i] = means[2 * i] > means[2 * i + 1] ? 1 : 0;
    return decode(bits);
  }

  /** Reads the code from the frame's own luma plane (I420, NV12…: the plane live_peer.py reads),
   *  copying only the code's corner, with no colour conversion and no canvas. undefined when the
   *  frame offers no planes (then the caller draws it into the canvas instead). */
  let lumaBuf = null;
  async function readLuma(frame) {
    if (!frame.format || !/^(I4[24][04]|NV12)/.test(frame.format) || frame.displayWidth !== W) return undefined;
    const vr = frame.visibleRect;
    const rect = { x: vr.x + CX, y: vr.y + CY, width: COLS * BLOCK, height: ROWS * BLOCK };
    const size = frame.allocationSize({ rect });
    if (!lumaBuf || lumaBuf.length < size) lumaBuf = new Uint8Array(size);
    const [{ offset, stride }] = await frame.copyTo(lumaBuf, { rect });
    const means = new Float64Array(ROWS * COLS);
    for (let r = 0; r < ROWS; r++) {
      for (let c = 0; c < COLS; c++) {
        let sum = 0;
        for (let y = r * BLOCK + LO; y < r * BLOCK + HI; y++) {
          const o = offset + y * stride + c * BLOCK;
          for (let x = LO; x < HI; x++) sum += lumaBuf[o + x];
        }
        means[r * COLS + c] = sum;
      }
    }
    return bitsOf(means);
  }

  const viewers = [];
  let rec = null; // the measured window's records

  function newRecords() {
    return { seq: [], micros: [], display: [], now: [], presentation: [], receive: [], unreadable: 0,
             callbacks: 0, work: [], canvas: 0, lumaError: null, mismatch: 0, noFrame: 0, rtp: [], presentedFirst: null, presentedLast: null, width: 0, height: 0 };
  }

  function measure(v) {
    const video = v.video;
    const onFrame = async (now, md) => {
      if (v.closed) return;
      video.requestVideoFrameCallback(onFrame);
      if (!rec) return;
      const r = rec;
      r.callbacks++;
      if (r.presentedFirst === null) r.presentedFirst = md.presentedFrames;
      r.presentedLast = md.presentedFrames;
      r.width = md.width; r.height = md.height;
      // The frame the callback is about, as a VideoFrame: its timestamp (the media time, µs) says
      // whether it is the one the metadata describes (the element may have moved on to the next
      // by now); a frame that is not is skipped and counted, never paired with another's times.
      const t0 = performance.now();
      let frame = null, got;
      try { frame = new VideoFrame(video); } catch (e) { r.noFrame++; return; }
      try {
        if (Math.abs(frame.timestamp - md.mediaTime * 1e6) > 1000) { r.mismatch++; return; }
        try { got = await readLuma(frame); } catch (e) { got = undefined; r.lumaError = String(e && e.message || e); }
        if (got === undefined) { r.canvas++; got = readCode(frame, frame.displayWidth); }
        if (!got) { r.unreadable++; if (!r.bad) { readCode(frame, frame.displayWidth); r.bad = canvas.toDataURL('image/png'); } return; }
      } finally { frame.close(); r.work.push(performance.now() - t0); }
      const o = performance.timeOrigin;
      r.seq.push(got.seq); r.micros.push(got.micros);
      r.display.push(o + md.expectedDisplayTime);
      r.now.push(o + now);
      r.presentation.push(o + md.presentationTime);
      r.rtp.push(md.rtpTimestamp === undefined ? null : md.rtpTimestamp);
      r.receive.push(md.receiveTime !== undefined ? o + md.receiveTime : null);
    };
    video.requestVideoFrameCallback(onFrame);
  }

  async function startOne(i, opts) {
    const video = document.createElement('video');
    video.autoplay = true; video.muted = true; video.playsInline = true;
    video.width = opts.small ? 320 : 640; // layout only: the stream keeps its 1280x720
    document.body.append(video);
    const v = { i, video, pc: null, session: null, error: null, closed: false, state: 'new' };
    viewers.push(v);
    try {
      const pc = v.pc = new RTCPeerConnection();
      pc.addTransceiver('video', { direction: 'recvonly' });
      pc.ontrack = e => { video.srcObject = e.streams[0] || new MediaStream([e.track]); video.play().catch(() => {}); };
      pc.onconnectionstatechange = () => { v.state = pc.connectionState; };
      await pc.setLocalDescription(await pc.createOffer());
      const r = await fetch(`/api/sources/main/whep${opts.at ? `?at=${encodeURIComponent(opts.at)}` : ''}`, {
        method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
      const where = r.headers.get('Location');
      v.session = where ? new URL(where, location.href).href : null;
      const text = await r.text();
      if (r.status !== 201) throw new Error(`WHEP: HTTP ${r.status} ${text.slice(0, 200)}`);
      await pc.setRemoteDescription({ type: 'answer', sdp: text });
      if (opts.measure && i === 0) measure(v);
    } catch (e) {
      v.error = String(e && e.message || e);
    }
  }

  window.benchViewers = {
    async start(n, opts = {}) {
      document.body.textContent = '';
      await Promise.all(Array.from({ length: n }, (_, i) => startOne(i, { ...opts, small: n > 1 })));
      return this.status();
    },
    status() {
      return viewers.filter(v => !v.closed).map(v => {
        const q = v.video.getVideoPlaybackQuality ? v.video.getVideoPlaybackQuality() : {};
        return { state: v.pc ? v.pc.connectionState : 'none', error: v.error, session: v.session,
                 frames: q.totalVideoFrames || 0, dropped: q.droppedVideoFrames || 0,
                 width: v.video.videoWidth, height: v.video.videoHeight, time: v.video.currentTime, paused: v.video.paused };
      });
    },
    begin() { rec = newRecords(); },
    collect() { const r = rec; rec = null; return r; },
    /** The first viewer's current frame at its own size, as a PNG data URL (a look at the code after VP8). */
    picture() {
      const v = viewers[0] && viewers[0].video;
      if (!v || !v.videoWidth) return null;
      const c = document.createElement('canvas');
      c.width = v.videoWidth; c.height = v.videoHeight;
      c.getContext('2d').drawImage(v, 0, 0);
      return c.toDataURL('image/png');
    },
    async stop() {
      const gone = [];
      for (const v of viewers.splice(0)) {
        v.closed = true;
        if (v.pc) { try { v.pc.close(); } catch { /* closed */ } }
        v.video.srcObject = null;
        v.video.remove();
        if (v.session) gone.push(fetch(v.session, { method: 'DELETE' }).then(r => r.status).catch(e => String(e)));
      }
      return Promise.all(gone);
    },
    clock() { return [performance.timeOrigin + performance.now(), Date.now()]; },
  };
})();
