/* The timeline: a canvas renderer over level-of-detail windows.

   Data comes from a source object (sources.js): ApiSource (the explorer's REST API) or SnapshotSource
   (a LOD snapshot embedded in the offline report). The details, range and search panels are in
   panels.js. Panning and zooming redraw at once from the cached
   window at the new transform; a debounced refetch follows when the cache no longer covers the
   view or its resolution is too coarse. All times are relative ns (offsets from the run origin). */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const LANE_ORDER = ["framework", "runtime", "hardware", "counter", "other"];
  const RULER_H = 26, GUTTER = 230, ROW_H = 17, HEADER_H = 22, COUNTER_H = 38, TRACK_GAP = 5;
  const MIN_SPAN_NS = 200;
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const CHAR_W = 6.1;
  const GROUPINGS = ["lane", "device", "process", "thread", "instance"];


  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  /** Tick label: the unit follows the magnitude of the window, decimals follow the tick step. */
  function rulerLabel(ns, step, extent) {
    const units = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
    const mag = Math.max(Math.abs(extent || ns), step);
    for (const [scale, unit] of units) {
      if (mag >= scale || scale === 1) {
        const decimals = Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9));
        return (ns / scale).toFixed(Math.min(decimals, 6)) + " " + unit;
      }
    }
    return String(ns);
  }
  TE.rulerLabel = rulerLabel;
  TE.niceStep = niceStep;

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
  TE.shortName = shortName;

  function groupKey(track, mode) {
    switch (mode) {
      case "device": return track.device || (track.lane === "counter" ? "counters" : "host");
      case "process": return track.process || "(no process)";
      case "thread": return (track.process || "?") + " / " + (track.thread || track.device || track.label);
      case "instance": return track.instance || "(local)";
      default: return track.lane;
    }
  }

  // ---- the timeline widget ----------------------------------------------------------------
  class Timeline {
    constructor(container, source, opts) {
      this.container = container;
      this.source = source;
      this.opts = Object.assign({ spanNs: 0, urlState: true }, opts || {});
      this.spanNs = Math.max(1, this.opts.spanNs);
      this.start = 0;
      this.end = this.spanNs;
      this.grouping = "lane";
      this.collapsed = new Set();
      this.tracks = [];
      this.rows = [];
      this.data = null;
      this.names = [];
      this.nameColors = [];
      this.trackData = new Map();
      this.selected = null;      // event details
      this.chainPos = [];
      this.query = "";
      this.matches = [];
      this.matchIdx = -1;
      this.matchIds = new Set();
      this.range = null;         // [start, end] of a box selection
      this.drawPending = false;
      this.fetchSeq = 0;
      this.mouse = null;
      this._build();
    }

    // -- DOM ---------------------------------------------------------------------------------
    _build() {
      const el = TE.el, c = this.container;
      c.classList.add("tl");
      this.groupSel = el("select", { "aria-label": "grouping", id: "tl-group" },
        ...GROUPINGS.map((g) => el("option", { value: g }, "group: " + g)));
      this.searchBox = el("input", { type: "search", id: "tl-search", placeholder: "search names (Enter / Shift+Enter)", size: 30 });
      this.regexBox = el("input", { type: "checkbox", id: "tl-regex" });
      this.argsBox = el("input", { type: "checkbox", id: "tl-args" });
      const searchOpts = el("span", { class: "search-opts" },
        el("label", { title: "the query is a regular expression" }, this.regexBox, ".*"),
        el("label", { title: "search args as well as names" }, this.argsBox, "args"));
      this.matchInfo = el("span", { class: "info", id: "tl-matches" });
      this.winInfo = el("span", { class: "info", id: "tl-window" });
      const reset = el("button", { class: "small", id: "tl-reset", title: "show the whole run", onclick: () => this.setWindow(0, this.spanNs) }, "reset zoom");
      const legend = el("span", { class: "legend" }, ...["framework", "runtime", "hardware", "counter"].map((l) =>
        el("span", null, el("span", { class: "lane-dot", style: "background:" + TE.LANE_COLORS[l] }), l)));
      this.toolbar = el("div", { class: "tl-toolbar" }, this.groupSel, this.searchBox, searchOpts,
        el("button", { class: "small", title: "previous match", onclick: () => this.jump(-1) }, "◀"),
        el("button", { class: "small", title: "next match", onclick: () => this.jump(1) }, "▶"),
        this.matchInfo, el("span", { class: "sep" }), reset, this.winInfo, el("span", { class: "spacer" }), legend,
        el("span", { class: "hint", title: "wheel or W/S: zoom · drag or A/D: pan · shift+wheel: scroll tracks · shift+drag: measure a range · click: details · /: search · Esc: clear" }, "W/S zoom · A/D pan · shift+drag measure"));
      this.spacer = el("div", { class: "tl-spacer" });
      this.scroll = el("div", { class: "tl-scroll" }, this.spacer);
      this.canvas = el("canvas", { class: "tl-canvas", tabindex: "0", id: "tl-canvas" });
      this.tip = el("div", { class: "tl-tip", id: "tl-tip" });
      this.wrap = el("div", { class: "tl-canvas-wrap" }, this.scroll, this.canvas, this.tip);
      this.rangePanel = el("div", { class: "tl-range", id: "tl-range" });
      this.side = el("aside", { class: "tl-side", id: "tl-details" });
      c.append(this.toolbar, el("div", { class: "tl-body" }, el("div", { class: "tl-main" }, this.wrap, this.rangePanel), this.side));
      this.ctx = this.canvas.getContext("2d");

      this.groupSel.addEventListener("change", () => { this.grouping = this.groupSel.value; this.relayout(); this.saveUrl(); });
      for (const box of [this.regexBox, this.argsBox]) {
        box.addEventListener("change", () => { this.matchesLoaded = false; this.search(this.searchBox.value.trim(), 0); });
      }
      this.searchBox.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); this.search(this.searchBox.value.trim(), e.shiftKey ? -1 : 1); }
        if (e.key === "Escape") this.searchBox.blur();
      });
      this.scroll.addEventListener("scroll", () => this.requestDraw());
      this.canvas.addEventListener("wheel", (e) => this._onWheel(e), { passive: false });
      this.canvas.addEventListener("mousedown", (e) => this._onDown(e));
      window.addEventListener("mousemove", (e) => this._onMove(e));
      window.addEventListener("mouseup", (e) => this._onUp(e));
      this.canvas.addEventListener("mouseleave", () => { this.tip.style.display = "none"; this.hover = null; this.requestDraw(); });
      this.held = new Map();
      document.addEventListener("keydown", (e) => this._onKey(e));
      document.addEventListener("keyup", (e) => this.held.delete(e.key.toLowerCase()));
      window.addEventListener("blur", () => this.held.clear());
      new ResizeObserver(() => this.resize()).observe(this.wrap);
    }

    async start_() {
      if (this.opts.urlState) this.loadUrl();
      this.groupSel.value = this.grouping;
      this.resize();
      const t = await this.source.tracks();
      this.tracks = t.tracks.filter((x) => x.count > 0 || x.kind === "counter");
      this.relayout();
      await this.fetchWindow(true);
      if (this.pendingSel !== undefined) await this.select(this.pendingSel, false);
      if (this.query) { this.searchBox.value = this.query; await this.search(this.query, 0); }
    }

    resize() {
      const dpr = window.devicePixelRatio || 1;
      const w = this.scroll.clientWidth, h = this.wrap.clientHeight;
      if (!w || !h) return;
      this.width = w; this.height = h; this.dpr = dpr;
      this.canvas.width = Math.round(w * dpr); this.canvas.height = Math.round(h * dpr);
      this.canvas.style.width = w + "px"; this.canvas.style.height = h + "px";
      this.requestDraw();
      this.scheduleFetch();
    }

    // -- layout --------------------------------------------------------------------------------
    relayout() {
      const groups = new Map();
      const laneRank = (l) => { const i = LANE_ORDER.indexOf(l); return i < 0 ? 99 : i; };
      const sorted = this.tracks.slice().sort((a, b) => (laneRank(a.lane) - laneRank(b.lane)) || ((a.sort_key || 0) - (b.sort_key || 0)) || (a.track_id - b.track_id));
      for (const t of sorted) {
        const k = groupKey(t, this.grouping);
        if (!groups.has(k)) groups.set(k, []);
        groups.get(k).push(t);
      }
      let keys = Array.from(groups.keys());
      if (this.grouping === "lane") keys.sort((a, b) => laneRank(a) - laneRank(b));
      const rows = [];
      let y = 0;
      for (const k of keys) {
        const list = groups.get(k);
        const collapsed = this.collapsed.has(this.grouping + ":" + k);
        rows.push({ kind: "header", key: k, y: y, h: HEADER_H, collapsed: collapsed, n: list.length,
          lane: this.grouping === "lane" ? k : null });
        y += HEADER_H;
        if (collapsed) continue;
        for (const t of list) {
          const h = t.kind === "counter" ? COUNTER_H : (Math.max(0, t.max_depth || 0) + 1) * ROW_H;
          rows.push({ kind: "track", track: t, y: y + 2, h: h });
          y += h + TRACK_GAP;
        }
      }
      this.rows = rows;
      this.contentH = y + 8;
      this.spacer.style.height = (RULER_H + this.contentH) + "px";
      this.rowOfTrack = new Map(rows.filter((r) => r.kind === "track").map((r) => [r.track.track_id, r]));
      this.requestDraw();
    }

    // -- transform -----------------------------------------------------------------------------
    get plotW() { return Math.max(10, this.width - GUTTER); }
    get nsPerPx() { return (this.end - this.start) / this.plotW; }
    xOf(ns) { return GUTTER + (ns - this.start) / this.nsPerPx; }
    nsAt(x) { return this.start + (x - GUTTER) * this.nsPerPx; }

    setWindow(start, end, quiet) {
      let span = Math.max(MIN_SPAN_NS, end - start);
      const maxSpan = this.spanNs * 1.1;
      if (span > maxSpan) { const mid = (start + end) / 2; span = maxSpan; start = mid - span / 2; }
      const lo = -this.spanNs * 0.05, hi = this.spanNs * 1.05;
      if (start < lo) start = lo;
      if (start + span > hi) start = hi - span;
      this.start = start; this.end = start + span;
      this.requestDraw();
      this.scheduleFetch();
      if (!quiet) this.saveUrl();
    }
    zoomAt(factor, x) {
      const anchor = this.nsAt(x === undefined ? GUTTER + this.plotW / 2 : x);
      this.setWindow(anchor - (anchor - this.start) * factor, anchor + (this.end - anchor) * factor);
    }
    pan(ns) { this.setWindow(this.start + ns, this.end + ns); }

    // -- fetching ------------------------------------------------------------------------------
    covered() {
      const d = this.data;
      if (!d) return false;
      if (!this.source.live) return true;
      const vis0 = Math.max(0, this.start), vis1 = Math.min(this.spanNs, this.end);
      return d.start_ns <= vis0 && d.end_ns >= vis1 && d.ns_per_px <= this.nsPerPx * 1.6 && d.ns_per_px >= this.nsPerPx / 4;
    }
    /** Debounced refetch with a max wait, so detail also arrives during a long continuous zoom or pan;
        one request at a time (a newer view waits for the one in flight, then fetches if still needed). */
    scheduleFetch() {
      if (!this.tracks.length || this.covered()) return;
      if (this.inflight) { this.dirty = true; return; }
      clearTimeout(this.fetchTimer);
      const now = performance.now();
      if (!this.pendingSince) this.pendingSince = now;
      const wait = now - this.pendingSince > 180 ? 0 : 60;
      this.fetchTimer = setTimeout(() => this.fetchWindow(false), wait);
    }
    async fetchWindow(first) {
      this.pendingSince = 0;
      const span = this.end - this.start;
      const s = this.source.live ? Math.max(0, this.start - span * 0.5) : 0;
      const e = this.source.live ? Math.min(this.spanNs, this.end + span * 0.5) : this.spanNs;
      if (e <= s) return;
      const width = Math.max(100, Math.min(8000, Math.round(this.plotW * (e - s) / span)));
      const seq = ++this.fetchSeq;
      this.inflight = true;
      let w;
      try {
        w = await this.source.window(s, e, width);
      } catch (err) {
        this.showError(err);
        return;
      } finally {
        this.inflight = false;
      }
      this.setData(w);
      if (first) {
        this.drawNow();
        this.container.dataset.ready = "1";
        if (window.performance && performance.mark) performance.mark("tl-first-paint");
      }
      this.container.dataset.fetches = String(seq);
      if (this.dirty) { this.dirty = false; this.scheduleFetch(); }
    }
    setData(w) {
      this.data = w;
      this.names = w.names;
      this.nameColors = w.names.map((n) => TE.colorFor(n));
      this.nameWidths = [];
      this.shortNames = [];
      this.trackData = new Map(w.tracks.map((t) => [t.track_id, t]));
      this.requestDraw();
    }
    showError(err) {
      this.winInfo.textContent = "error: " + err.message;
    }

    // -- drawing -------------------------------------------------------------------------------
    requestDraw() {
      if (this.drawPending) return;
      this.drawPending = true;
      requestAnimationFrame(() => { this.drawPending = false; this.drawNow(); });
    }
    drawNow() {
      const ctx = this.ctx, W = this.width, H = this.height;
      if (!W || !H) return;
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      ctx.font = FONT;
      ctx.textBaseline = "middle";
      const top = this.scroll.scrollTop;
      const npp = this.nsPerPx, x0 = this.start;
      this.drawGrid(ctx, W, H);
      for (const r of this.rows) {
        const y = RULER_H + r.y - top;
        if (y + r.h < RULER_H || y > H) continue;
        if (r.kind === "header") this.drawHeader(ctx, r, y, W);
        else if (r.track.kind === "counter") this.drawCounter(ctx, r, y, W, npp, x0);
        else if (r.track.kind === "instant") this.drawInstants(ctx, r, y, W, npp, x0);
        else this.drawTrack(ctx, r, y, W, npp, x0);
      }
      this.drawChain(ctx, top);
      this.drawRange(ctx, H);
      this.drawRuler(ctx, W);
      this.winInfo.textContent = TE.fmtNs(Math.max(0, this.start)) + " – " + TE.fmtNs(this.end) + "  (" + TE.fmtNs(this.end - this.start) + ")";
    }
    drawGrid(ctx, W, H) {
      const step = niceStep(this.nsPerPx * 110);
      ctx.fillStyle = "#f0f2f4";
      for (let t = Math.ceil(this.start / step) * step; t <= this.end; t += step) {
        const x = Math.round(this.xOf(t));
        ctx.fillRect(x, RULER_H, 1, H - RULER_H);
      }
    }
    drawRuler(ctx, W) {
      ctx.fillStyle = "#f6f8fa"; ctx.fillRect(0, 0, W, RULER_H);
      ctx.fillStyle = "#d0d7de"; ctx.fillRect(0, RULER_H - 1, W, 1);
      const step = niceStep(this.nsPerPx * 110);
      ctx.fillStyle = "#57606a";
      ctx.textBaseline = "middle";
      for (let t = Math.ceil(this.start / step) * step; t <= this.end; t += step) {
        const x = Math.round(this.xOf(t));
        if (x < GUTTER) continue;
        ctx.fillRect(x, RULER_H - 9, 1, 8);
        ctx.fillText(rulerLabel(t, step, Math.max(Math.abs(this.start), Math.abs(this.end))), x + 3, 9);
        for (let k = 1; k < 5; k++) {
          const xm = Math.round(this.xOf(t + (step * k) / 5));
          if (xm > GUTTER) ctx.fillRect(xm, RULER_H - 4, 1, 3);
        }
      }
      if (this.matches.length) {  // where the search matches are, even when merged or off-screen rows
        ctx.fillStyle = "#bf8700";
        for (const m of this.matches) {
          const x = this.xOf(m.ts);
          if (x >= GUTTER && x <= W) ctx.fillRect(Math.round(x), RULER_H - 5, 2, 4);
        }
      }
      ctx.fillStyle = "#f6f8fa"; ctx.fillRect(0, 0, GUTTER, RULER_H);
      ctx.fillStyle = "#57606a";
      ctx.fillText("step " + TE.fmtNs(step, 0).replace(".000", ""), 10, RULER_H / 2);
      ctx.fillStyle = "#d0d7de"; ctx.fillRect(GUTTER - 1, 0, 1, RULER_H);
    }
    drawHeader(ctx, r, y, W) {
      ctx.fillStyle = "#eef1f4"; ctx.fillRect(0, y, W, r.h);
      ctx.fillStyle = "#d8dee4"; ctx.fillRect(0, y + r.h - 1, W, 1);
      if (r.lane) { ctx.fillStyle = TE.LANE_COLORS[r.lane] || "#9c9c9c"; ctx.fillRect(0, y, 4, r.h); }
      ctx.fillStyle = "#1f2328";
      ctx.font = "600 " + FONT;
      ctx.fillText((r.collapsed ? "▸ " : "▾ ") + r.key, 10, y + r.h / 2);
      ctx.font = FONT;
      ctx.fillStyle = "#656d76";
      ctx.fillText(r.n + (r.n === 1 ? " track" : " tracks"), 10 + ctx.measureText("▾ " + r.key).width + 14, y + r.h / 2);
    }
    drawLabel(ctx, r, y) {
      const t = r.track;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, y, GUTTER - 1, r.h);
      ctx.fillStyle = TE.LANE_COLORS[t.lane] || "#9c9c9c"; ctx.fillRect(6, y + 3, 3, Math.min(r.h, ROW_H) - 6);
      ctx.fillStyle = "#1f2328";
      let label = t.label || String(t.track_id);
      if (this.grouping !== "lane") label = t.lane + " · " + label;
      const maxChars = Math.floor((GUTTER - 22) / CHAR_W);
      if (label.length > maxChars) label = label.slice(0, maxChars - 1) + "…";
      ctx.fillText(label, 14, y + Math.min(r.h, ROW_H) / 2);
      ctx.fillStyle = "#eaeef2"; ctx.fillRect(GUTTER - 1, y, 1, r.h + TRACK_GAP);
    }
    drawTrack(ctx, r, y, W, npp, x0) {
      const td = this.trackData.get(r.track.track_id);
      if (td) {
        ctx.save();
        ctx.beginPath(); ctx.rect(GUTTER, y, W - GUTTER, r.h); ctx.clip();
        const colors = this.nameColors;
        const m = td.merged;
        if (m && m.ts.length) {
          for (let i = 0; i < m.ts.length; i++) {
            const xa = GUTTER + (m.ts[i] - x0) / npp;
            const w = Math.max(1, m.dur[i] / npp);
            if (xa + w < GUTTER || xa > W) continue;
            ctx.globalAlpha = 0.35 + 0.55 * Math.min(1, m.busy_ns[i] / Math.max(1, m.dur[i]));
            ctx.fillStyle = colors[m.name[i]] || "#999";
            ctx.fillRect(xa, y + m.depth[i] * ROW_H + 1, w, ROW_H - 2);
          }
          ctx.globalAlpha = 1;
        }
        const s = td.slices;
        if (s && s.ts.length) {
          const hl = this.matchIds, sel = this.selected ? this.selected.event.slice_id : -1;
          for (let i = 0; i < s.ts.length; i++) {
            let xa = GUTTER + (s.ts[i] - x0) / npp;
            let w = s.dur[i] / npp;
            if (xa + w < GUTTER || xa > W) continue;
            if (w < 1) w = 1;
            const yy = y + s.depth[i] * ROW_H + 1;
            const id = s.id[i];
            ctx.fillStyle = colors[s.name[i]] || "#999";
            ctx.fillRect(xa, yy, w >= 3 ? w - 1 : w, ROW_H - 2);  // a 1px seam keeps neighbours apart
            if (hl.size && hl.has(id)) {
              ctx.strokeStyle = "#bf8700"; ctx.lineWidth = 2;
              ctx.strokeRect(xa + 1, yy + 1, Math.max(1, w - 2), ROW_H - 4);
            }
            if (id === sel) {
              ctx.strokeStyle = "#0a0a0a"; ctx.lineWidth = 2;
              ctx.strokeRect(xa + 1, yy + 1, Math.max(1, w - 2), ROW_H - 4);
            }
            if (w > 28) {
              if (xa < GUTTER) { w -= GUTTER - xa; xa = GUTTER; }
              const label = this.fitLabel(ctx, s.name[i], w - 6);
              if (label) {
                ctx.fillStyle = "#111";
                ctx.fillText(label, xa + 3, yy + ROW_H / 2 - 0.5);
              }
            }
          }
        }
        if (this.selected && this.selected.event.track_id === r.track.track_id) this.drawSelectedBox(ctx, y, npp, x0);
        if (this.hover && this.hover.track === r.track.track_id) {
          ctx.strokeStyle = "rgba(9,105,218,.9)"; ctx.lineWidth = 1;
          ctx.strokeRect(GUTTER + (this.hover.ts - x0) / npp + 0.5, y + this.hover.depth * ROW_H + 0.5, Math.max(1, this.hover.dur / npp), ROW_H - 1);
        }
        ctx.restore();
      }
      this.drawLabel(ctx, r, y);
    }
    /** The name (or its head and an ellipsis) that fits in `room` px; widths measured once per name. */
    fitLabel(ctx, code, room) {
      const name = this.names[code];
      let full = this.nameWidths[code];
      if (full === undefined) full = this.nameWidths[code] = ctx.measureText(name).width;
      if (full <= room) return name;
      // "aten::layer_norm" -> "layer_norm", a C++ kernel -> its bare name, before cutting
      let short = this.shortNames[code];
      if (short === undefined) short = this.shortNames[code] = shortName(name);
      const w = short === name ? full : ctx.measureText(short).width;
      if (w <= room) return short;
      const chars = Math.floor(((room - 8) / w) * short.length);
      return chars >= 2 ? short.slice(0, chars) + "…" : "";
    }
    drawSelectedBox(ctx, y, npp, x0) {
      const e = this.selected.event;
      const xa = GUTTER + (e.ts_rel_ns - x0) / npp, w = Math.max(2, e.dur_ns / npp);
      ctx.strokeStyle = "#0a0a0a"; ctx.lineWidth = 2;
      ctx.strokeRect(xa, y + (e.depth || 0) * ROW_H + 1, w, ROW_H - 2);
    }
    /** Instant events as small diamonds, one per pixel column (the server merges the rest). */
    drawInstants(ctx, r, y, W, npp, x0) {
      const td = this.trackData.get(r.track.track_id);
      const inst = td && td.instants;
      if (inst) {
        ctx.save();
        ctx.beginPath(); ctx.rect(GUTTER, y, W - GUTTER, r.h); ctx.clip();
        const cy = y + ROW_H / 2, s = 4;
        for (let i = 0; i < inst.ts.length; i++) {
          const x = GUTTER + (inst.ts[i] - x0) / npp;
          ctx.fillStyle = TE.colorFor(inst.name[i]);
          ctx.beginPath(); ctx.moveTo(x, cy - s); ctx.lineTo(x + s, cy); ctx.lineTo(x, cy + s); ctx.lineTo(x - s, cy);
          ctx.closePath(); ctx.fill();
        }
        ctx.restore();
      }
      this.drawLabel(ctx, r, y);
    }
    /** A counter as a step area chart from zero (or its minimum, when negative) to its maximum. */
    drawCounter(ctx, r, y, W, npp, x0) {
      const td = this.trackData.get(r.track.track_id);
      const c = td && td.counter && td.counter.ts.length ? td.counter : null;
      let max = 0, min = 0;
      if (c) {
        for (let i = 0; i < c.value.length; i++) { if (c.value[i] > max) max = c.value[i]; if (c.value[i] < min) min = c.value[i]; }
        const range = max - min || 1, h = r.h - 4, base = y + 2 + h;
        ctx.save();
        ctx.beginPath(); ctx.rect(GUTTER, y, W - GUTTER, r.h); ctx.clip();
        ctx.beginPath();
        ctx.moveTo(GUTTER + (c.ts[0] - x0) / npp, base);
        let prevY = base;
        for (let i = 0; i < c.ts.length; i++) {
          const x = GUTTER + (c.ts[i] - x0) / npp;
          const yy = base - ((c.value[i] - min) / range) * h;
          ctx.lineTo(x, prevY); ctx.lineTo(x, yy); prevY = yy;  // step chart: a counter holds its value
        }
        ctx.lineTo(W, prevY); ctx.lineTo(W, base); ctx.closePath();
        ctx.fillStyle = "rgba(176,122,161,.35)"; ctx.fill();
        ctx.strokeStyle = "#b07aa1"; ctx.lineWidth = 1; ctx.stroke();
        ctx.restore();
      }
      this.drawLabel(ctx, r, y);
      if (c) {
        ctx.fillStyle = "#656d76";
        ctx.fillText("max " + (Math.abs(max) >= 1e4 ? max.toExponential(2) : +max.toFixed(2)), 14, y + r.h - 8);
      }
    }
    chainBox(item) {
      const row = this.rowOfTrack && this.rowOfTrack.get(item.track_id);
      if (!row) return null;
      let depth = item.depth;
      if (depth === undefined) {
        depth = 0;
        const td = this.trackData.get(item.track_id);
        if (td && td.slices) { const i = td.slices.id.indexOf(item.slice_id); if (i >= 0) depth = td.slices.depth[i]; }
      }
      return { x: this.xOf(item.ts_rel_ns), w: Math.max(1, item.dur_ns / this.nsPerPx), y: row.y + depth * ROW_H, h: ROW_H };
    }
    drawChain(ctx, top) {
      if (!this.selected || !this.selected.chain || this.selected.chain.length < 2) return;
      const chain = this.selected.chain;
      ctx.save();
      ctx.beginPath(); ctx.rect(GUTTER, RULER_H, this.width - GUTTER, this.height - RULER_H); ctx.clip();
      for (let i = 1; i < chain.length; i++) {
        const a = this.chainBox(chain[i - 1]), b = this.chainBox(chain[i]);
        if (!a || !b) continue;
        const ax = a.x, ay = RULER_H + a.y - top + (b.y > a.y ? a.h : 0);
        const bx = b.x, by = RULER_H + b.y - top + (b.y > a.y ? 0 : b.h);
        ctx.strokeStyle = "#cf222e"; ctx.fillStyle = "#cf222e"; ctx.lineWidth = 1.5;
        ctx.beginPath(); ctx.moveTo(ax, ay);
        const my = (ay + by) / 2;
        ctx.bezierCurveTo(ax, my, bx, my, bx, by); ctx.stroke();
        const dir = by > ay ? 1 : -1;
        ctx.beginPath(); ctx.moveTo(bx, by); ctx.lineTo(bx - 4, by - 7 * dir); ctx.lineTo(bx + 4, by - 7 * dir); ctx.closePath(); ctx.fill();
        if (chain[i].gap_ns !== null && chain[i].gap_ns !== undefined) {
          const label = "+" + TE.fmtNs(chain[i].gap_ns, 1);
          const lx = (ax + bx) / 2 + 6, tw = ctx.measureText(label).width;
          ctx.fillStyle = "rgba(255,255,255,.9)"; ctx.fillRect(lx - 2, my - 8, tw + 4, 15);
          ctx.fillStyle = "#cf222e"; ctx.fillText(label, lx, my);
        }
      }
      ctx.restore();
    }
    drawRange(ctx, H) {
      const r = this.range || this.dragRange;
      if (!r) return;
      const xa = Math.max(GUTTER, this.xOf(Math.min(r[0], r[1]))), xb = Math.min(this.width, this.xOf(Math.max(r[0], r[1])));
      if (xb <= xa) return;
      ctx.fillStyle = "rgba(9,105,218,.10)"; ctx.fillRect(xa, RULER_H, xb - xa, H - RULER_H);
      ctx.fillStyle = "#0969da"; ctx.fillRect(xa, RULER_H, 1, H); ctx.fillRect(xb - 1, RULER_H, 1, H);
      const label = TE.fmtNs(Math.abs(r[1] - r[0]));
      const tw = ctx.measureText(label).width;
      const lx = Math.max(GUTTER + 2, (xa + xb) / 2 - tw / 2 - 6);
      ctx.fillStyle = "#0969da"; ctx.fillRect(lx, RULER_H + 4, tw + 12, 18);
      ctx.fillStyle = "#fff"; ctx.fillText(label, lx + 6, RULER_H + 13);
    }

    // -- hit testing ----------------------------------------------------------------------------
    hit(x, yCanvas) {
      const y = yCanvas - RULER_H + this.scroll.scrollTop;
      const row = this.rows.find((r) => y >= r.y && y < r.y + r.h);
      if (!row) return null;
      if (row.kind === "header") return { header: row };
      if (x < GUTTER) return { label: row };
      const tid = row.track.track_id, td = this.trackData.get(tid);
      if (!td) return null;
      if (row.track.kind === "counter" || row.track.kind === "instant") return this.hitPoint(row, td, this.nsAt(x));
      const depth = Math.floor((y - row.y) / ROW_H), t = this.nsAt(x), slop = this.nsPerPx * 2;
      const s = td.slices;
      let best = null;
      if (s) for (let i = 0; i < s.ts.length; i++) {
        if (s.depth[i] !== depth) continue;
        if (t >= s.ts[i] - slop && t <= s.ts[i] + s.dur[i] + slop) {
          const d = t < s.ts[i] ? s.ts[i] - t : t > s.ts[i] + s.dur[i] ? t - s.ts[i] - s.dur[i] : 0;
          if (!best || d < best.dist || (d === best.dist && s.dur[i] < best.dur)) {
            best = { id: s.id[i], name: this.names[s.name[i]], ts: s.ts[i], dur: s.dur[i], depth: depth, track: tid, lane: row.track.lane, dist: d };
          }
        }
      }
      if (best) return { slice: best };
      const m = td.merged;
      if (m) for (let i = 0; i < m.ts.length; i++) {
        if (m.depth[i] === depth && t >= m.ts[i] - slop && t <= m.ts[i] + m.dur[i] + slop) {
          return { merged: { count: m.count[i], busy: m.busy_ns[i], ts: m.ts[i], dur: m.dur[i], depth: depth, track: tid,
            lane: row.track.lane, name: this.names[m.name[i]] } };
        }
      }
      return null;
    }

    /** A counter's value in force at time t, or the instant nearest to t (within a few pixels). */
    hitPoint(row, td, t) {
      const label = row.track.label;
      if (td.counter) {
        const c = td.counter;
        let i = -1;
        for (let k = 0; k < c.ts.length && c.ts[k] <= t; k++) i = k;
        return i < 0 ? null : { point: { title: label + ": " + (+c.value[i].toPrecision(6)), ts: c.ts[i], lane: "counter" } };
      }
      const inst = td.instants;
      if (!inst) return null;
      let best = -1, bestD = this.nsPerPx * 5;
      for (let k = 0; k < inst.ts.length; k++) {
        const d = Math.abs(inst.ts[k] - t);
        if (d <= bestD) { best = k; bestD = d; }
      }
      if (best < 0) return null;
      const n = inst.count[best];
      return { point: { title: inst.name[best] + (n > 1 ? " (+" + (n - 1) + " more here)" : ""), ts: inst.ts[best], lane: label } };
    }

    // -- input ---------------------------------------------------------------------------------
    _pos(e) { const b = this.canvas.getBoundingClientRect(); return { x: e.clientX - b.left, y: e.clientY - b.top }; }
    _onWheel(e) {
      e.preventDefault();
      const p = this._pos(e);
      if (e.shiftKey && !e.deltaX) { this.scroll.scrollTop += e.deltaY; return; }
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) { this.pan(e.deltaX * this.nsPerPx); return; }
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
      this.zoomAt(Math.exp(e.deltaY * unit * 0.0025), Math.max(GUTTER, p.x));
    }
    _onDown(e) {
      if (e.button !== 0) return;
      this.canvas.focus({ preventScroll: true });
      const p = this._pos(e);
      this.drag = { x: p.x, y: p.y, start: this.start, end: this.end, top: this.scroll.scrollTop, moved: false, shift: e.shiftKey && p.x > GUTTER };
      if (this.drag.shift) this.dragRange = [this.nsAt(p.x), this.nsAt(p.x)];
      e.preventDefault();
    }
    _onMove(e) {
      const p = this._pos(e);
      this.mouse = p;
      const d = this.drag;
      if (d) {
        const dx = p.x - d.x, dy = p.y - d.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) d.moved = true;
        if (d.shift) { this.dragRange[1] = this.nsAt(Math.max(GUTTER, p.x)); this.requestDraw(); return; }
        if (d.moved) {
          this.canvas.classList.add("grab");
          const npp = (d.end - d.start) / this.plotW;
          this.setWindow(d.start - dx * npp, d.end - dx * npp, true);
          this.scroll.scrollTop = d.top - dy;
        }
        return;
      }
      if (p.x < 0 || p.y < 0 || p.x > this.width || p.y > this.height) return;
      this.showTip(p, this.hit(p.x, p.y));
    }
    _onUp(e) {
      const d = this.drag;
      if (!d) return;
      this.drag = null;
      this.canvas.classList.remove("grab");
      const p = this._pos(e);
      if (d.shift) {
        const r = this.dragRange; this.dragRange = null;
        if (d.moved && Math.abs(r[1] - r[0]) > 0) this.setRange(Math.min(r[0], r[1]), Math.max(r[0], r[1]));
        this.requestDraw();
        return;
      }
      if (d.moved) { this.saveUrl(); return; }
      const h = this.hit(p.x, p.y);
      if (h && h.header) {
        const k = this.grouping + ":" + h.header.key;
        if (this.collapsed.has(k)) this.collapsed.delete(k); else this.collapsed.add(k);
        this.relayout();
      } else if (h && h.slice) {
        this.select(h.slice.id, false);
      } else if (h && h.merged) {
        const m = h.merged; this.setWindow(m.ts - m.dur * 2, m.ts + m.dur * 3);
      } else if (!h || !h.label) {
        this.clearSelection();
      }
    }
    _onKey(e) {
      const tag = (e.target && e.target.tagName) || "";
      if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) return;
      const k = e.key.toLowerCase();
      if (k === "w" || k === "a" || k === "s" || k === "d") {
        e.preventDefault();
        if (!e.repeat) { this.keyStep(k, 1); this.held.set(k, performance.now()); this.keyLoop(); }
        return;
      }
      if (k === "escape") { this.clearSelection(); this.clearRange(); }
      else if (k === "/") this.searchBox.focus();
      else return;
      e.preventDefault();
    }
    /** One W/A/S/D move; `amount` 1 is a key press, fractions are the frames of a held key. */
    keyStep(k, amount) {
      const x = this.mouse && this.mouse.x > GUTTER && this.mouse.x < this.width ? this.mouse.x : undefined;
      const span = this.end - this.start;
      if (k === "w") this.zoomAt(Math.pow(0.8, amount), x);
      else if (k === "s") this.zoomAt(Math.pow(1.25, amount), x);
      else if (k === "a") this.pan(-span * 0.15 * amount);
      else if (k === "d") this.pan(span * 0.15 * amount);
    }
    /** Held keys move smoothly, frame by frame (like Perfetto), after a short delay. */
    keyLoop() {
      if (this.keyRaf) return;
      let last = performance.now();
      const tick = (now) => {
        if (!this.held.size) { this.keyRaf = 0; return; }
        const dt = Math.min(50, now - last);
        last = now;
        for (const [k, since] of this.held) if (now - since > 180) this.keyStep(k, dt / 60);
        this.keyRaf = requestAnimationFrame(tick);
      };
      this.keyRaf = requestAnimationFrame(tick);
    }
    showTip(p, h) {
      const tip = this.tip;
      const prev = this.hover;
      if (h && h.point) {  // counters and instants: a tip, no highlight box
        if (prev) { this.hover = null; this.requestDraw(); }
        tip.textContent = "";
        tip.append(TE.el("div", { class: "t-name" }, h.point.title),
          TE.el("div", { class: "t-meta" }, h.point.lane + " · at " + TE.fmtNs(h.point.ts)));
        this.placeTip(p);
        return;
      }
      this.hover = h && (h.slice || h.merged) ? (h.slice || h.merged) : null;
      const same = prev && this.hover && prev.track === this.hover.track && prev.ts === this.hover.ts && prev.depth === this.hover.depth;
      if (!same && (prev || this.hover)) this.requestDraw();
      if (!this.hover) { tip.style.display = "none"; return; }
      tip.textContent = "";
      const v = this.hover;
      if (h.slice) {
        tip.append(TE.el("div", { class: "t-name" }, v.name),
          TE.el("div", { class: "t-meta" }, TE.fmtNs(v.dur) + " · " + v.lane + " · at " + TE.fmtNs(v.ts)));
      } else {
        tip.append(TE.el("div", { class: "t-name" }, v.count + " events (longest: " + v.name + ")"),
          TE.el("div", { class: "t-meta" }, "busy " + TE.fmtNs(v.busy) + " of " + TE.fmtNs(v.dur) + " · " + v.lane + " · click to zoom"));
      }
      this.placeTip(p);
    }
    placeTip(p) {
      const tip = this.tip;
      tip.style.display = "block";
      const left = Math.min(p.x + 14, this.width - tip.offsetWidth - 4);
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = (p.y + 18 + tip.offsetHeight > this.height ? p.y - tip.offsetHeight - 8 : p.y + 18) + "px";
    }

    // -- URL state -------------------------------------------------------------------------------
    loadUrl() {
      const p = new URLSearchParams(location.search);
      const s = parseFloat(p.get("start")), e = parseFloat(p.get("end"));
      if (Number.isFinite(s) && Number.isFinite(e) && e > s) { this.start = s; this.end = e; }
      if (GROUPINGS.includes(p.get("group"))) this.grouping = p.get("group");
      const sel = parseInt(p.get("sel"), 10);
      if (Number.isFinite(sel)) this.pendingSel = sel;
      this.query = p.get("q") || "";
    }
    saveUrl() {
      if (!this.opts.urlState) return;
      clearTimeout(this.urlTimer);
      this.urlTimer = setTimeout(() => {
        const p = new URLSearchParams(location.search);
        p.set("start", String(Math.round(this.start))); p.set("end", String(Math.round(this.end)));
        if (this.grouping !== "lane") p.set("group", this.grouping); else p.delete("group");
        if (this.selected) p.set("sel", String(this.selected.event.slice_id)); else p.delete("sel");
        if (this.query) p.set("q", this.query); else p.delete("q");
        history.replaceState(null, "", location.pathname + "?" + p.toString());
      }, 120);
    }
  }

  TE.Timeline = Timeline;
  TE.TL = { RULER_H: RULER_H, ROW_H: ROW_H, GUTTER: GUTTER };
  /** Mount a timeline into `container`; returns it once its first window is painted. */
  TE.mountTimeline = async function (container, source, opts) {
    const tl = new Timeline(container, source, opts);
    window.__timeline = tl;
    await tl.start_();
    return tl;
  };
})();
