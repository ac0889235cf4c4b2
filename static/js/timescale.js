/* The timeline's shared time scale (Perfetto's TimeScale): the visible window [start, end) in relative ns
   mapped onto the plot's pixels [left, right), and the time axis (grid and ruler) drawn from it.
   Track renderers (tracks.js) take one of these; nothing here knows about tracks. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  class TimeScale {
    /** `start`/`end`: the window in relative ns; `left`/`right`: the plot's x range in CSS px. */
    constructor(start, end, left, right) {
      this.start = start;
      this.end = end;
      this.left = left;
      this.right = right;
    }
    get widthPx() { return Math.max(10, this.right - this.left); }
    get nsPerPx() { return (this.end - this.start) / this.widthPx; }
    xOf(ns) { return this.left + (ns - this.start) / this.nsPerPx; }
    nsAt(x) { return this.start + (x - this.left) * this.nsPerPx; }
    /** Width in px of a duration, at least `min`. */
    px(durNs, min) { return Math.max(min || 0, durNs / this.nsPerPx); }
  }

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
  /** The tick step of `ts`: about one major tick per 110 px. */
  const tickStep = (ts) => niceStep(ts.nsPerPx * 110);

  /** Vertical grid lines at every major tick, from `top` to `bottom`. */
  function drawGrid(ctx, ts, top, bottom) {
    const step = tickStep(ts);
    ctx.fillStyle = TE.THEME.timeline.grid;
    for (let t = Math.ceil(ts.start / step) * step; t <= ts.end; t += step) {
      ctx.fillRect(Math.round(ts.xOf(t)), top, 1, bottom - top);
    }
  }

  /** The ruler (height `h`) across the top: ticks, labels, `marks` (objects with a `ts`: search matches) and the step. */
  function drawRuler(ctx, ts, width, h, marks) {
    const c = TE.THEME.timeline, step = tickStep(ts), extent = Math.max(Math.abs(ts.start), Math.abs(ts.end));
    ctx.fillStyle = c.ruler_bg; ctx.fillRect(0, 0, width, h);
    ctx.fillStyle = c.rule; ctx.fillRect(0, h - 1, width, 1);
    ctx.fillStyle = c.ruler_ink;
    ctx.textBaseline = "middle";
    for (let t = Math.ceil(ts.start / step) * step; t <= ts.end; t += step) {
      const x = Math.round(ts.xOf(t));
      if (x < ts.left) continue;
      ctx.fillRect(x, h - 9, 1, 8);
      ctx.fillText(rulerLabel(t, step, extent), x + 3, 9);
      for (let k = 1; k < 5; k++) {
        const xm = Math.round(ts.xOf(t + (step * k) / 5));
        if (xm > ts.left) ctx.fillRect(xm, h - 4, 1, 3);
      }
    }
    if (marks.length) {  // where the search matches are, even when merged or off-screen rows
      ctx.fillStyle = c.match;
      for (const m of marks) {
        const x = ts.xOf(m.ts);
        if (x >= ts.left && x <= width) ctx.fillRect(Math.round(x), h - 5, 2, 4);
      }
    }
    ctx.fillStyle = c.ruler_bg; ctx.fillRect(0, 0, ts.left, h);
    ctx.fillStyle = c.ruler_ink;
    ctx.fillText("step " + TE.fmtNs(step, 0).replace(".000", ""), 10, h / 2);
    ctx.fillStyle = c.rule; ctx.fillRect(ts.left - 1, 0, 1, h);
  }

  TE.TimeScale = TimeScale;
  TE.niceStep = niceStep;
  TE.rulerLabel = rulerLabel;
  TE.timeAxis = { drawGrid: drawGrid, drawRuler: drawRuler };
})();
