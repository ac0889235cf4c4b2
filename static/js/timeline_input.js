/* The timeline's mouse and keyboard: wheel and W/S zoom, drag and A/D pan (held keys move frame by
   frame, like Perfetto), shift+drag measures a range, a click selects, collapses, pins, unfolds levels or
   zooms; a drag on the minimap moves the window over the whole run. It talks to
   the timeline through its view methods (setWindow, zoomAt, pan, hit, select, ...), never its drawing. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  class TimelineInput {
    constructor(tl) {
      this.tl = tl;
      this.mouse = null;
      this.drag = null;
      this.dragRange = null;
      this.held = new Map();
      this.keyRaf = 0;
      const canvas = tl.canvas;
      canvas.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
      canvas.addEventListener("mousedown", (e) => this.onDown(e));
      window.addEventListener("mousemove", (e) => this.onMove(e));
      window.addEventListener("mouseup", (e) => this.onUp(e));
      canvas.addEventListener("mouseleave", () => tl.showTip(null, null));
      document.addEventListener("keydown", (e) => this.onKey(e));
      document.addEventListener("keyup", (e) => this.held.delete(e.key.toLowerCase()));
      window.addEventListener("blur", () => this.held.clear());
    }
    pos(e) { const b = this.tl.canvas.getBoundingClientRect(); return { x: e.clientX - b.left, y: e.clientY - b.top }; }
    onWheel(e) {
      const tl = this.tl;
      e.preventDefault();
      const p = this.pos(e);
      if (e.shiftKey && !e.deltaX) { tl.scroll.scrollTop += e.deltaY; return; }
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) { tl.pan(e.deltaX * tl.nsPerPx); return; }
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
      tl.zoomAt(Math.exp(e.deltaY * unit * 0.0025), Math.max(tl.gutter, p.x));
    }
    onDown(e) {
      const tl = this.tl;
      if (e.button !== 0) return;
      tl.canvas.focus({ preventScroll: true });
      const p = this.pos(e);
      if (p.y < TE.TL.MINI_H && p.x >= tl.gutter) { this.miniDown(p); e.preventDefault(); return; }
      this.drag = { x: p.x, y: p.y, start: tl.start, end: tl.end, top: tl.scroll.scrollTop, moved: false, shift: e.shiftKey && p.x > tl.gutter };
      if (this.drag.shift) this.dragRange = [tl.nsAt(p.x), tl.nsAt(p.x)];
      e.preventDefault();
    }
    onMove(e) {
      const tl = this.tl, p = this.pos(e);
      this.mouse = p;
      const d = this.drag;
      if (d && d.mini) { this.miniMove(p); return; }
      if (d) {
        const dx = p.x - d.x, dy = p.y - d.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) d.moved = true;
        if (d.shift) { this.dragRange[1] = tl.nsAt(Math.max(tl.gutter, p.x)); tl.requestDraw(); return; }
        if (d.moved) {
          tl.canvas.classList.add("grab");
          const npp = (d.end - d.start) / tl.plotW;
          tl.setWindow(d.start - dx * npp, d.end - dx * npp, true);
          tl.scroll.scrollTop = d.top - dy;
        }
        return;
      }
      if (p.x < 0 || p.y < 0 || p.x > tl.width || p.y > tl.height) return;
      tl.showTip(p, tl.hit(p.x, p.y));
    }
    onUp(e) {
      const tl = this.tl, d = this.drag;
      if (!d) return;
      this.drag = null;
      tl.canvas.classList.remove("grab");
      const p = this.pos(e);
      if (d.mini) { tl.saveUrl(); return; }
      if (d.shift) {
        const r = this.dragRange; this.dragRange = null;
        if (d.moved && Math.abs(r[1] - r[0]) > 0) tl.setRange(Math.min(r[0], r[1]), Math.max(r[0], r[1]));
        tl.requestDraw();
        return;
      }
      if (d.moved) { tl.saveUrl(); return; }
      const h = tl.hit(p.x, p.y);
      if (h && h.header) tl.toggleGroup(h.header.key, h.header.sub);
      else if (h && h.label && h.pin) tl.togglePin(h.label.track.track_id);
      else if (h && h.band) tl.bandClick(h.band);
      else if (h && h.label && h.label.renderer.python) tl.bandClick({ track: h.label.track.track_id, action: "togglePython" });
      if (h && (h.header || h.pin || h.band || (h.label && h.label.renderer.python))) tl.showTip(p, tl.hit(p.x, p.y));  // the layout moved under the pointer
      else if (h && h.slice) tl.select(h.slice.id, false);
      else if (h && h.gap) tl.details.showGap(h.gap);
      else if (h && h.merged) { const m = h.merged; tl.setWindow(m.ts - m.dur * 2, m.ts + m.dur * 3); }
      else if (!h || !h.label) tl.clearSelection();
    }
    /** On the minimap: grab the window where it is hit, or centre it on the point and grab it there. */
    miniDown(p) {
      const tl = this.tl, at = tl.minimap.nsAt(p.x), span = tl.end - tl.start;
      const inside = at >= tl.start && at <= tl.end;
      this.drag = { mini: true, offset: inside ? at - tl.start : span / 2, span: span };
      if (!inside) tl.setWindow(at - span / 2, at + span / 2, true);
    }
    miniMove(p) {
      const d = this.drag, at = this.tl.minimap.nsAt(p.x) - d.offset;
      this.tl.setWindow(at, at + d.span, true);
    }
    onKey(e) {
      const tl = this.tl, tag = (e.target && e.target.tagName) || "";
      if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) return;
      const k = e.key.toLowerCase();
      if (k === "w" || k === "a" || k === "s" || k === "d") {
        e.preventDefault();
        if (!e.repeat) { this.keyStep(k, 1); this.held.set(k, performance.now()); this.keyLoop(); }
        return;
      }
      if (k === "escape") { tl.clearSelection(); tl.clearRange(); }
      else if (k === "/") tl.searchBox.focus();
      else return;
      e.preventDefault();
    }
    /** One W/A/S/D move; `amount` 1 is a key press, fractions are the frames of a held key. */
    keyStep(k, amount) {
      const tl = this.tl, m = this.mouse;
      const x = m && m.x > tl.gutter && m.x < tl.width ? m.x : undefined;
      const span = tl.end - tl.start;
      if (k === "w") tl.zoomAt(Math.pow(0.8, amount), x);
      else if (k === "s") tl.zoomAt(Math.pow(1.25, amount), x);
      else if (k === "a") tl.pan(-span * 0.15 * amount);
      else if (k === "d") tl.pan(span * 0.15 * amount);
    }
    /** Held keys move smoothly, frame by frame, after a short delay. */
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
  }

  TE.TimelineInput = TimelineInput;
})();
