/* The timeline's lanes on one screen: the level budget (how many levels each slice track shows so that the
   framework, runtime and hardware lanes fit the viewport), the busy row a collapsed lane keeps, and the
   minimap of the whole run (busy per lane, the current window marked, dragged to move it). Layout and
   input stay in timeline.js / timeline_input.js; this file computes and draws. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const MIN_LEVELS = 2;  // below this a track says too little to be worth folding
  const MINI_H = 42, SUMMARY_H = 12;
  const MINI_LANES = ["framework", "runtime", "hardware"];
  /** The lanes that must fit on one screen (grouping by lane). */
  const MUST_FIT = new Set(MINI_LANES);

  /** The level budget N: the most levels every slice track may show so that the tracks fit in `availH`
      px. `levels` has each slice track's depth count; `fixedH` is what does not fold (headers, counter and
      instant rows, the gaps between tracks). A track deeper than N shows N levels and a band of `bandH`
      px for the rest. Everything fits: the deepest track's depth (nothing folds); nothing fits even at
      MIN_LEVELS: MIN_LEVELS. */
  function levelBudget(levels, fixedH, availH, rowH, bandH) {
    const deepest = levels.reduce((m, n) => Math.max(m, n), 1);
    const heightAt = (cap) => levels.reduce((h, n) => h + Math.min(n, cap) * rowH + (n > cap ? bandH : 0), fixedH);
    for (let cap = deepest; cap > MIN_LEVELS; cap--) if (heightAt(cap) <= availH) return cap;
    return Math.min(deepest, MIN_LEVELS);
  }

  /** Add [a, b) (ns, busy fraction `f` of it) to per-column busy `arr` of `npp` ns per column. */
  function addBusy(arr, a, b, f, npp) {
    const n = arr.length;
    for (let px = Math.max(0, Math.floor(a / npp)), last = Math.min(n - 1, Math.floor(b / npp)); px <= last; px++) {
      const lo = Math.max(a, px * npp), hi = Math.min(b, (px + 1) * npp);
      if (hi > lo) arr[px] += (f * (hi - lo)) / npp;
    }
  }

  /** Busy fraction per column of each track in `window` (a LOD window answer, times relative ns): the
      top-level slices (depth 0, which never overlap on one track) and merged boxes (their busy share). */
  function trackBusy(td, cols, npp, x0) {
    const arr = new Float64Array(cols);
    for (const part of [td.slices, td.merged]) {
      if (!part) continue;
      for (let i = 0; i < part.ts.length; i++) {
        if (part.depth[i] !== 0 || part.dur[i] <= 0) continue;
        const f = part.busy_ns ? Math.min(1, part.busy_ns[i] / part.dur[i]) : 1;
        addBusy(arr, part.ts[i] - x0, part.ts[i] + part.dur[i] - x0, f, npp);
      }
    }
    for (let i = 0; i < cols; i++) if (arr[i] > 1) arr[i] = 1;
    return arr;
  }

  /** Per lane, per column: the busiest of the lane's tracks there (0..1). */
  function laneBusy(window, lanes, cols, npp) {
    const out = new Map();
    for (const td of window.tracks) {
      const lane = lanes.get(td.track_id);
      if (!MINI_LANES.includes(lane)) continue;
      const arr = trackBusy(td, cols, npp, 0);
      const acc = out.get(lane);
      if (!acc) { out.set(lane, arr); continue; }
      for (let i = 0; i < cols; i++) if (arr[i] > acc[i]) acc[i] = arr[i];
    }
    return out;
  }

  /** Busy columns of `busy` (0..1 per column of `colW` px from `x0`) as bars rising from `bottom`. */
  function drawBusy(ctx, busy, x0, colW, bottom, h) {
    for (let i = 0; i < busy.length; i++) {
      if (busy[i] <= 0) continue;
      const bh = Math.max(1, busy[i] * h);
      ctx.fillRect(x0 + i * colW, bottom - bh, Math.max(1, colW), bh);
    }
  }

  /** A collapsed lane's one-row summary: where its tracks are busy in the current window. */
  function drawSummary(ctx, ts, tracks, dataOf, y, lane) {
    const cols = Math.max(1, Math.round(ts.right - ts.left)), acc = new Float64Array(cols);
    for (const t of tracks) {
      const td = dataOf(t.track_id);
      if (!td) continue;
      const arr = trackBusy(td, cols, ts.nsPerPx, ts.start);
      for (let i = 0; i < cols; i++) if (arr[i] > acc[i]) acc[i] = arr[i];
    }
    ctx.fillStyle = TE.laneColor(lane || "other");
    drawBusy(ctx, acc, ts.left, 1, y + SUMMARY_H - 1, SUMMARY_H - 2);
    return acc;
  }

  /** The overview strip above the ruler: busy per lane over the whole run (one low-resolution window,
      fetched once), the current window as a box and the highlight as a band. */
  class Minimap {
    constructor(tl) { this.tl = tl; this.busy = new Map(); this.lanes = []; this.cols = 0; }
    /** Busy per lane from `whole` (a window of the whole run), else from one fetched for it. */
    async load(whole) {
      const tl = this.tl, cols = Math.max(100, Math.round(tl.plotW));
      let w = whole;
      if (!w) {
        try { w = await tl.source.window(0, tl.spanNs, cols); } catch (err) { return; }  // the tracks still work
      }
      const lanes = new Map(tl.tracks.map((t) => [t.track_id, t.lane]));
      this.busy = laneBusy(w, lanes, cols, tl.spanNs / cols);
      this.lanes = MINI_LANES.filter((l) => this.busy.has(l));
      this.cols = cols;
      tl.requestDraw();
    }
    /** The whole run over the plot's width. */
    scale() { return new TE.TimeScale(0, this.tl.spanNs, TE.TL.GUTTER, Math.max(TE.TL.GUTTER + 10, this.tl.width || 0)); }
    /** The current window's box in canvas px. */
    windowBox() {
      const tl = this.tl, s = this.scale();
      const x0 = s.xOf(Math.max(0, tl.start)), x1 = Math.max(x0 + 3, s.xOf(Math.min(tl.spanNs, tl.end)));
      return { x0: x0, x1: x1, y: 1, h: MINI_H - 3 };
    }
    draw(ctx, W) {
      const c = TE.THEME.timeline, s = this.scale(), tl = this.tl;
      ctx.fillStyle = c.minimap_bg; ctx.fillRect(0, 0, W, MINI_H);
      ctx.fillStyle = c.rule; ctx.fillRect(0, MINI_H - 1, W, 1);
      const n = Math.max(1, this.lanes.length), sh = (MINI_H - 6) / n, colW = this.cols ? (s.right - s.left) / this.cols : 1;
      ctx.font = "10px system-ui, sans-serif";
      this.lanes.forEach((lane, k) => {
        const bottom = 3 + (k + 1) * sh;
        ctx.fillStyle = TE.laneColor(lane);
        drawBusy(ctx, this.busy.get(lane), s.left, colW, bottom, sh - 1);
        ctx.fillStyle = c.muted; ctx.fillText(lane, 14, bottom - sh / 2);
      });
      if (tl.highlight) {
        const a = s.xOf(tl.highlight[0]), b = Math.max(a + 2, s.xOf(tl.highlight[1]));
        ctx.fillStyle = c.highlight_fill; ctx.fillRect(a, 0, b - a, MINI_H - 1);
        ctx.fillStyle = c.highlight; ctx.fillRect(a, 0, 1, MINI_H - 1); ctx.fillRect(b - 1, 0, 1, MINI_H - 1);
      }
      const box = this.windowBox();
      ctx.fillStyle = c.minimap_window_fill; ctx.fillRect(box.x0, box.y, box.x1 - box.x0, box.h);
      ctx.strokeStyle = c.minimap_window; ctx.lineWidth = 1.5; ctx.strokeRect(box.x0 + 0.5, box.y + 0.5, box.x1 - box.x0 - 1, box.h - 1);
      ctx.fillStyle = c.rule; ctx.fillRect(TE.TL.GUTTER - 1, 0, 1, MINI_H);
    }
    /** Relative ns at canvas x over the whole run. */
    nsAt(x) { return this.scale().nsAt(x); }
  }

  TE.lanes = { levelBudget: levelBudget, laneBusy: laneBusy, drawSummary: drawSummary, MUST_FIT: MUST_FIT,
    MINI_H: MINI_H, SUMMARY_H: SUMMARY_H, MIN_LEVELS: MIN_LEVELS };
  TE.Minimap = Minimap;
})();
