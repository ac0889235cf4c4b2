/* Track renderers, one per track kind (Perfetto's Track interface): `height`, `render(ctx, timescale, data)`,
   `hitTest(x, y)` and `tooltip(hit)`. The timeline lays rows out, translates and clips the canvas to a
   row's plot area and calls these; a new kind (Neuron engine, DMA queue, device counter) is one more
   entry in TE.TRACK_KINDS. `env` is what every renderer shares: the time scale, the window's names and
   colours, the selection and the hover (timeline.js builds it). Colours come from TE.THEME. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const ROW_H = 17, COUNTER_H = 38, BAND_H = 16;

  /** The part of an event name that says the most in a narrow box. C++ kernel names lose their
   *  argument list, template arguments (balanced (...) and <...>) and return type first, then the
   *  namespace: "void at::native::vectorized_elementwise_kernel<4, F<float> >(int, F<float>)" ->
   *  "vectorized_elementwise_kernel"; "aten::mul" -> "mul"; "Memcpy HtoD (Pageable -> Device)" ->
   *  "Memcpy HtoD". A generic "Kernel<X>" (CUTLASS) keeps its first template argument's name. */
  function shortName(name) {
    if (!name.includes("::") && !/\)\s*$/.test(name)) return name;  // not C++: "operator<<", "<b>x</b>" stay whole
    let bare = "", firstArg = "", angle = 0, paren = 0;
    for (let i = 0; i < name.length; i++) {
      const ch = name[i];
      if (ch === "(") paren++;
      else if (ch === ")" && paren > 0) paren--;
      else if (ch === "<" && paren === 0) angle++;
      else if (ch === ">" && paren === 0 && angle > 0) angle--;
      else if (angle === 0 && paren === 0) bare += ch;
      else if (angle === 1 && paren === 0 && ch !== "," && !firstArg.endsWith(",")) firstArg += ch;
      if (angle === 1 && ch === ",") firstArg += ",";
    }
    bare = bare.trim();
    if (name.includes("::") || bare.includes("::")) {
      const words = bare.split(/\s+/);
      bare = words[words.length - 1];  // "void ns::kernel" -> "ns::kernel": the return type goes
    }
    const cut = bare.lastIndexOf("::");
    let short = cut >= 0 ? bare.slice(cut + 2) : bare;
    if (/^kernel$/i.test(short) && firstArg) {
      const arg = firstArg.replace(/,$/, "").trim();
      const argCut = arg.lastIndexOf("::");
      short = argCut >= 0 ? arg.slice(argCut + 2) : arg;
    }
    return short || name;
  }

  /** A window's name dictionary with its colours and the labels that fit a box (widths measured once). */
  class NameTable {
    constructor(names) {
      this.names = names;
      this.colors = names.map((n) => TE.colorFor(n));
      this.widths = [];
      this.shorts = [];
    }
    /** The name (or its head and an ellipsis) that fits in `room` px. */
    fit(ctx, code, room) {
      const name = this.names[code];
      let full = this.widths[code];
      if (full === undefined) full = this.widths[code] = ctx.measureText(name).width;
      if (full <= room) return name;
      // "aten::layer_norm" -> "layer_norm", a C++ kernel -> its bare name, before cutting
      let short = this.shorts[code];
      if (short === undefined) short = this.shorts[code] = shortName(name);
      const w = short === name ? full : ctx.measureText(short).width;
      if (w <= room) return short;
      const chars = Math.floor(((room - 8) / w) * short.length);
      return chars >= 2 ? short.slice(0, chars) + "…" : "";
    }
  }

  /** The fold key of slice `id` in a track's window data (lod_fold), or `depth` when the data lacks it. */
  function foldOf(data, id, depth) {
    const s = data && data.slices;
    const i = s && s.fold ? s.id.indexOf(id) : -1;
    return i >= 0 ? s.fold[i] : depth;
  }
  /** The indexes of a window part's Python frames (fold key < 0), outermost first. */
  function pythonOrder(part) {
    const out = [];
    for (let i = 0; i < part.ts.length; i++) if (part.fold[i] < 0) out.push(i);
    return out.sort((a, b) => part.fold[b] - part.fold[a]);
  }

  const outline = (ctx, color, x, y, w, h) => { ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.strokeRect(x, y, w, h); };

  /** The levels (rows) a slice track takes: its depths, or with its Python stack folded (`fold` = the window's
      {py, ops} of a with_stack track, not `pyOpen`) one band for the Python frames and its other slices' rows. */
  const levelsOf = (track, fold, pyOpen) => (fold && fold.py > 0 && !pyOpen ? 1 + fold.ops : Math.max(0, track.max_depth || 0) + 1);

  /** Nested slices, one row per level; merged (per-pixel) slices drawn faded by how busy they are. A with_stack
      track (`opts.fold`) folds its Python frames (category python_function) into one band on top, its other
      slices in the rows below counted without them (explorer/analysis/timeline/fold.py); `opts.pyOpen` shows every
      depth instead (the track's label folds it back: timeline.js). With `opts.levels` below the rows a track has,
      the rows from there down fold into one "+k levels" band that shows where they are busy; `opts.expanded`
      shows every level with the band (to fold) below. */
  class SliceTrack {
    constructor(track, env, opts) {
      const o = opts || {}, fold = o.fold && o.fold.py > 0 ? o.fold : null;
      this.track = track;
      this.env = env;
      this.python = fold ? fold.py : 0;  // the Python stack's depth on this track (0: none)
      this.pyFolded = !!fold && !o.pyOpen;
      const all = levelsOf(track, fold, o.pyOpen), cap = o.levels ? o.levels : all;
      this.folds = cap < all;
      this.expanded = this.folds && !!o.expanded;
      this.levels = this.folds && !this.expanded ? cap : all;
      this.cap = Math.min(cap, all);
      this.hidden = all - this.cap;  // the levels the bottom band stands for
      this.bandY = this.levels * ROW_H;
      this.height = this.bandY + (this.folds ? BAND_H : 0);
    }
    /** The row of a slice at `depth` with fold key `fold` (lod_fold): 0 for a Python frame while the stack is
        folded, below it the other slices by their key; its depth otherwise. At `levels` or more: in the band. */
    row(depth, fold) {
      if (!this.pyFolded) return depth || 0;
      return fold < 0 ? 0 : 1 + fold;
    }
    /** Whether a slice sits in a fold (the Python band or the "+k levels" band): not drawn in a row of its own. */
    hides(depth, fold) { return (this.pyFolded && fold < 0) || this.row(depth, fold) >= this.levels; }
    /** The y of the row a slice is drawn in: its own, or the band when folded away. */
    yOf(depth, fold) { return Math.min(this.row(depth, fold === undefined ? depth : fold), this.levels) * ROW_H; }
    render(ctx, ts, data) {
      if (this.pyFolded) this.renderPython(ctx, ts, data);
      if (data.merged && data.merged.ts.length) this.renderMerged(ctx, ts, data.merged);
      if (data.slices && data.slices.ts.length) this.renderSlices(ctx, ts, data.slices);
      if (this.folds) this.renderBand(ctx, ts, data);
      const env = this.env, sel = env.selected && env.selected.event, hover = env.hover;
      if (sel && sel.track_id === this.track.track_id) {
        const y = this.yOf(sel.depth, foldOf(data, sel.slice_id, sel.depth));
        outline(ctx, TE.THEME.timeline.selected, ts.xOf(sel.ts_rel_ns), y + 1, ts.px(sel.dur_ns, 2), ROW_H - 2);
      }
      if (hover && hover.track === this.track.track_id) {
        ctx.strokeStyle = TE.THEME.timeline.hover; ctx.lineWidth = 1;
        ctx.strokeRect(ts.xOf(hover.ts) + 0.5, hover.row * ROW_H + 0.5, ts.px(hover.dur, 1), ROW_H - 1);
      }
    }
    /** The folded Python stack as one row: every frame drawn outermost first (so the innermost wide frame shows
        at each time), faded, under a tag that says how deep the stack is and what a click does. */
    renderPython(ctx, ts, data) {
      const c = TE.THEME.timeline, colors = this.env.labels.colors;
      ctx.fillStyle = c.band_bg; ctx.fillRect(ts.left, 0, ts.right - ts.left, ROW_H);
      ctx.globalAlpha = 0.6;
      for (const part of [data.merged, data.slices]) {
        if (!part || !part.fold) continue;
        for (const i of pythonOrder(part)) {
          const xa = ts.xOf(part.ts[i]), w = Math.max(1, part.dur[i] / ts.nsPerPx);
          if (xa + w < ts.left || xa > ts.right) continue;
          ctx.fillStyle = colors[part.name[i]] || c.unknown;
          ctx.fillRect(xa, 1, w >= 3 ? w - 1 : w, ROW_H - 2);
        }
      }
      ctx.globalAlpha = 1;
      const tag = "▸ Python stack · " + this.python + " levels", tagW = ctx.measureText(tag).width + 10;
      const s = data.slices, x0 = ts.left + tagW + 2;  // labels start right of the tag
      if (s && s.fold) {  // labels of the frames wide enough, innermost last
        for (const i of pythonOrder(s)) {
          let xa = ts.xOf(s.ts[i]), w = s.dur[i] / ts.nsPerPx;
          if (xa < x0) { w -= x0 - xa; xa = x0; }
          if (w <= 40 || xa > ts.right) continue;
          const label = this.env.labels.fit(ctx, s.name[i], w - 6);
          if (!label) continue;
          ctx.fillStyle = c.band_bg; ctx.fillRect(xa, 1, Math.max(1, w - 1), ROW_H - 2);
          ctx.fillStyle = colors[s.name[i]] || c.unknown;
          ctx.globalAlpha = 0.6; ctx.fillRect(xa, 1, Math.max(1, w - 1), ROW_H - 2); ctx.globalAlpha = 1;
          ctx.fillStyle = c.slice_ink; ctx.fillText(label, xa + 3, ROW_H / 2 - 0.5);
        }
      }
      ctx.fillStyle = c.band_bg; ctx.fillRect(ts.left + 2, 1, tagW, ROW_H - 2);
      ctx.fillStyle = c.band_ink; ctx.fillText(tag, ts.left + 7, ROW_H / 2 - 0.5);
    }
    /** The folded levels as one band: where they are busy (every slice and merged box below the shown
        levels, flattened), and what a click does. */
    renderBand(ctx, ts, data) {
      const c = TE.THEME.timeline, y = this.bandY;
      ctx.fillStyle = c.band_bg; ctx.fillRect(ts.left, y, ts.right - ts.left, BAND_H);
      ctx.fillStyle = TE.laneColor(this.track.lane);
      ctx.globalAlpha = 0.55;
      for (const part of [data.merged, data.slices]) {
        if (!part) continue;
        for (let i = 0; i < part.ts.length; i++) {
          if (this.row(part.depth[i], part.fold ? part.fold[i] : part.depth[i]) < this.levels) continue;
          const xa = ts.xOf(part.ts[i]);
          ctx.fillRect(xa, y + 3, Math.max(1, part.dur[i] / ts.nsPerPx), BAND_H - 6);
        }
      }
      ctx.globalAlpha = 1;
      const label = this.expanded ? "▴ fold " + this.hidden + " levels" : "▾ +" + this.hidden + " levels";
      const w = ctx.measureText(label).width + 10;
      ctx.fillStyle = c.band_bg; ctx.fillRect(ts.left + 2, y + 1, w, BAND_H - 2);
      ctx.fillStyle = c.band_ink; ctx.fillText(label, ts.left + 7, y + BAND_H / 2);
    }
    renderMerged(ctx, ts, m) {
      const left = ts.left, right = ts.right, npp = ts.nsPerPx, x0 = ts.start, colors = this.env.labels.colors;
      const unknown = TE.THEME.timeline.unknown;
      const fold = m.fold || m.depth, py = this.pyFolded;
      for (let i = 0; i < m.ts.length; i++) {
        const row = this.row(m.depth[i], fold[i]);
        if (row >= this.levels || (py && fold[i] < 0)) continue;
        const xa = left + (m.ts[i] - x0) / npp;
        const w = Math.max(1, m.dur[i] / npp);
        if (xa + w < left || xa > right) continue;
        ctx.globalAlpha = 0.35 + 0.55 * Math.min(1, m.busy_ns[i] / Math.max(1, m.dur[i]));
        ctx.fillStyle = colors[m.name[i]] || unknown;
        ctx.fillRect(xa, row * ROW_H + 1, w, ROW_H - 2);
      }
      ctx.globalAlpha = 1;
    }
    renderSlices(ctx, ts, s) {
      const env = this.env, c = TE.THEME.timeline, labels = env.labels, colors = labels.colors;
      const left = ts.left, right = ts.right, npp = ts.nsPerPx, x0 = ts.start;
      const hl = env.matchIds, sel = env.selected ? env.selected.event.slice_id : -1;
      const fold = s.fold || s.depth, py = this.pyFolded;
      for (let i = 0; i < s.ts.length; i++) {
        const row = this.row(s.depth[i], fold[i]);
        if (row >= this.levels || (py && fold[i] < 0)) continue;
        let xa = left + (s.ts[i] - x0) / npp;
        let w = s.dur[i] / npp;
        if (xa + w < left || xa > right) continue;
        if (w < 1) w = 1;
        const yy = row * ROW_H + 1;
        const id = s.id[i];
        ctx.fillStyle = colors[s.name[i]] || c.unknown;
        ctx.fillRect(xa, yy, w >= 3 ? w - 1 : w, ROW_H - 2);  // a 1px seam keeps neighbours apart
        if (hl.size && hl.has(id)) outline(ctx, c.match, xa + 1, yy + 1, Math.max(1, w - 2), ROW_H - 4);
        if (id === sel) outline(ctx, c.selected, xa + 1, yy + 1, Math.max(1, w - 2), ROW_H - 4);
        if (w > 28) {
          if (xa < left) { w -= left - xa; xa = left; }
          const label = labels.fit(ctx, s.name[i], w - 6);
          if (label) {
            ctx.fillStyle = c.slice_ink;
            ctx.fillText(label, xa + 3, yy + ROW_H / 2 - 0.5);
          }
        }
      }
    }
    /** The slice under (x, y) (y from the row's top; a few px of slop, the nearest and then the shortest
        wins), else the merged box there. */
    hitTest(x, y) {
      const env = this.env, ts = env.ts, td = env.dataOf(this.track.track_id);
      if (!td) return null;
      const tid = this.track.track_id, lane = this.track.lane;
      if (this.folds && y >= this.bandY) {
        return { band: { track: tid, hidden: this.hidden, expanded: this.expanded } };
      }
      const row = Math.floor(y / ROW_H), t = ts.nsAt(x), slop = ts.nsPerPx * 2;
      const s = td.slices, sf = s && (s.fold || s.depth);
      if (this.pyFolded && row === 0) return { band: { track: tid, action: "openPython", python: this.python, frame: this.frameAt(s, t) } };
      let best = null;
      if (s) for (let i = 0; i < s.ts.length; i++) {
        if (this.row(s.depth[i], sf[i]) !== row) continue;
        if (t >= s.ts[i] - slop && t <= s.ts[i] + s.dur[i] + slop) {
          const d = t < s.ts[i] ? s.ts[i] - t : t > s.ts[i] + s.dur[i] ? t - s.ts[i] - s.dur[i] : 0;
          if (!best || d < best.dist || (d === best.dist && s.dur[i] < best.dur)) {
            best = { id: s.id[i], name: env.labels.names[s.name[i]], ts: s.ts[i], dur: s.dur[i], depth: s.depth[i], row: row, track: tid, lane: lane, dist: d };
          }
        }
      }
      if (best) return { slice: best };
      const m = td.merged, mf = m && (m.fold || m.depth);
      if (m) for (let i = 0; i < m.ts.length; i++) {
        if (this.row(m.depth[i], mf[i]) === row && t >= m.ts[i] - slop && t <= m.ts[i] + m.dur[i] + slop) {
          return { merged: { count: m.count[i], busy: m.busy_ns[i], ts: m.ts[i], dur: m.dur[i], depth: m.depth[i], row: row, track: tid,
            lane: lane, name: env.labels.names[m.name[i]] } };
        }
      }
      return null;
    }
    /** The innermost Python frame of window slices `s` at time `t`, or "". */
    frameAt(s, t) {
      let best = -1;
      if (s && s.fold) for (let i = 0; i < s.ts.length; i++) {
        if (s.fold[i] < 0 && t >= s.ts[i] && t <= s.ts[i] + s.dur[i] && (best < 0 || s.fold[i] < s.fold[best])) best = i;
      }
      return best < 0 ? "" : this.env.labels.names[s.name[best]];
    }
    tooltip(hit) {
      const a = hit.band && hit.band.action;
      if (a === "openPython") {
        return { name: "Python stack: " + hit.band.python + " levels, folded", lines: hit.band.frame ? [hit.band.frame] : [],
          meta: "click to show the frames of this thread" };
      }
      if (hit.band) {
        return hit.band.expanded ? { name: "fold " + hit.band.hidden + " levels", meta: "click to show the top levels only" }
          : { name: "+" + hit.band.hidden + " deeper levels", meta: "click to show every level of this track" };
      }
      if (hit.slice) {
        const v = hit.slice;
        return { name: v.name, meta: TE.fmtNs(v.dur) + " · " + v.lane + " · at " + TE.fmtNs(v.ts) };
      }
      const v = hit.merged;
      return { name: v.count + " events (longest: " + v.name + ")",
        meta: "busy " + TE.fmtNs(v.busy) + " of " + TE.fmtNs(v.dur) + " · " + v.lane + " · click to zoom" };
    }
    /** The slices drawn at least `minPx` wide, in canvas x and row-relative y (the public test API). */
    visible(minPx) {
      const env = this.env, ts = env.ts, td = env.dataOf(this.track.track_id), out = [];
      const s = td && td.slices, fold = s && (s.fold || s.depth);
      if (s) for (let i = 0; i < s.id.length; i++) {
        const row = this.row(s.depth[i], fold[i]);
        if (row >= this.levels) continue;
        const x0 = Math.max(ts.xOf(s.ts[i]), ts.left + 1), x1 = Math.min(ts.xOf(s.ts[i] + s.dur[i]), ts.right - 2);
        if (x1 - x0 >= minPx) {
          out.push({ id: s.id[i], name: env.labels.names[s.name[i]], x0: x0, x1: x1, y: row * ROW_H + 8, row: row,
            python: this.pyFolded && fold[i] < 0 });
        }
      }
      return out;
    }
  }

  /** Instant events as small diamonds, one per pixel column (the server merges the rest). */
  class InstantTrack extends SliceTrack {
    render(ctx, ts, data) {
      const inst = data.instants;
      if (!inst) return;
      const cy = ROW_H / 2, s = 4;
      for (let i = 0; i < inst.ts.length; i++) {
        const x = ts.xOf(inst.ts[i]);
        ctx.fillStyle = TE.colorFor(inst.name[i]);
        ctx.beginPath(); ctx.moveTo(x, cy - s); ctx.lineTo(x + s, cy); ctx.lineTo(x, cy + s); ctx.lineTo(x - s, cy);
        ctx.closePath(); ctx.fill();
      }
    }
    /** The instant nearest to x, within a few pixels. */
    hitTest(x) {
      const ts = this.env.ts, td = this.env.dataOf(this.track.track_id), inst = td && td.instants;
      if (!inst) return null;
      const t = ts.nsAt(x);
      let best = -1, bestD = ts.nsPerPx * 5;
      for (let k = 0; k < inst.ts.length; k++) {
        const d = Math.abs(inst.ts[k] - t);
        if (d <= bestD) { best = k; bestD = d; }
      }
      if (best < 0) return null;
      const n = inst.count[best];
      return { point: { title: inst.name[best] + (n > 1 ? " (+" + (n - 1) + " more here)" : ""), ts: inst.ts[best], lane: this.track.label } };
    }
    tooltip(hit) { return { name: hit.point.title, meta: hit.point.lane + " · at " + TE.fmtNs(hit.point.ts) }; }
    visible() { return []; }
  }

  /** A counter as a step area chart from zero (or its minimum, when negative) to its maximum. */
  class CounterTrack extends InstantTrack {
    constructor(track, env) { super(track, env); this.height = COUNTER_H; }
    static range(c) {
      let max = 0, min = 0;
      for (let i = 0; i < c.value.length; i++) { if (c.value[i] > max) max = c.value[i]; if (c.value[i] < min) min = c.value[i]; }
      return [min, max];
    }
    render(ctx, ts, data) {
      const c = data.counter;
      if (!c || !c.ts.length) return;
      const [min, max] = CounterTrack.range(c);
      const range = max - min || 1, h = this.height - 4, base = 2 + h;
      ctx.beginPath();
      ctx.moveTo(ts.xOf(c.ts[0]), base);
      let prevY = base;
      for (let i = 0; i < c.ts.length; i++) {
        const x = ts.xOf(c.ts[i]);
        const yy = base - ((c.value[i] - min) / range) * h;
        ctx.lineTo(x, prevY); ctx.lineTo(x, yy); prevY = yy;  // step chart: a counter holds its value
      }
      ctx.lineTo(ts.right, prevY); ctx.lineTo(ts.right, base); ctx.closePath();
      ctx.fillStyle = TE.THEME.timeline.counter_fill; ctx.fill();
      ctx.strokeStyle = TE.LANE_COLORS.counter; ctx.lineWidth = 1; ctx.stroke();
    }
    /** In the gutter, under the label: the maximum the chart is scaled to. */
    renderGutter(ctx, data) {
      const c = data && data.counter;
      if (!c || !c.ts.length) return;
      const max = CounterTrack.range(c)[1];
      ctx.fillStyle = TE.THEME.timeline.muted;
      ctx.fillText("max " + (Math.abs(max) >= 1e4 ? max.toExponential(2) : +max.toFixed(2)), 14, this.height - 8);
    }
    /** The value in force at x. */
    hitTest(x) {
      const td = this.env.dataOf(this.track.track_id), c = td && td.counter;
      if (!c) return null;
      const t = this.env.ts.nsAt(x);
      let i = -1;
      for (let k = 0; k < c.ts.length && c.ts[k] <= t; k++) i = k;
      return i < 0 ? null : { point: { title: this.track.label + ": " + (+c.value[i].toPrecision(6)), ts: c.ts[i], lane: "counter" } };
    }
  }

  TE.TRACK_KINDS = { slice: SliceTrack, instant: InstantTrack, counter: CounterTrack };
  /** The renderer of `track`: by its kind, slices for any kind without its own. */
  TE.makeTrack = (track, env, opts) => new (TE.TRACK_KINDS[track.kind] || SliceTrack)(track, env, opts);
  TE.levelsOf = levelsOf;
  TE.BAND_H = BAND_H;
  TE.TRACK_ROW_H = ROW_H;
  TE.NameTable = NameTable;
  TE.shortName = shortName;
})();
