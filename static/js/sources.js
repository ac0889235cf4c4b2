/* Where the timeline's data comes from: the explorer's REST API, or a snapshot embedded in the
   offline report. Both answer the same calls with the same shapes (docs/API.md). */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  // ---- data sources -----------------------------------------------------------------------
  class ApiSource {
    constructor(runId) { this.prefix = "/api/runs/" + encodeURIComponent(runId); this.live = true; }
    tracks() { return TE.api(this.prefix + "/tracks"); }
    window(start, end, width) {
      const q = "?start_ns=" + Math.max(0, Math.floor(start)) + "&end_ns=" + Math.ceil(end) + "&width_px=" + width;
      return TE.api(this.prefix + "/timeline" + q);
    }
    event(id) { return TE.api(this.prefix + "/events/" + id); }
    search(q, opts) {
      const o = opts || {};
      return TE.api(this.prefix + "/search?limit=5000&q=" + encodeURIComponent(q) + (o.regex ? "&regex=1" : "") +
        (o.args ? "&args=1" : ""));
    }
    ops(start, end) {
      return TE.api(this.prefix + "/ops?limit=200&start_ns=" + Math.floor(start) + "&end_ns=" + Math.ceil(end));
    }
  }

  /** The offline report: one LOD window over the whole span plus the tracks, nothing else. */
  class SnapshotSource {
    constructor(snapshot) { this.snap = snapshot; this.live = false; }
    tracks() { return Promise.resolve(this.snap.tracks); }
    window() { return Promise.resolve(this.snap.window); }
    _find(id) {
      for (const t of this.snap.window.tracks) {
        const s = t.slices;
        if (!s) continue;
        const i = s.id.indexOf(id);
        if (i >= 0) return { track: t, i: i };
      }
      return null;
    }
    _brief(id) {
      const hit = this._find(id);
      if (!hit) return null;
      const s = hit.track.slices, i = hit.i, tr = this.snap.tracks.tracks.find((x) => x.track_id === hit.track.track_id);
      return { slice_id: id, track_id: hit.track.track_id, lane: tr ? tr.lane : "", name: this.snap.window.names[s.name[i]],
        ts_rel_ns: s.ts[i], dur_ns: s.dur[i], depth: s.depth[i] };
    }
    event(id) {
      const me = this._brief(id);
      if (!me) return Promise.reject(new Error("details of this event are not in the report"));
      const chain = [Object.assign({ relation: "self", gap_ns: null }, me)];
      const flows = this.snap.window.flows || [];
      for (let cur = id, guard = 0; guard < 8; guard++) {  // upstream
        const f = flows.find((x) => x.to === cur);
        const b = f && this._brief(f.from);
        if (!b) break;
        chain.unshift(Object.assign({ relation: f.kind }, b)); cur = f.from;
      }
      for (let cur = id, guard = 0; guard < 8; guard++) {  // downstream
        const f = flows.find((x) => x.from === cur);
        const b = f && this._brief(f.to);
        if (!b) break;
        chain.push(Object.assign({ relation: f.kind }, b)); cur = f.to;
      }
      for (let i = 0; i < chain.length; i++) chain[i].gap_ns = i ? chain[i].ts_rel_ns - chain[i - 1].ts_rel_ns : null;
      // the report embeds each drawn slice's parent and (within a size budget) its args
      const det = this.snap.details || { parent: {}, args: {}, args_complete: false };
      const parents = [];
      for (let p = det.parent[String(id)], guard = 0; p !== undefined && guard < 64; p = det.parent[String(p)], guard++) {
        const b = this._brief(p);
        if (!b) break;
        parents.unshift(b);
      }
      const argsText = det.args[String(id)];
      let args = {};
      try { args = argsText ? JSON.parse(argsText) : {}; } catch (err) { args = { args: argsText }; }
      return Promise.resolve({ event: Object.assign({ args: args, cat: "" }, me), parents: parents,
        children: { count: 0, top: [] }, chain: chain, offline: true, argsOmitted: !argsText && !det.args_complete });
    }
    search(q, opts) {
      // Offline the snapshot has names only: args are not searched.
      const needle = q.toLowerCase(), w = this.snap.window, names = w.names, matches = [];
      let test = (n) => n.toLowerCase().includes(needle);
      if (opts && opts.regex) {
        let re;
        try { re = new RegExp(q, "i"); } catch (err) { return Promise.reject(new Error("bad regular expression: " + err.message)); }
        test = (n) => re.test(n);
      }
      const hitNames = new Set(names.map((n, i) => (test(n) ? i : -1)).filter((i) => i >= 0));
      const lanes = new Map(this.snap.tracks.tracks.map((t) => [t.track_id, t.lane]));
      for (const t of w.tracks) {
        const s = t.slices;
        if (!s) continue;
        for (let i = 0; i < s.id.length; i++) {
          if (hitNames.has(s.name[i])) matches.push({ slice_id: s.id[i], name: names[s.name[i]], lane: lanes.get(t.track_id),
            track_id: t.track_id, ts: s.ts[i], dur: s.dur[i] });
        }
      }
      matches.sort((a, b) => a.ts - b.ts);
      return Promise.resolve({ count: matches.length, matches: matches });
    }
    ops(start, end) {
      // Offline: aggregate the framework slices of the snapshot that start in the range.
      const w = this.snap.window, lanes = new Map(this.snap.tracks.tracks.map((t) => [t.track_id, t.lane]));
      const by = new Map();
      for (const t of w.tracks) {
        const s = t.slices;
        if (!s || lanes.get(t.track_id) !== "framework") continue;
        for (let i = 0; i < s.id.length; i++) {
          if (s.ts[i] < start || s.ts[i] > end) continue;
          const n = w.names[s.name[i]];
          const r = by.get(n) || { name: n, calls: 0, cpu_total_ns: 0, self_cpu_ns: null, device_total_ns: null };
          r.calls++; r.cpu_total_ns += s.dur[i]; by.set(n, r);
        }
      }
      const rows = Array.from(by.values()).sort((a, b) => b.cpu_total_ns - a.cpu_total_ns);
      return Promise.resolve({ rows: rows, offline: true });
    }
  }
  TE.ApiSource = ApiSource;
  TE.SnapshotSource = SnapshotSource;
})();
