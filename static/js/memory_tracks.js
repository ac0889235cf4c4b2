/* Memory counter tracks on the timeline ("memory allocated (CPU) [bytes]", "memory reserved (device 1:0) [bytes]",
   one pair per device, made at ingest from Kineto's [memory] events): drawn as any counter, but their hover names
   the op that owns the bytes of the allocation (or free) in force there, asked of GET /api/runs/{id}/memory/at
   (explorer/views/memory_track.py). Each answer holds until the next event, so it is kept and reused for every
   hover in that span. Loaded after tracks.js; it only wraps TE.makeTrack, so the renderers there stay as they are. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});
  const LABEL = /^memory (allocated|reserved) \((.+)\) \[bytes\]$/;
  const Counter = TE.TRACK_KINDS.counter;
  let lastMove = null;  // the pointer's last position: a hover answered late is shown by moving there again
  window.addEventListener("mousemove", (e) => { if (e.isTrusted) lastMove = e; });

  const runId = () => { const tl = document.getElementById("timeline"); return tl ? tl.dataset.run || "" : ""; };

  class MemoryTrack extends Counter {
    constructor(track, env, opts) {
      super(track, env, opts);
      this.answers = [];   // answers of the API, each good for [event.ts_ns, next_ts_ns)
      this.asking = null;  // the at_ns being asked
    }
    hitTest(x, y) {
      const h = super.hitTest(x, y);
      if (h) h.point.memoryAt = Math.round(this.env.ts.nsAt(x));
      return h;
    }
    /** The kept answer that holds at `t`, if any (an error holds everywhere: it is not asked again). */
    answerAt(t) {
      return this.answers.find((a) => a.error || ((!a.event || a.event.ts_ns <= t) && (a.next_ts_ns < 0 || t < a.next_ts_ns)));
    }
    ask(t) {
      if (this.asking !== null) return;
      this.asking = t;
      const url = "/api/runs/" + encodeURIComponent(runId()) + "/memory/at?track=" + this.track.track_id + "&at_ns=" + t;
      TE.api(url).then((a) => {
        this.answers.push(a);
        if (this.answers.length > 64) this.answers.shift();
      }, (err) => {
        this.answers.push({ event: null, next_ts_ns: -1, error: err.message });
      }).then(() => {
        this.asking = null;
        if (lastMove) window.dispatchEvent(new MouseEvent("mousemove", { clientX: lastMove.clientX, clientY: lastMove.clientY }));
      });
    }
    tooltip(hit) {
      const tip = super.tooltip(hit), t = hit.point.memoryAt, m = LABEL.exec(this.track.label);
      const a = this.answerAt(t);
      if (!a) { this.ask(t); return { name: tip.name, lines: ["owner: asking…"], meta: tip.meta }; }
      if (a.error) return { name: tip.name, lines: ["owner: " + a.error], meta: tip.meta };
      const e = a.event;
      if (!e) return { name: tip.name, lines: ["no [memory] event yet on " + m[2]], meta: tip.meta };
      const value = m[1] === "reserved" ? e.reserved : e.allocated;
      const owner = e.owner || "(allocated before the profile)";
      const lines = [e.bytes > 0 ? "allocated " + TE.fmtBytes(e.bytes) + " by " + owner
        : "freed " + TE.fmtBytes(-e.bytes) + " allocated by " + owner + (e.alloc_ts_ns >= 0 ? " at " + TE.fmtNs(e.alloc_ts_ns) : "")];
      if (e.op && e.op !== e.owner) lines.push("innermost op: " + e.op);
      if (e.module) lines.push(e.module);
      else if (e.frame) lines.push("in " + e.frame);
      return { name: "memory " + m[1] + " (" + m[2] + "): " + TE.fmtBytes(value), lines: lines,
        meta: "owner op: " + owner + " · event at " + TE.fmtNs(e.ts_ns) };
    }
  }

  TE.TRACK_KINDS.memory = MemoryTrack;
  const make = TE.makeTrack;
  /** Memory counter tracks of a served run get the owner hover; every other track is made as before. */
  TE.makeTrack = (track, env, opts) => (track.kind === "counter" && LABEL.test(track.label || "") && runId()
    ? new MemoryTrack(track, env, opts) : make(track, env, opts));
  TE.MemoryTrack = MemoryTrack;
})();
