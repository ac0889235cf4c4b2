/* The run's largest device idle gaps on the timeline, with their host evidence (the breakdown's
   `gaps.largest`, analysis/gap_evidence.py): the tooltip of an empty spot inside one on a hardware
   track, a caption on the highlight band when it is exactly a gap (a gap link's), and the gap's
   evidence in the details panel on a click. Fetched once, lazily, after the first paint; a source
   without a breakdown (the offline report) shows none. Every name goes in as text, never markup. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const TIP_ACTIVITIES = 3;  // host activities the tooltip lists (the panel lists all the API gives)

  /** Whole percent of the gap an activity covers, rounded down (as the cause sentence's share). */
  const pct = (covered, dur) => Math.floor((covered * 100) / Math.max(dur, 1));
  /** "aten::to 100.000 µs (10 %) · thread 1": one host activity over gap `g`. */
  const activityText = (a, g) => a.name + " " + TE.fmtNs(a.covered_ns) + " (" + pct(a.covered_ns, g.dur_ns) + " %) · " + a.thread;

  class GapEvidence {
    constructor(tl) { this.tl = tl; this.gaps = []; this.loaded = false; }
    /** Fetch the breakdown once; redraws so a highlight that is a gap gets its caption. */
    async load() {
      const src = this.tl.source;
      if (!src.breakdown) { this.loaded = true; return; }
      try { this.gaps = (await src.breakdown()).gaps.largest; } catch (err) { this.gaps = []; }
      this.loaded = true;
      this.tl.requestDraw();
    }
    /** The device a hardware track's executions count for, as the breakdown names it (its device, else its label). */
    static deviceOf(track) { return track.lane === "hardware" ? track.device || track.label : null; }
    /** The gap of `track`'s device containing relative time `t`, or null. */
    at(track, t) {
      const dev = GapEvidence.deviceOf(track);
      if (dev === null) return null;
      return this.gaps.find((g) => g.device === dev && g.start <= t && t < g.end) || null;
    }
    /** The gap the highlight is exactly (a gap link opened the timeline), or null. */
    highlighted() {
      const hl = this.tl.highlight;
      return hl ? this.gaps.find((g) => g.start === hl[0] && g.end === hl[1]) || null : null;
    }
    tooltip(g) {
      return { name: "idle gap " + TE.fmtNs(g.dur_ns) + " · " + g.cause_detail,
        lines: g.host_activity.slice(0, TIP_ACTIVITIES).map((a) => activityText(a, g)),
        meta: g.device + " · " + TE.fmtNs(g.start) + " – " + TE.fmtNs(g.end) + " · click for the evidence" };
    }
    /** The highlighted gap's cause on the band, just above its length tag at the bottom (where it hides no
        slice of the first tracks), clamped to the plot; its text or null. */
    drawCaption(ctx, ts, frame) {
      const g = this.highlighted();
      if (!g) return null;
      const c = TE.THEME.timeline, text = g.cause_detail;
      const xa = Math.max(ts.left, ts.xOf(g.start)), xb = Math.min(frame.width, ts.xOf(g.end));
      if (xb <= xa) return null;
      const tw = ctx.measureText(text).width, y = frame.height - 36;
      const lx = Math.max(ts.left + 2, Math.min((xa + xb) / 2 - tw / 2 - 6, frame.width - tw - 14));
      ctx.fillStyle = c.highlight; ctx.fillRect(lx, y - 10, tw + 12, 20);
      ctx.fillStyle = c.range_ink; ctx.fillText(text, lx + 6, y);
      return text;
    }
    /** Gap `g`'s evidence in the details panel `side`: duration, cause, the host activities (each shows
        its slices as search matches in the gap's window), and the executions around it. */
    renderDetails(side, g) {
      const el = TE.el, tl = this.tl;
      const kv = (pairs) => el("table", { class: "kv" }, el("tbody", null, ...pairs.map(([k, v]) => el("tr", null, el("td", null, k), el("td", null, v)))));
      const show = (name) => {
        const w = g.timeline;
        tl.setWindow(w.start, w.end);
        tl.searchBox.value = name;
        tl.search(name, 0);
      };
      side.append(
        el("div", { class: "toolbar" }, el("span", { class: "pill" }, "idle gap"), el("span", { class: "spacer" }),
          el("button", { class: "small", onclick: () => tl.setWindow(g.timeline.start, g.timeline.end) }, "zoom to"),
          el("button", { class: "small", title: "close (Esc)", onclick: () => tl.details.clear() }, "✕")),
        el("h2", { id: "tl-gap-cause" }, g.cause_detail),
        kv([["duration", TE.fmtNs(g.dur_ns)], ["start", TE.fmtNs(g.start) + " after run start"], ["device", g.device],
          ["cause", g.cause], ["previous execution", g.before.name], ["next execution", g.after.name]]),
        el("h3", null, "Host activity over the gap"),
        el("ul", { class: "chain", id: "tl-gap-activity" }, ...g.host_activity.map((a) =>
          el("li", { title: "show these slices (search) in the gap's window", onclick: () => show(a.name) },
            el("div", { class: "c-name" }, a.name),
            el("div", { class: "c-meta" }, a.lane + " · " + a.thread + " · " + TE.fmtNs(a.covered_ns) + " (" + pct(a.covered_ns, g.dur_ns) + " %)")))));
      if (!g.host_activity.length) side.append(el("p", { class: "muted" }, "no host slice overlaps this gap"));
    }
  }

  TE.GapEvidence = GapEvidence;
})();
