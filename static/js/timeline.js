/* The timeline: a canvas over level-of-detail windows, rows laid out per grouping, each row drawn and
   hit-tested by its track kind's renderer (tracks.js) against one shared time scale (timescale.js).

   Data comes from a source object (sources.js): ApiSource (the explorer's REST API) or SnapshotSource
   (a LOD snapshot embedded in the offline report). The details, range and search panels are objects
   in panels.js; mouse and keys are in timeline_input.js. Panning and zooming redraw at once from the
   cached window at the new transform; a debounced refetch follows when the cache no longer covers the
   view or its resolution is too coarse. All times are relative ns (offsets from the run origin).
   TE.timelineApi (timeline_api.js) is the small public API the browser tests and the benchmark use. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const RULER_H = 26, GUTTER = 230, ROW_H = TE.TRACK_ROW_H, HEADER_H = TE.lanes.HEADER_H, TRACK_GAP = TE.lanes.TRACK_GAP;
  const MINI_H = TE.lanes.MINI_H, TOP_H = MINI_H + RULER_H;  // the minimap, then the ruler, then the tracks
  const PIN_X = GUTTER - 20;  // a track label's pin toggle sits right of here
  const MIN_SPAN_NS = 200;
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const CHAR_W = 6.1;
  const GROUPINGS = ["lane", "rank", "device", "process", "thread", "instance"];
  // above this many tracks a window asks only for those in view (plus a viewport above and below) and draws the
  // rest from the server's per-lane summaries; below it, every track comes in each window (all fit its height)
  const VIEWPORT_TRACKS = 200, ALL_HEIGHT_PX = 20000;
  const TRACK_ROW_PX = 22;  // the server's height budget per track (lod_budget.TRACK_ROW_PX): a row and its gap

  // ---- the timeline widget ----------------------------------------------------------------
  class Timeline {
    constructor(container, source, opts) {
      this.container = container;
      this.source = source;
      this.opts = Object.assign({ spanNs: 0, urlState: true }, opts || {});
      this.spanNs = Math.max(1, this.opts.spanNs);
      // all the data (relative ns), profiler markers before or after the span included: zooming out reaches
      // it, the default window and "reset zoom" stay on the span (first to last real event)
      this.extentLo = Math.min(0, Number(this.opts.extentLo) || 0);
      this.extentHi = Math.max(this.spanNs, Number(this.opts.extentHi) || 0);
      this.start = 0;
      this.end = this.spanNs;
      this.gutter = GUTTER;
      this.grouping = "lane";
      this.collapsed = new Set();
      this.pinned = [];             // track ids drawn above the scrolled tracks, in pin order
      this.expanded = new Set();    // tracks showing every level (their "+k levels" band opened; URL `open`)
      this.pyOpen = new Set();      // with_stack tracks showing their Python frames (the Python band opened; URL `py`)
      this.pyFolds = new Map();     // with_stack tracks: id -> {py, ops} from the windows (tracks.js levelsOf)
      this.levelCap = Infinity;     // the level budget of the last layout (lanes.js levelBudget)
      this.highlight = null;        // [a, b] relative ns from the URL (hl_start, hl_end), drawn over every track
      this.pinH = 0;
      this.openGroups = new Set();  // device-track sub-groups shown (all closed at first)
      this.tracks = [];
      this.rows = [];
      this.data = null;
      this.labels = new TE.NameTable([]);
      this.trackData = new Map();
      this.summaries = new Map();   // lane -> the window's summary of the tracks it did not send (lod_budget)
      this.asked = new Set();       // the track ids the landed window asked for (viewport mode)
      this.viewportMode = false;
      this.summaryRows = false;     // lane grouping shows each lane's summary row (lanes.js layout)
      this.hover = null;
      this.drawPending = false;
      this.fetchSeq = 0;
      this._build();
      const tl = this;
      /** What every track renderer shares (Perfetto's TrackRenderContext): read once per frame. */
      this.env = {
        get ts() { return tl.timescale(); },
        get labels() { return tl.labels; },
        get matchIds() { return tl.searchPanel.ids; },
        get selected() { return tl.details.selected; },
        get hover() { return tl.hover; },
        dataOf: (id) => tl.trackData.get(id),
      };
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
        el("span", null, el("span", { class: "lane-dot", style: "background:" + TE.laneColor(l) }), l)));
      // device instructions coloured by opcode or by the PyTorch op they run for; shown for runs with device tracks
      this.deviceColorSel = el("select", { "aria-label": "device colour", id: "tl-device-color", hidden: "" },
        el("option", { value: "opcode" }, "device colour: opcode"), el("option", { value: "layer" }, "device colour: PyTorch op"));
      this.deviceColorSel.addEventListener("change", () => { this.deviceColor = this.deviceColorSel.value; this.fetchWindow(false); });
      this.toolbar = el("div", { class: "tl-toolbar" }, this.groupSel, this.deviceColorSel, this.searchBox, searchOpts,
        el("button", { class: "small", title: "previous match", onclick: () => this.jump(-1) }, "◀"),
        el("button", { class: "small", title: "next match", onclick: () => this.jump(1) }, "▶"),
        this.matchInfo, el("span", { class: "sep" }), reset, this.winInfo, el("span", { class: "spacer" }), legend,
        el("span", { class: "hint", title: "wheel or W/S: zoom · drag or A/D: pan · shift+wheel: scroll tracks · shift+drag: measure a range · click: details · /: search · Esc: clear" }, "W/S zoom · A/D pan · shift+drag measure"));
      if (this.opts.collectives && this.source.collectiveLinks) {  // overlays.js: collectives joined across ranks
        this.collectives = new TE.CollectivesOverlay(this);
        this.toolbar.insertBefore(this.collectives.label, this.searchBox);
      }
      this.spacer = el("div", { class: "tl-spacer" });
      this.scroll = el("div", { class: "tl-scroll" }, this.spacer);
      this.canvas = el("canvas", { class: "tl-canvas", tabindex: "0", id: "tl-canvas" });
      this.tip = el("div", { class: "tl-tip", id: "tl-tip" });
      this.wrap = el("div", { class: "tl-canvas-wrap" }, this.scroll, this.canvas, this.tip);
      this.rangePanel = el("div", { class: "tl-range", id: "tl-range" });
      this.side = el("aside", { class: "tl-side", id: "tl-details" });
      c.append(this.toolbar, el("div", { class: "tl-body" }, el("div", { class: "tl-main" }, this.wrap, this.rangePanel), this.side));
      this.ctx = this.canvas.getContext("2d");
      this.details = new TE.DetailsPanel(this, this.side);
      this.ranges = new TE.RangePanel(this, this.rangePanel);
      this.searchPanel = new TE.SearchPanel(this, this.matchInfo, this.regexBox, this.argsBox);
      this.input = new TE.TimelineInput(this);
      this.minimap = new TE.Minimap(this);
      this.gaps = new TE.GapEvidence(this);  // the largest device gaps' host evidence, loaded after the first paint

      this.groupSel.addEventListener("change", () => { this.grouping = this.groupSel.value; this.relayout(); this.saveUrl(); });
      for (const box of [this.regexBox, this.argsBox]) {
        box.addEventListener("change", () => { this.searchPanel.loaded = false; this.search(this.searchBox.value.trim(), 0); });
      }
      this.searchBox.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); this.search(this.searchBox.value.trim(), e.shiftKey ? -1 : 1); }
        if (e.key === "Escape") this.searchBox.blur();
      });
      this.scroll.addEventListener("scroll", () => { this.requestDraw(); if (this.viewportMode) this.scheduleFetch(); });
      new ResizeObserver(() => this.resize()).observe(this.wrap);
    }

    async start_() {
      if (this.opts.urlState) this.loadUrl();
      this.groupSel.value = this.grouping;
      this.resize();
      const t = await this.source.tracks();
      this.tracks = t.tracks.filter((x) => x.count > 0 || x.kind === "counter");
      // the listing stops at its limit (sources.js TRACKS_LIMIT): the headers say how many the run has
      this.tracksTotal = t.total > t.tracks.length ? t.total : 0;
      this.viewportMode = !!this.source.live && this.tracks.length > VIEWPORT_TRACKS;
      // lanes draw their "+N tracks not drawn" row when windows summarise tracks: viewport mode, or a bounded report
      this.summaryRows = this.viewportMode || !!this.source.summarised;
      // a run of several ranks opens grouped by rank, unless the link names a grouping
      if (new Set(this.tracks.filter((x) => x.rank >= 0).map((x) => x.rank)).size > 1) {
        this.defaultGrouping = "rank";
        if (!this.groupFromUrl) this.grouping = this.groupSel.value = "rank";
      }
      if (this.source.live && this.tracks.some((x) => x.device_profile)) this.deviceColorSel.hidden = false;
      this.relayout();
      if (TE.DeviceAxis && this.tracks.some((x) => x.device_profile)) {  // device_timeline.js (a report's too)
        this.deviceAxis = new TE.DeviceAxis(this);
        await this.deviceAxis.start();
      }
      await this.fetchWindow(true);
      this.gaps.load();  // not awaited: the first paint never waits for the breakdown
      const d = this.data;  // after the first paint; a first window of the whole run is the overview already
      await this.minimap.load(d && d.start_ns <= 0 && d.end_ns >= this.spanNs ? d : null);
      if (this.pendingSel !== undefined) await this.select(this.pendingSel, false);
      const q = this.searchPanel.query;
      if (q) { this.searchBox.value = q; await this.search(q, 0); }
    }

    resize() {
      const dpr = window.devicePixelRatio || 1;
      const w = this.scroll.clientWidth, h = this.wrap.clientHeight;
      if (!w || !h) return;
      this.width = w; this.height = h; this.dpr = dpr;
      this.canvas.width = Math.round(w * dpr); this.canvas.height = Math.round(h * dpr);
      this.canvas.style.width = w + "px"; this.canvas.style.height = h + "px";
      if (this.tracks.length && this.fitLevels() !== this.levelCap) this.relayout();  // the budget follows the height
      this.requestDraw();
      this.scheduleFetch();
    }

    // -- layout: header rows per group, one renderer per track row; pinned tracks above them all ----
    fitLevels() { return TE.lanes.fitLevels(this, (this.height || 1000) - TOP_H); }
    relayout() {
      const lay = TE.lanes.layout(this);
      this.rows = lay.rows; this.pinH = lay.pinH; this.contentH = lay.contentH; this.levelCap = lay.levelCap;
      this.spacer.style.height = (this.bodyTop + this.contentH) + "px";
      this.rowOfTrack = new Map(this.rows.filter((r) => r.kind === "track").map((r) => [r.track.track_id, r]));
      this.requestDraw();
    }
    stickyHeader() { return TE.lanes.stickyHeader(this.rows, this.scroll.scrollTop, this.bodyTop); }
    /** Where the scrolled rows start on the canvas: under the minimap, the ruler and the pinned tracks. */
    get bodyTop() { return TOP_H + this.pinH; }
    /** A row's top in canvas px. */
    rowTop(r) { return r.pinned ? TOP_H + r.y : this.bodyTop + r.y - this.scroll.scrollTop; }
    togglePin(tid) {
      const i = this.pinned.indexOf(tid);
      if (i >= 0) this.pinned.splice(i, 1); else this.pinned.push(tid);
      this.relayout();
      this.saveUrl();
    }
    toggleLevels(tid) {
      if (this.expanded.has(tid)) this.expanded.delete(tid); else this.expanded.add(tid);
      this.relayout();
      this.saveUrl();
    }
    /** A click on a track's band: the Python band opens the stack ("openPython"), the label of a with_stack track
        opens or folds it back into one row ("togglePython", the deeper levels folded again), the "+k levels" band
        shows or folds the deeper levels. */
    bandClick(band) {
      const tid = band.track, open = this.pyOpen.has(tid);
      if (band.action === "openPython" || (band.action === "togglePython" && !open)) this.pyOpen.add(tid);
      else if (band.action === "togglePython") { this.pyOpen.delete(tid); this.expanded.delete(tid); }
      else return this.toggleLevels(tid);
      this.relayout();
      this.saveUrl();
    }
    /** Show slice `id` where it is drawn: its track's fold opened when it sits in one (the Python band or the
        "+k levels" band), the rows scrolled to it. Done once the slice is in a landed window (setData). */
    reveal(id) { this.revealId = id; this.tryReveal(); }
    tryReveal() {
      if (this.revealId === undefined || this.revealId === null) return;
      const sel = this.details.selected;
      if (!sel || sel.event.slice_id !== this.revealId) { this.revealId = null; return; }  // selected another since
      for (const [tid, td] of this.trackData) {
        const s = td.slices, i = s ? s.id.indexOf(this.revealId) : -1;
        if (i < 0) continue;
        this.revealId = null;
        const row = this.rowOfTrack.get(tid), depth = s.depth[i], fold = s.fold ? s.fold[i] : depth;
        if (!row || row.kind !== "track") return;
        if (row.renderer.pyFolded && fold < 0) { this.pyOpen.add(tid); this.relayout(); }  // a Python frame
        const r = this.rowOfTrack.get(tid).renderer;
        if (r.row(depth, fold) >= r.levels) { this.expanded.add(tid); this.relayout(); }  // in "+k levels"
        if (row.renderer !== this.rowOfTrack.get(tid).renderer) this.saveUrl();
        const open = this.rowOfTrack.get(tid);
        this.scrollToTrack(tid, open.renderer.yOf(depth, fold));
        this.requestDraw();
        return;
      }
    }
    toggleGroup(key, sub) {
      if (sub) {
        if (this.openGroups.has(key)) this.openGroups.delete(key); else this.openGroups.add(key);
        this.relayout();
        return;
      }
      const k = this.grouping + ":" + key;
      if (this.collapsed.has(k)) this.collapsed.delete(k); else this.collapsed.add(k);
      this.relayout();
    }
    /** "open device profile": show every sub-group of the profile's tracks, zoom to its span (relative ns)
        and scroll to its first track. */
    openDeviceProfile(link) {
      const mine = this.tracks.filter((t) => t.device_profile === link.profile_id);
      for (const t of mine) if (t.group) this.openGroups.add(t.group);
      this.relayout();
      const pad = Math.max(1, (link.end_ns - link.start_ns) * 0.03);
      this.setWindow(link.start_ns - pad, link.end_ns + pad);
      if (mine.length) this.scrollToTrack(mine[0].track_id);
    }
    /** Scroll the rows so that track `tid` (its row `dy` px below the track's top) is in view. */
    scrollToTrack(tid, dy) {
      const row = this.rowOfTrack.get(tid);
      if (!row || row.pinned) return;
      const top = this.scroll.scrollTop, h = this.height - this.bodyTop, y = row.y + (dy || 0);
      if (y < top || y + ROW_H > top + h) this.scroll.scrollTop = Math.max(0, y - h / 3);
    }

    // -- the view: window, time scale, panels ---------------------------------------------------
    /** The shared time scale of the current window over the plot (right of the label gutter). */
    timescale() { return new TE.TimeScale(this.start, this.end, GUTTER, Math.max(GUTTER + 10, this.width || 0)); }
    get plotW() { return Math.max(10, this.width - GUTTER); }
    get nsPerPx() { return (this.end - this.start) / this.plotW; }
    xOf(ns) { return GUTTER + (ns - this.start) / this.nsPerPx; }
    nsAt(x) { return this.start + (x - GUTTER) * this.nsPerPx; }

    setWindow(start, end, quiet) {
      let span = Math.max(MIN_SPAN_NS, end - start);
      const lo = this.extentLo - this.spanNs * 0.05, hi = this.extentHi + this.spanNs * 0.05;
      const maxSpan = hi - lo;
      if (span > maxSpan) { const mid = (start + end) / 2; span = maxSpan; start = mid - span / 2; }
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
    get selected() { return this.details.selected; }
    select(id, center) { return this.details.select(id, center); }
    clearSelection() { this.details.clear(); }
    setRange(a, b) { return this.ranges.set(a, b); }
    /** The highlighted range [a, b] (relative ns), or null to clear it; kept in the URL. */
    setHighlight(a, b) { this.highlight = a === null || a === undefined ? null : [Math.min(a, b), Math.max(a, b)]; this.requestDraw(); this.saveUrl(); }
    clearRange() { this.ranges.clear(); }
    search(q, dir) { return this.searchPanel.search(q, dir); }
    jump(dir) { this.searchPanel.jump(dir); }

    // -- fetching ------------------------------------------------------------------------------
    covered() {
      const d = this.data;
      if (!d) return false;
      if (!this.source.live) return true;
      if (this.viewportMode && this.inView(0).some((id) => !this.asked.has(id))) return false;
      const vis0 = Math.max(this.extentLo, this.start), vis1 = Math.min(this.extentHi, this.end);
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
      this.fetchTimer = setTimeout(() => {
        if (this.inflight) { this.dirty = true; return; }  // a fetch started meanwhile (first paint, device colour)
        this.fetchWindow(false);
      }, wait);
    }
    /** Track ids of the rows in view (pinned ones included) and `margin` px above and below, top first. */
    inView(margin) {
      const top = this.scroll.scrollTop - margin, bottom = this.scroll.scrollTop + (this.height || 1000) - this.bodyTop + margin;
      return this.rows.filter((r) => r.kind === "track" && (r.pinned || (r.y + r.h >= top && r.y <= bottom))).map((r) => r.track.track_id);
    }
    /** What a window asks for: every track (all fit), or in viewport mode those in and around the view. */
    windowTracks() {
      if (!this.viewportMode) return { height: ALL_HEIGHT_PX };
      const view = (this.height || 1000) - this.bodyTop, ids = this.inView(view);
      return { tracks: ids, height: (ids.length + 1) * TRACK_ROW_PX };
    }
    async fetchWindow(first) {
      this.pendingSince = 0;
      const span = this.end - this.start;
      const s = this.source.live ? Math.max(this.extentLo, this.start - span * 0.5) : 0;
      const e = this.source.live ? Math.min(this.extentHi, this.end + span * 0.5) : this.spanNs;
      if (e <= s) return;
      const width = Math.max(100, Math.min(8000, Math.round(this.plotW * (e - s) / span)));
      const seq = ++this.fetchSeq;
      this.inflight = seq;
      let w;
      const only = this.windowTracks();
      try {
        w = await this.source.window(s, e, width, this.deviceColor, only);
      } catch (err) {
        this.showError(err);
        return;
      } finally {
        if (this.inflight === seq) this.inflight = 0;
      }
      // a window asked for before one that already landed is stale: it must not replace the newer view
      // (a whole-run answer landing after a search jump's zoomed one drew the zoom from coarse boxes)
      if (seq < (this.landedSeq || 0)) return;
      this.landedSeq = seq;
      this.asked = new Set(only.tracks || []);
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
      this.labels = new TE.NameTable(w.names);
      this.trackData = new Map(w.tracks.map((t) => [t.track_id, t]));
      this.summaries = new Map((w.summaries || []).map((x) => [x.lane, x]));
      if (this.collectives) this.collectives.refresh();
      let folds = false;  // a with_stack track seen for the first time: laid out with its Python stack folded
      for (const t of w.tracks) {
        const was = this.pyFolds.get(t.track_id);
        if (t.py_levels && (!was || was.py !== t.py_levels || was.ops !== t.op_levels)) {
          this.pyFolds.set(t.track_id, { py: t.py_levels, ops: t.op_levels });
          folds = true;
        }
      }
      if (folds) this.relayout();
      this.tryReveal();
      this.requestDraw();
    }
    showError(err) {
      this.winInfo.textContent = "error: " + err.message;
    }

    // -- drawing: the axis, each visible row through its renderer, then the overlays ---------------
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
      const ts = this.timescale(), body = this.bodyTop;
      TE.timeAxis.drawGrid(ctx, ts, TOP_H, H);
      ctx.save();
      ctx.beginPath(); ctx.rect(0, body, W, H - body); ctx.clip();  // scrolled rows stay under the pinned ones
      for (const r of this.rows) if (!r.pinned) this.drawAny(ctx, r, ts, body, H);
      this.sticky = this.stickyHeader();
      if (this.sticky) this.drawHeader(ctx, this.sticky.row, this.sticky.y, W, ts);
      ctx.restore();
      if (this.pinH) {
        ctx.fillStyle = TE.THEME.timeline.gutter_bg; ctx.fillRect(0, TOP_H, W, this.pinH);
        for (const r of this.rows) if (r.pinned) this.drawAny(ctx, r, ts, TOP_H, H);
        ctx.fillStyle = TE.THEME.timeline.rule; ctx.fillRect(0, body - 2, W, 2);
      }
      this.drawChain(ctx);
      if (this.deviceAxis) this.deviceAxis.draw(ctx, { left: GUTTER, top: TOP_H, width: W, height: H });
      if (this.collectives) this.collectives.draw(ctx, { left: GUTTER, top: TOP_H, width: W, height: H });
      if (this.highlight) {
        TE.overlays.drawHighlight(ctx, this.highlight, ts, { top: TOP_H, width: W, height: H });
        this.gapCaption = this.gaps.drawCaption(ctx, ts, { top: body, width: W, height: H });
      }
      this.drawRange(ctx, H);
      ctx.save(); ctx.translate(0, MINI_H);
      TE.timeAxis.drawRuler(ctx, ts, W, RULER_H, this.searchPanel.matches);
      ctx.restore();
      this.minimap.draw(ctx, W);
      ctx.font = FONT;
      this.winInfo.textContent = TE.fmtNs(Math.max(this.extentLo, this.start)) + " – " + TE.fmtNs(this.end) + "  (" + TE.fmtNs(this.end - this.start) + ")";
    }
    /** Row `r` if it shows between `top` and `H`. */
    drawAny(ctx, r, ts, top, H) {
      const y = this.rowTop(r);
      if (y + r.h < top || y > H) return;
      if (r.kind === "header") this.drawHeader(ctx, r, y, this.width, ts);
      else if (r.kind === "summary") TE.lanes.drawSummaryRow(ctx, ts, r, y, this.summaries.get(r.lane), this.data, GUTTER);
      else this.drawRow(ctx, r, y, ts);
    }
    /** One track row: its renderer draws in the plot area (translated to the row's top, clipped), then
        the label in the gutter. */
    drawRow(ctx, r, y, ts) {
      const data = this.trackData.get(r.track.track_id);
      if (data) {
        ctx.save();
        ctx.beginPath(); ctx.rect(GUTTER, y, ts.right - GUTTER, r.h); ctx.clip();
        ctx.translate(0, y);
        r.renderer.render(ctx, ts, data);
        ctx.restore();
      }
      this.drawLabel(ctx, r, y);
      if (r.renderer.renderGutter) {
        ctx.save(); ctx.translate(0, y); r.renderer.renderGutter(ctx, data); ctx.restore();
      }
    }
    drawHeader(ctx, r, y, W, ts) {
      const c = TE.THEME.timeline;
      ctx.fillStyle = c.header_bg; ctx.fillRect(0, y, W, r.h);
      ctx.fillStyle = c.header_rule; ctx.fillRect(0, y + r.h - 1, W, 1);
      if (r.lane) { ctx.fillStyle = TE.laneColor(r.lane); ctx.fillRect(0, y, 4, r.h); }
      ctx.fillStyle = c.ink;
      ctx.font = "600 " + FONT;
      const x0 = r.sub ? 22 : 10;
      ctx.fillText((r.collapsed ? "▸ " : "▾ ") + r.key, x0, y + HEADER_H / 2);
      const keyW = ctx.measureText("▾ " + r.key).width;  // measured in the bold face it is drawn in
      ctx.font = FONT;
      ctx.fillStyle = c.muted;
      const more = !r.sub && this.tracksTotal ? " listed, of " + this.tracksTotal + " in the run" : "";
      const count = r.n + (r.n === 1 ? " track" : " tracks") + more;
      ctx.fillText(count, x0 + keyW + 14, y + HEADER_H / 2);
      if (r.sub && this.deviceAxis) this.deviceAxis.drawHeaderNote(ctx, r, x0 + keyW + 28 + ctx.measureText(count).width, y + HEADER_H / 2);
      if (r.collapsed && r.tracks) {
        TE.lanes.drawSummary(ctx, ts, r.tracks, (id) => this.trackData.get(id), y + HEADER_H - 1, r.lane,
          r.lane && this.summaries.get(r.lane), this.data);
      }
    }
    drawLabel(ctx, r, y) {
      const t = r.track, c = TE.THEME.timeline;
      ctx.fillStyle = c.gutter_bg; ctx.fillRect(0, y, GUTTER - 1, r.h);
      ctx.fillStyle = TE.laneColor(t.lane); ctx.fillRect(6, y + 3, 3, Math.min(r.h, ROW_H) - 6);
      ctx.fillStyle = c.ink;
      let label = t.label || String(t.track_id);
      if (this.grouping !== "lane") label = t.lane + " · " + label;
      if (r.renderer.python) label = (r.renderer.pyFolded ? "▸ " : "▾ ") + label;  // a click opens or folds its Python stack
      const maxChars = Math.floor((PIN_X - 16) / CHAR_W);
      if (label.length > maxChars) label = label.slice(0, maxChars - 1) + "…";
      ctx.fillText(label, 14, y + Math.min(r.h, ROW_H) / 2);
      ctx.fillStyle = c.gutter_rule; ctx.fillRect(GUTTER - 1, y, 1, r.h + TRACK_GAP);
      // the pin: a head and a needle, filled when pinned
      const px = PIN_X + 8, py = y + Math.min(r.h, ROW_H) / 2 - 2;
      ctx.fillStyle = ctx.strokeStyle = r.pinned ? c.pin : c.pin_off;
      ctx.beginPath(); ctx.arc(px, py - 1, 3.5, 0, 2 * Math.PI); ctx.fill();
      ctx.lineWidth = 1.5; ctx.beginPath(); ctx.moveTo(px, py + 2); ctx.lineTo(px, py + 7); ctx.stroke();
    }
    chainBox(item) {
      const row = this.rowOfTrack && this.rowOfTrack.get(item.track_id);
      if (!row) return null;
      let depth = item.depth, fold;
      const td = this.trackData.get(item.track_id), i = td && td.slices ? td.slices.id.indexOf(item.slice_id) : -1;
      if (i >= 0) { depth = td.slices.depth[i]; fold = td.slices.fold ? td.slices.fold[i] : depth; }
      if (depth === undefined) depth = 0;
      return { x: this.xOf(item.ts_rel_ns), w: Math.max(1, item.dur_ns / this.nsPerPx), y: this.rowTop(row) + row.renderer.yOf(depth, fold), h: ROW_H };
    }
    drawChain(ctx) {
      const sel = this.details.selected;
      if (!sel || !sel.chain || sel.chain.length < 2) return;
      const frame = { left: GUTTER, top: TOP_H, width: this.width, height: this.height };
      TE.overlays.drawChain(ctx, sel.chain, (item) => this.chainBox(item), frame);
    }
    drawRange(ctx, H) {
      const r = this.ranges.range || this.input.dragRange;
      if (r) TE.overlays.drawRange(ctx, r, this.timescale(), { top: TOP_H, width: this.width, height: H });
    }

    // -- hit testing: the row under the pointer, then its renderer -------------------------------
    rowAt(yCanvas) {
      if (yCanvas < TOP_H) return null;
      const pinned = yCanvas < this.bodyTop, st = this.sticky;
      if (!pinned && st && yCanvas >= st.y && yCanvas < st.y + st.h) return { row: st.row, dy: yCanvas - st.y };
      const row = this.rows.find((r) => !r.pinned === !pinned && yCanvas >= this.rowTop(r) && yCanvas < this.rowTop(r) + r.h);
      return row ? { row: row, dy: yCanvas - this.rowTop(row) } : null;
    }
    hit(x, yCanvas) {
      const at = this.rowAt(yCanvas);
      if (!at) return null;
      if (at.row.kind === "header") return { header: at.row };
      if (at.row.kind === "summary") return null;
      if (x < GUTTER) return { label: at.row, pin: x >= PIN_X };
      const h = at.row.renderer.hitTest(x, at.dy);
      if (h) return h;
      const gap = this.gaps.at(at.row.track, this.nsAt(x));  // an empty spot of a hardware track inside a gap
      return gap ? { gap: gap } : null;
    }
    /** The tooltip of hit `h` at `p` (null hides it); slices and merged boxes also get a hover box. */
    showTip(p, h) {
      const tip = this.tip, prev = this.hover;
      this.hover = h && (h.slice || h.merged) ? (h.slice || h.merged) : null;
      const same = prev && this.hover && prev.track === this.hover.track && prev.ts === this.hover.ts && prev.depth === this.hover.depth;
      if (!same && (prev || this.hover)) this.requestDraw();
      const row = h && (h.slice || h.merged || h.point || h.band) && this.rowAt(p.y);
      const lr = h && h.label && !h.pin && h.label.renderer && h.label.renderer.python ? h.label.renderer : null;
      const text = h && h.gap ? this.gaps.tooltip(h.gap) : lr ? { name: h.label.track.label || "",
        meta: lr.pyFolded ? "click to show its Python stack (" + lr.python + " levels)" : "click to fold its Python stack into one row" }
        : row && row.row.renderer.tooltip(h);
      if (!text) { tip.style.display = "none"; return; }
      tip.textContent = "";
      tip.append(TE.el("div", { class: "t-name" }, text.name), ...(text.lines || []).map((l) => TE.el("div", { class: "t-line" }, l)),
        TE.el("div", { class: "t-meta" }, text.meta));
      tip.style.display = "block";
      const left = Math.min(p.x + 14, this.width - tip.offsetWidth - 4);
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = (p.y + 18 + tip.offsetHeight > this.height ? p.y - tip.offsetHeight - 8 : p.y + 18) + "px";
    }

    // -- URL state -------------------------------------------------------------------------------
    loadUrl() {
      const p = new URLSearchParams(location.search);
      const num = (a, b) => parseFloat(p.get(a) !== null ? p.get(a) : p.get(b));  // start_ns/end_ns: the API's names
      const s = num("start", "start_ns"), e = num("end", "end_ns");
      const ha = num("hl_start"), hb = num("hl_end");
      if (Number.isFinite(ha) && Number.isFinite(hb) && hb > ha) this.highlight = [ha, hb];
      if (Number.isFinite(s) && Number.isFinite(e) && e > s) { this.start = s; this.end = e; }
      else if (this.highlight) { const pad = (hb - ha) * 0.5; this.start = ha - pad; this.end = hb + pad; }
      this.pinned = (p.get("pin") || "").split(",").map((x) => parseInt(x, 10)).filter(Number.isFinite);
      const ids = (k) => (p.get(k) || "").split(",").map((x) => parseInt(x, 10)).filter(Number.isFinite);
      this.expanded = new Set(ids("open"));
      this.pyOpen = new Set(ids("py"));
      if (GROUPINGS.includes(p.get("group"))) { this.grouping = p.get("group"); this.groupFromUrl = true; }
      const sel = parseInt(p.get("sel"), 10);
      if (Number.isFinite(sel)) this.pendingSel = sel;
      this.searchPanel.query = p.get("q") || "";
    }
    saveUrl() {
      if (!this.opts.urlState) return;
      clearTimeout(this.urlTimer);
      this.urlTimer = setTimeout(() => {
        const p = new URLSearchParams(location.search), sel = this.details.selected, q = this.searchPanel.query;
        p.set("start", String(Math.round(this.start))); p.set("end", String(Math.round(this.end)));
        if (this.grouping !== (this.defaultGrouping || "lane")) p.set("group", this.grouping); else p.delete("group");
        if (sel) p.set("sel", String(sel.event.slice_id)); else p.delete("sel");
        if (q) p.set("q", q); else p.delete("q");
        const hl = this.highlight;
        if (hl) { p.set("hl_start", String(Math.round(hl[0]))); p.set("hl_end", String(Math.round(hl[1]))); }
        else { p.delete("hl_start"); p.delete("hl_end"); }
        if (this.pinned.length) p.set("pin", this.pinned.join(",")); else p.delete("pin");
        if (this.expanded.size) p.set("open", Array.from(this.expanded).join(",")); else p.delete("open");
        if (this.pyOpen.size) p.set("py", Array.from(this.pyOpen).join(",")); else p.delete("py");
        p.delete("start_ns"); p.delete("end_ns");  // saved as start/end
        history.replaceState(null, "", location.pathname + "?" + p.toString());
      }, 120);
    }
  }

  TE.Timeline = Timeline;
  TE.TL = { RULER_H: RULER_H, GUTTER: GUTTER, TOP_H: TOP_H, MINI_H: MINI_H };
  /** Mount a timeline into `container`; returns it once its first window is painted. */
  TE.mountTimeline = async function (container, source, opts) {
    const tl = new Timeline(container, source, opts);
    TE.timelineApi = TE.makeTimelineApi(tl);
    await tl.start_();
    return tl;
  };
})();
