/* What the timeline draws over the tracks: the selected event's linked chain (arrows with the gaps
   between its steps), a measured range and a highlighted range (a gap link's). Pure drawing from boxes
   and a time scale; no state. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  /** A chain gap's label: "+1.2 ms" after the link it follows; a negative one (host and device clocks
      disagree) says so instead of printing "+-1.2 ms". */
  TE.fmtGap = (ns) => (ns < 0 ? "starts " + TE.fmtNs(-ns, 1) + " before" : "+" + TE.fmtNs(ns, 1));

  /** The item an arrow to chain[i] starts from: the link it follows from (`after`, a slice id) when the
      chain names one, else the item before it. */
  function fromOf(chain, i) {
    const after = chain[i].after;
    if (after !== undefined && after !== null) {
      for (let k = i - 1; k >= 0; k--) if (chain[k].slice_id === after) return chain[k];
    }
    return chain[i - 1];
  }

  /** Arrows into each chain item from the link it follows; `boxOf(item)` is its box in canvas px (or null
      when its track is not laid out); `frame` is the plot's left, top, width and height. */
  function drawChain(ctx, chain, boxOf, frame) {
    const c = TE.THEME.timeline;
    ctx.save();
    ctx.beginPath(); ctx.rect(frame.left, frame.top, frame.width - frame.left, frame.height - frame.top); ctx.clip();
    for (let i = 1; i < chain.length; i++) {
      const a = boxOf(fromOf(chain, i)), b = boxOf(chain[i]);
      if (!a || !b) continue;
      const ax = a.x, ay = a.y + (b.y > a.y ? a.h : 0);
      const bx = b.x, by = b.y + (b.y > a.y ? 0 : b.h);
      ctx.strokeStyle = c.chain; ctx.fillStyle = c.chain; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(ax, ay);
      const my = (ay + by) / 2;
      ctx.bezierCurveTo(ax, my, bx, my, bx, by); ctx.stroke();
      const dir = by > ay ? 1 : -1;
      ctx.beginPath(); ctx.moveTo(bx, by); ctx.lineTo(bx - 4, by - 7 * dir); ctx.lineTo(bx + 4, by - 7 * dir); ctx.closePath(); ctx.fill();
      if (chain[i].gap_ns !== null && chain[i].gap_ns !== undefined) {
        const label = TE.fmtGap(chain[i].gap_ns);
        const lx = (ax + bx) / 2 + 6, tw = ctx.measureText(label).width;
        ctx.fillStyle = c.chain_label_bg; ctx.fillRect(lx - 2, my - 8, tw + 4, 15);
        ctx.fillStyle = c.chain; ctx.fillText(label, lx, my);
      }
    }
    ctx.restore();
  }

  /** The range [r0, r1] (either order, relative ns) shaded from `frame.top` down in `fill` with `edge`
      lines, its length in a tag at `labelY`; its x extent on the canvas, or null when off screen. */
  function band(ctx, r, ts, frame, fill, edge, labelY) {
    const H = frame.height, top = frame.top;
    const xa = Math.max(ts.left, ts.xOf(Math.min(r[0], r[1]))), xb = Math.min(frame.width, Math.max(ts.xOf(Math.max(r[0], r[1])), xa + 2));
    if (xb <= xa || xa >= frame.width) return null;
    ctx.fillStyle = fill; ctx.fillRect(xa, top, xb - xa, H - top);
    ctx.fillStyle = edge; ctx.fillRect(xa, top, 1, H - top); ctx.fillRect(xb - 1, top, 1, H - top);
    const label = TE.fmtNs(Math.abs(r[1] - r[0]));
    const tw = ctx.measureText(label).width;
    const lx = Math.max(ts.left + 2, (xa + xb) / 2 - tw / 2 - 6);
    ctx.fillStyle = edge; ctx.fillRect(lx, labelY - 9, tw + 12, 18);
    ctx.fillStyle = TE.THEME.timeline.range_ink; ctx.fillText(label, lx + 6, labelY);
    return { x0: xa, x1: xb };
  }
  /** A measured range, its length at the top. */
  function drawRange(ctx, r, ts, frame) {
    const c = TE.THEME.timeline;
    return band(ctx, r, ts, frame, c.range_fill, c.range, frame.top + 13);
  }
  /** The highlighted range over every track, its length at the bottom (the range's tag is at the top). */
  function drawHighlight(ctx, r, ts, frame) {
    const c = TE.THEME.timeline;
    return band(ctx, r, ts, frame, c.highlight_fill, c.highlight, frame.height - 14);
  }

  /** The "collectives" overlay: one matched collective's executions on every rank joined by a line
      (start to start, top to bottom), the last arriver's execution outlined. Links come from
      `source.collectiveLinks(start, end)` (GET /api/runs/{id}/collectives/links) for the window in view;
      an execution merged into a per-pixel summary has no id in the window and is skipped. */
  class CollectivesOverlay {
    constructor(tl) {
      this.tl = tl;
      this.links = [];
      this.drawn = [];
      this.box = TE.el("input", { type: "checkbox", id: "tl-collectives" });
      this.label = TE.el("label", { title: "join each collective's executions across ranks (the last arriver outlined)" },
        this.box, "collectives");
      this.enabled = new URLSearchParams(location.search).get("overlay") === "collectives";
      this.box.checked = this.enabled;
      this.box.addEventListener("change", () => this.toggle(this.box.checked));
    }
    toggle(on) {
      this.enabled = on;
      if (this.tl.opts.urlState) {
        const p = new URLSearchParams(location.search);
        if (on) p.set("overlay", "collectives"); else p.delete("overlay");
        history.replaceState(null, "", location.pathname + "?" + p.toString());
      }
      return on ? this.refresh() : (this.links = [], this.drawn = [], this.tl.requestDraw(), Promise.resolve());
    }
    async refresh() {
      if (!this.enabled) return;
      const d = this.tl.data;
      if (!d) return;
      const seq = (this.seq = (this.seq || 0) + 1);
      const r = await this.tl.source.collectiveLinks(d.start_ns, d.end_ns);
      if (seq !== this.seq || !this.enabled) return;
      this.links = r.links;
      this.tl.requestDraw();
    }
    /** slice id -> [track id, index] in the window's data, rebuilt when a new window lands. */
    index() {
      if (this.indexed === this.tl.data) return this.byId;
      this.byId = new Map();
      for (const td of this.tl.trackData.values()) {
        const s = td.slices;
        if (s) for (let i = 0; i < s.id.length; i++) this.byId.set(s.id[i], [td.track_id, i]);
      }
      this.indexed = this.tl.data;
      return this.byId;
    }
    boxOf(id) {
      const hit = this.index().get(id), tl = this.tl;
      if (!hit) return null;
      const row = tl.rowOfTrack && tl.rowOfTrack.get(hit[0]), s = tl.trackData.get(hit[0]).slices, i = hit[1];
      if (!row || row.collapsed) return null;
      return { id: id, x: tl.xOf(s.ts[i]), w: Math.max(1, s.dur[i] / tl.nsPerPx), y: tl.rowTop(row) + row.renderer.yOf(s.depth[i], s.fold ? s.fold[i] : s.depth[i]), h: 12 };
    }
    draw(ctx, frame) {
      this.drawn = [];
      if (!this.enabled || !this.links.length) return;
      const c = TE.THEME.timeline;
      ctx.save();
      ctx.beginPath(); ctx.rect(frame.left, frame.top, frame.width - frame.left, frame.height - frame.top); ctx.clip();
      ctx.lineWidth = 1.5;
      for (const link of this.links) {
        const boxes = [];
        link.slice_ids.forEach((id, k) => { const b = this.boxOf(id); if (b) boxes.push(Object.assign(b, { k: k })); });
        if (boxes.length < 2) continue;
        boxes.sort((a, b) => a.y - b.y);
        ctx.strokeStyle = c.collective; ctx.setLineDash([4, 3]);
        ctx.beginPath(); ctx.moveTo(boxes[0].x, boxes[0].y + boxes[0].h / 2);
        for (const b of boxes.slice(1)) ctx.lineTo(b.x, b.y + b.h / 2);
        ctx.stroke(); ctx.setLineDash([]);
        for (const b of boxes) {
          const last = link.ranks[b.k] === link.last_arriver;
          ctx.fillStyle = c.collective; ctx.fillRect(b.x - 2, b.y + b.h / 2 - 2, 4, 4);
          if (last) { ctx.strokeStyle = c.collective_last; ctx.strokeRect(b.x - 0.5, b.y - 0.5, b.w + 1, b.h + 1); }
        }
        this.drawn.push({ name: link.name, seq: link.seq, process_group: link.process_group, last_arriver: link.last_arriver,
          points: boxes.map((b) => ({ slice_id: b.id, x: b.x, y: b.y + b.h / 2 })) });
      }
      ctx.restore();
    }
  }
  TE.CollectivesOverlay = CollectivesOverlay;

  TE.overlays = { drawChain: drawChain, drawRange: drawRange, drawHighlight: drawHighlight, fromOf: fromOf };
})();
