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

  const outline = (ctx, color, x, y, w, h) => { ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.strokeRect(x, y, w, h); };

  /** The levels (depths) a slice track has. */
  const levelsOf = (track) => Math.max(0, track.max_depth || 0) + 1;

  /** Nested slices, one row per depth; merged (per-pixel) slices drawn faded by how busy they are. With
      `opts.levels` below the track's depth, the levels from there down fold into one "+k levels" band
      that shows where they are busy; `opts.expanded` shows every level with the band (to fold) below. */
  class SliceTrack {
    constructor(track, env, opts) {
      this.track = track;
      this.env = env;
      const all = levelsOf(track), cap = opts && opts.levels ? opts.levels : all;
      this.folds = cap < all;
      this.expanded = this.folds && !!(opts && opts.expanded);
      this.levels = this.folds && !this.expanded ? cap : all;
      this.cap = Math.min(cap, all);
      this.hidden = all - this.cap;  // the levels the band stands for
      this.bandY = this.levels * ROW_H;
      this.height = this.bandY + (this.folds ? BAND_H : 0);
    }
    /** The row a slice at `depth` is drawn in: its own, or the band when folded away. */
    yOf(depth) { return Math.min(depth || 0, this.levels) * ROW_H; }
    render(ctx, ts, data) {
      if (data.merged && data.merged.ts.length) this.renderMerged(ctx, ts, data.merged);
      if (data.slices && data.slices.ts.length) this.renderSlices(ctx, ts, data.slices);
      if (this.folds) this.renderBand(ctx, ts, data);
      const env = this.env, sel = env.selected && env.selected.event, hover = env.hover;
      if (sel && sel.track_id === this.track.track_id) {
        outline(ctx, TE.THEME.timeline.selected, ts.xOf(sel.ts_rel_ns), this.yOf(sel.depth) + 1, ts.px(sel.dur_ns, 2), ROW_H - 2);
      }
      if (hover && hover.track === this.track.track_id) {
        ctx.strokeStyle = TE.THEME.timeline.hover; ctx.lineWidth = 1;
        ctx.strokeRect(ts.xOf(hover.ts) + 0.5, this.yOf(hover.depth) + 0.5, ts.px(hover.dur, 1), ROW_H - 1);
      }
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
          if (part.depth[i] < this.cap) continue;
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
      for (let i = 0; i < m.ts.length; i++) {
        if (m.depth[i] >= this.levels) continue;
        const xa = left + (m.ts[i] - x0) / npp;
        const w = Math.max(1, m.dur[i] / npp);
        if (xa + w < left || xa > right) continue;
        ctx.globalAlpha = 0.35 + 0.55 * Math.min(1, m.busy_ns[i] / Math.max(1, m.dur[i]));
        ctx.fillStyle = colors[m.name[i]] || unknown;
        ctx.fillRect(xa, m.depth[i] * ROW_H + 1, w, ROW_H - 2);
      }
      ctx.globalAlpha = 1;
    }
    renderSlices(ctx, ts, s) {
      const env = this.env, c = TE.THEME.timeline, labels = env.labels, colors = labels.colors;
      const left = ts.left, right = ts.right, npp = ts.nsPerPx, x0 = ts.start;
      const hl = env.matchIds, sel = env.selected ? env.selected.event.slice_id : -1;
      for (let i = 0; i < s.ts.length; i++) {
        if (s.depth[i] >= this.levels) continue;
        let xa = left + (s.ts[i] - x0) / npp;
        let w = s.dur[i] / npp;
        if (xa + w < left || xa > right) continue;
        if (w < 1) w = 1;
        const yy = s.depth[i] * ROW_H + 1;
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
      if (this.folds && y >= this.bandY) return { band: { track: tid, hidden: this.hidden, expanded: this.expanded } };
      const depth = Math.floor(y / ROW_H), t = ts.nsAt(x), slop = ts.nsPerPx * 2;
      const s = td.slices;
      let best = null;
      if (s) for (let i = 0; i < s.ts.length; i++) {
        if (s.depth[i] !== depth) continue;
        if (t >= s.ts[i] - slop && t <= s.ts[i] + s.dur[i] + slop) {
          const d = t < s.ts[i] ? s.ts[i] - t : t > s.ts[i] + s.dur[i] ? t - s.ts[i] - s.dur[i] : 0;
          if (!best || d < best.dist || (d === best.dist && s.dur[i] < best.dur)) {
            best = { id: s.id[i], name: env.labels.names[s.name[i]], ts: s.ts[i], dur: s.dur[i], depth: depth, track: tid, lane: lane, dist: d };
          }
        }
      }
      if (best) return { slice: best };
      const m = td.merged;
      if (m) for (let i = 0; i < m.ts.length; i++) {
        if (m.depth[i] === depth && t >= m.ts[i] - slop && t <= m.ts[i] + m.dur[i] + slop) {
          return { merged: { count: m.count[i], busy: m.busy_ns[i], ts: m.ts[i], dur: m.dur[i], depth: depth, track: tid,
            lane: lane, name: env.labels.names[m.name[i]] } };
        }
      }
      return null;
    }
    tooltip(hit) {
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
      const s = td && td.slices;
      if (s) for (let i = 0; i < s.id.length; i++) {
        if (s.depth[i] >= this.levels) continue;
        const x0 = Math.max(ts.xOf(s.ts[i]), ts.left + 1), x1 = Math.min(ts.xOf(s.ts[i] + s.dur[i]), ts.right - 2);
        if (x1 - x0 >= minPx) out.push({ id: s.id[i], name: env.labels.names[s.name[i]], x0: x0, x1: x1, y: s.depth[i] * ROW_H + 8 });
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
