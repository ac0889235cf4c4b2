/* What the timeline draws over the tracks: the selected event's linked chain (arrows with the gaps
   between its steps) and a measured range. Pure drawing from boxes and a time scale; no state. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  /** Arrows between consecutive chain items; `boxOf(item)` is its box in content px (or null when its
      track is not laid out); `frame` is the plot's left, top, width, height and the rows' scrollTop. */
  function drawChain(ctx, chain, boxOf, frame) {
    const c = TE.THEME.timeline, top = frame.scrollTop;
    ctx.save();
    ctx.beginPath(); ctx.rect(frame.left, frame.top, frame.width - frame.left, frame.height - frame.top); ctx.clip();
    for (let i = 1; i < chain.length; i++) {
      const a = boxOf(chain[i - 1]), b = boxOf(chain[i]);
      if (!a || !b) continue;
      const ax = a.x, ay = frame.top + a.y - top + (b.y > a.y ? a.h : 0);
      const bx = b.x, by = frame.top + b.y - top + (b.y > a.y ? 0 : b.h);
      ctx.strokeStyle = c.chain; ctx.fillStyle = c.chain; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(ax, ay);
      const my = (ay + by) / 2;
      ctx.bezierCurveTo(ax, my, bx, my, bx, by); ctx.stroke();
      const dir = by > ay ? 1 : -1;
      ctx.beginPath(); ctx.moveTo(bx, by); ctx.lineTo(bx - 4, by - 7 * dir); ctx.lineTo(bx + 4, by - 7 * dir); ctx.closePath(); ctx.fill();
      if (chain[i].gap_ns !== null && chain[i].gap_ns !== undefined) {
        const label = "+" + TE.fmtNs(chain[i].gap_ns, 1);
        const lx = (ax + bx) / 2 + 6, tw = ctx.measureText(label).width;
        ctx.fillStyle = c.chain_label_bg; ctx.fillRect(lx - 2, my - 8, tw + 4, 15);
        ctx.fillStyle = c.chain; ctx.fillText(label, lx, my);
      }
    }
    ctx.restore();
  }

  /** The range [r0, r1] (either order, relative ns) shaded below the ruler, with its length on top. */
  function drawRange(ctx, r, ts, frame) {
    const c = TE.THEME.timeline, H = frame.height, top = frame.top;
    const xa = Math.max(ts.left, ts.xOf(Math.min(r[0], r[1]))), xb = Math.min(frame.width, ts.xOf(Math.max(r[0], r[1])));
    if (xb <= xa) return;
    ctx.fillStyle = c.range_fill; ctx.fillRect(xa, top, xb - xa, H - top);
    ctx.fillStyle = c.range; ctx.fillRect(xa, top, 1, H); ctx.fillRect(xb - 1, top, 1, H);
    const label = TE.fmtNs(Math.abs(r[1] - r[0]));
    const tw = ctx.measureText(label).width;
    const lx = Math.max(ts.left + 2, (xa + xb) / 2 - tw / 2 - 6);
    ctx.fillStyle = c.range; ctx.fillRect(lx, top + 4, tw + 12, 18);
    ctx.fillStyle = c.range_ink; ctx.fillText(label, lx + 6, top + 13);
  }

  TE.overlays = { drawChain: drawChain, drawRange: drawRange };
})();
