/* The timeline's lanes on one screen: the row layout (groups, pinned tracks, headers, the level budget that
   decides how many levels each slice track shows so that the framework, runtime and hardware lanes fit
   the viewport), the sticky lane header, the busy row a collapsed lane keeps, and the minimap of the whole
   run (busy per lane, the current window marked, dragged to move it). Drawing rows, fetching and input
   stay in timeline.js / timeline_input.js. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const MIN_LEVELS = 2;  // below this a track says too little to be worth folding
  const MINI_H = 42, SUMMARY_H = 12, HEADER_H = 22, TRACK_GAP = 5, SUMMARY_ROW_H = 22;
  const LANE_ORDER = ["framework", "runtime", "hardware", "counter", "other"];
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

  function groupKey(track, mode) {
    switch (mode) {
      case "device": return track.device || (track.lane === "counter" ? "counters" : "host");
      case "process": return track.process || "(no process)";
      case "thread": return (track.process || "?") + " / " + (track.thread || track.device || track.label);
      case "instance": return track.instance || "(local)";
      case "rank": return track.rank >= 0 ? "rank " + track.rank : "(no rank)";
      default: return track.lane;
    }
  }
  const laneRank = (l) => { const i = LANE_ORDER.indexOf(l); return i < 0 ? 99 : i; };
  const rankOrder = (key) => { const n = parseInt(key.slice(5), 10); return Number.isFinite(n) ? n : Infinity; };

  /** The tracks per group key (grouping `mode`), in lane and sort order, and the keys in display order. */
  function groupTracks(tracks, mode) {
    const groups = new Map();
    const sorted = tracks.slice().sort((a, b) => (laneRank(a.lane) - laneRank(b.lane)) || ((a.sort_key || 0) - (b.sort_key || 0)) || (a.track_id - b.track_id));
    for (const t of sorted) {
      const k = groupKey(t, mode);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(t);
    }
    const keys = Array.from(groups.keys());
    if (mode === "lane") keys.sort((a, b) => laneRank(a) - laneRank(b));
    if (mode === "rank") keys.sort((a, b) => rankOrder(a) - rankOrder(b));  // rank 2 before rank 10, unknown last
    return { groups: groups, keys: keys };
  }

  /** The level budget of timeline `tl` for `availH` px: the framework, runtime and hardware lanes (every
      group when not grouped by lane) fit, each slice track showing at most N levels (levelBudget). */
  function fitLevels(tl, availH) {
    const { groups, keys } = groupTracks(tl.tracks, tl.grouping);
    const levels = [];
    let fixed = 8;  // the bottom margin under the last track
    for (const k of keys) {
      if (tl.grouping === "lane" && !MUST_FIT.has(k)) continue;
      fixed += HEADER_H;
      if (tl.collapsed.has(tl.grouping + ":" + k)) { fixed += SUMMARY_H; continue; }
      const subs = new Set();
      for (const t of groups.get(k)) {
        if (t.group) {
          if (!subs.has(t.group)) { subs.add(t.group); fixed += HEADER_H; }
          if (!tl.openGroups.has(t.group)) continue;
        }
        fixed += TRACK_GAP;
        if ((t.kind || "slice") === "slice") levels.push(TE.levelsOf(t, tl.pyFolds.get(t.track_id), tl.pyOpen.has(t.track_id)));
        else fixed += TE.makeTrack(t, tl.env).height;
      }
    }
    return levelBudget(levels, fixed, availH, TE.TRACK_ROW_H, TE.BAND_H);
  }

  /** The rows of timeline `tl`: pinned tracks first (their `y` from the top of the pinned strip), then per
      group a header (a collapsed one a row taller, for its busy bars) and its tracks, device sub-groups
      under their own headers (`y` from the top of the scrolled content). */
  function layout(tl) {
    const { groups, keys } = groupTracks(tl.tracks, tl.grouping);
    const levelCap = tl.fitLevels();
    const opts = (t) => ({ levels: levelCap, expanded: tl.expanded.has(t.track_id), fold: tl.pyFolds.get(t.track_id),
      pyOpen: tl.pyOpen.has(t.track_id) });
    const trackRow = (t, y) => { const r = TE.makeTrack(t, tl.env, opts(t)); return { kind: "track", track: t, renderer: r, y: y + 2, h: r.height }; };
    const rows = [], pins = new Set(tl.pinned);
    let py = 0;
    for (const tid of tl.pinned) {
      const t = tl.tracks.find((x) => x.track_id === tid);
      if (!t) continue;
      const r = trackRow(t, py);
      r.pinned = true;
      rows.push(r);
      py += r.h + TRACK_GAP;
    }
    let y = 0;
    for (const k of keys) {
      const all = groups.get(k), list = all.filter((t) => !pins.has(t.track_id));
      const collapsed = tl.collapsed.has(tl.grouping + ":" + k);
      rows.push({ kind: "header", key: k, y: y, h: HEADER_H + (collapsed ? SUMMARY_H : 0), collapsed: collapsed,
        n: all.length, lane: tl.grouping === "lane" ? k : null, tracks: all });
      y += rows[rows.length - 1].h;
      if (collapsed) continue;
      if (tl.summaryRows && tl.grouping === "lane") {  // the window's "N more tracks" of this lane, under its header
        rows.push({ kind: "summary", key: k, lane: k, y: y, h: SUMMARY_ROW_H });
        y += SUMMARY_ROW_H + TRACK_GAP;
      }
      let sub = null, subOpen = true;
      for (const t of list) {
        if (t.group && t.group !== sub) {  // a device profile's sub-group: its own header, closed until opened
          sub = t.group; subOpen = tl.openGroups.has(sub);
          rows.push({ kind: "header", key: sub, sub: true, y: y, h: HEADER_H, collapsed: !subOpen,
            n: list.filter((x) => x.group === sub).length, lane: null });
          y += HEADER_H;
        } else if (!t.group) { sub = null; subOpen = true; }
        if (!subOpen) continue;
        const r = trackRow(t, y);
        rows.push(r);
        y += r.h + TRACK_GAP;
      }
    }
    return { rows: rows, pinH: py ? py + 4 : 0, contentH: y + 8, levelCap: levelCap };
  }

  /** The lane header whose tracks fill the top of the scrolled rows while the header itself has scrolled
      away: drawn there (pushed up by the next header), so a lane's name stays in sight. */
  function stickyHeader(rows, scrollTop, bodyTop) {
    if (scrollTop <= 0) return null;
    const heads = rows.filter((r) => r.kind === "header" && !r.sub && !r.pinned);
    for (let i = heads.length - 1; i >= 0; i--) {
      if (heads[i].y >= scrollTop) continue;
      const next = heads[i + 1], h = heads[i].h;
      const push = next ? Math.min(0, next.y - scrollTop - h) : 0;
      return { row: heads[i], y: bodyTop + push, h: h };
    }
    return null;
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

  /** Busy fraction per column of `npp` ns of a window's lane summary (its busy ns per column of the window). */
  function summaryBusy(summary, window, cols, npp, x0) {
    const arr = new Float64Array(cols), w = window.width_px, span = window.end_ns - window.start_ns;
    const edge = (p) => window.start_ns + Math.floor((p * span) / w);  // the server's column edges
    for (let p = 0; p < w; p++) {
      const busy = summary.busy_ns[p], a = edge(p), b = edge(p + 1);
      if (busy > 0 && b > a) addBusy(arr, a - x0, b - x0, Math.min(1, busy / (b - a)), npp);
    }
    for (let i = 0; i < cols; i++) if (arr[i] > 1) arr[i] = 1;
    return arr;
  }

  /** Per lane, per column: the busiest of the lane's tracks there (0..1), the window's summary of the tracks
      it did not send counted as one more track. */
  function laneBusy(window, lanes, cols, npp) {
    const out = new Map();
    for (const s of window.summaries || []) if (MINI_LANES.includes(s.lane)) out.set(s.lane, summaryBusy(s, window, cols, npp, 0));
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

  /** A collapsed lane's one-row summary: where its tracks are busy in the current window (those the window
      did not send through its `summary` of the lane, when it has one). */
  function drawSummary(ctx, ts, tracks, dataOf, y, lane, summary, window) {
    const cols = Math.max(1, Math.round(ts.right - ts.left));
    const acc = summary && window ? summaryBusy(summary, window, cols, ts.nsPerPx, ts.start) : new Float64Array(cols);
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

  /** A lane's summary row: "+N tracks" in the gutter, and where those tracks (not sent in this window: off
      screen, or past what fits) are busy, as bars of the busy share per pixel. */
  function drawSummaryRow(ctx, ts, r, y, summary, window, gutter) {
    const c = TE.THEME.timeline, n = summary ? summary.tracks : 0;
    ctx.fillStyle = c.band_bg; ctx.fillRect(0, y, ts.right, r.h);
    ctx.fillStyle = c.muted;
    const label = summary ? "+" + n + (n === 1 ? " track" : " tracks") + " not drawn" : window ? "every track drawn" : "…";
    ctx.fillText(label, 14, y + r.h / 2);
    ctx.fillStyle = c.gutter_rule; ctx.fillRect(gutter - 1, y, 1, r.h);
    if (!summary || !window) return;
    const cols = Math.max(1, Math.round(ts.right - ts.left));
    const busy = summaryBusy(summary, window, cols, ts.nsPerPx, ts.start);
    ctx.fillStyle = TE.laneColor(r.lane); ctx.globalAlpha = 0.7;
    drawBusy(ctx, busy, ts.left, 1, y + r.h - 2, r.h - 4);
    ctx.globalAlpha = 1;
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

  TE.lanes = { levelBudget: levelBudget, fitLevels: fitLevels, layout: layout, stickyHeader: stickyHeader,
    laneBusy: laneBusy, drawSummary: drawSummary, drawSummaryRow: drawSummaryRow, summaryBusy: summaryBusy, MUST_FIT: MUST_FIT, MINI_H: MINI_H, SUMMARY_H: SUMMARY_H,
    HEADER_H: HEADER_H, TRACK_GAP: TRACK_GAP, MIN_LEVELS: MIN_LEVELS };
  TE.Minimap = Minimap;
})();
