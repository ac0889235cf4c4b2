/* Where the timeline's data comes from: the explorer's REST API, or a snapshot embedded in the
   offline report. Both answer the same calls with the same shapes (docs/API.md); offline search and
   range op tables apply the server's rules to what the report embeds (report.snapshot_rules). */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const SEARCH_LIMIT = 5000, OPS_LIMIT = 200;  // what the timeline asks the server for
  // the tracks the timeline lays out at most (the first in its order); windows summarise the others per lane
  const TRACKS_LIMIT = 5000;

  // ---- data sources -----------------------------------------------------------------------
  class ApiSource {
    constructor(runId) { this.prefix = "/api/runs/" + encodeURIComponent(runId); this.live = true; }
    tracks() { return TE.api(this.prefix + "/tracks?limit=" + TRACKS_LIMIT); }
    /** The window [start, end] at `width` px; `only` = {tracks: [ids], height: px} asks for just those tracks
        in full (the server summarises the others per lane), else the first that fit `height` (default 1000). */
    window(start, end, width, deviceColor, only) {
      // (a window may start before 0: profiler markers before the span, explorer.model.markers)
      const q = "?start_ns=" + Math.floor(start) + "&end_ns=" + Math.ceil(end) + "&width_px=" + width +
        (deviceColor && deviceColor !== "opcode" ? "&device_color=" + encodeURIComponent(deviceColor) : "") +
        (only && only.height ? "&height_px=" + Math.max(1, Math.min(20000, Math.round(only.height))) : "") +
        (only && only.tracks ? "&tracks=" + only.tracks.join(",") : "");
      return TE.api(this.prefix + "/timeline" + q);
    }
    event(id) { return TE.api(this.prefix + "/events/" + id); }
    /** The matched collectives in [start, end] as their ranks' slice ids (the collectives overlay). */
    collectiveLinks(start, end) {
      return TE.api(this.prefix + "/collectives/links?start_ns=" + Math.max(0, Math.floor(start)) + "&end_ns=" + Math.max(1, Math.ceil(end)));
    }
    /** Busy/idle per lane and device and the largest device gaps with their host evidence. */
    breakdown() { return TE.api(this.prefix + "/breakdown"); }
    search(q, opts) {
      const o = opts || {};
      return TE.api(this.prefix + "/search?limit=" + SEARCH_LIMIT + "&q=" + encodeURIComponent(q) + (o.regex ? "&regex=1" : "") +
        (o.args ? "&args=1" : ""));
    }
    /** How each Neuron device profile was placed on the host clock ({profiles: [...]}). */
    deviceAlignment() { return TE.api(this.prefix + "/timeline/device-alignment"); }
    /** The device Summary of [start, end] for each device profile it overlaps (none: an empty list). */
    deviceSummary(start, end) {
      return TE.api(this.prefix + "/timeline/device-summary?start_ns=" + Math.floor(start) + "&end_ns=" + Math.ceil(end));
    }
    ops(start, end, view) {
      return TE.api(this.prefix + "/ops?limit=" + OPS_LIMIT + "&start_ns=" + Math.floor(start) + "&end_ns=" + Math.ceil(end) +
        (view ? "&view=" + encodeURIComponent(view) : ""));
    }
  }

  /** The offline report: one LOD window over the whole span plus the tracks, nothing else. */
  class SnapshotSource {
    constructor(snapshot) {
      this.snap = snapshot;
      this.live = false;
      // the report's one window is bounded (report.build_snapshot): the tracks it did not hold are per-lane summaries
      this.summarised = ((snapshot.window && snapshot.window.tracks_summarised) || 0) > 0;
    }
    tracks() { return Promise.resolve(this.snap.tracks); }
    window() { return Promise.resolve(this.snap.window); }
    /** The device profiles' alignment, as the server made it when the report was written. */
    deviceAlignment() { return Promise.resolve({ profiles: this.snap.device_alignment || [] }); }
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
      // the server's chain, embedded per drawn slice (report.snapshot_chains); a slice without one links nothing
      const chains = this.snap.chains;
      const chain = (chains && chains[String(id)]) || [Object.assign({ relation: "self", gap_ns: null }, me)];
      // the report embeds each drawn slice's parent and (within a size budget) its args
      const det = this.snap.details || { parent: {}, args: {}, args_complete: false };
      const parents = [];
      for (let p = det.parent[String(id)], guard = 0; p !== undefined && guard < 64; p = det.parent[String(p)], guard++) {
        const b = this._brief(p);
        if (!b) break;
        parents.push(b);  // nearest first, as the server lists them
      }
      const argsText = det.args[String(id)];
      let args = {};
      try { args = argsText ? JSON.parse(argsText) : {}; } catch (err) { args = { args: argsText }; }
      const track = (this.snap.tracks.tracks || []).find((t) => t.track_id === me.track_id);
      const device = !!(track && track.device_profile);  // a Neuron device slice: its fields live on the server
      return Promise.resolve({ event: Object.assign({ args: args, cat: "" }, me), parents: parents,
        children: { count: 0, top: [] }, chain: chain, offline: true, deviceOffline: device,
        argsOmitted: !device && !argsText && !det.args_complete, chainOmitted: !device && !chains });
    }
    /** The server's search rule (analysis/search.py) over the slices it searches, embedded in the report:
        names only (args are not in the report), substring ignoring case or a case-sensitive regex; the
        count of all matches and the first `SEARCH_LIMIT` in time order (then slice id). */
    search(q, opts) {
      const idx = this.snap.search;
      if (!idx) return Promise.reject(new Error("this run is too large for offline search; open it on the server"));
      const needle = q.toLowerCase();
      let test = (n) => n.toLowerCase().includes(needle);
      if (opts && opts.regex) {
        let re;
        try { re = new RegExp(q); } catch (err) { return Promise.reject(new Error("bad regular expression: " + err.message)); }
        test = (n) => re.test(n);
      }
      const hit = idx.names.map(test), lanes = this.lanes(), pos = [];
      for (let i = 0; i < idx.id.length; i++) if (hit[idx.name[i]]) pos.push(i);
      pos.sort((a, b) => (idx.ts[a] - idx.ts[b]) || (idx.id[a] - idx.id[b]));
      const matches = pos.slice(0, SEARCH_LIMIT).map((i) => ({ slice_id: idx.id[i], name: idx.names[idx.name[i]],
        lane: lanes.get(idx.track[i]) || "other", track_id: idx.track[i], ts: idx.ts[i], dur: idx.dur[i] }));
      return Promise.resolve({ count: pos.length, matches: matches });
    }
    lanes() { return new Map(this.snap.tracks.tracks.map((t) => [t.track_id, t.lane])); }
    /** The server's range op table (load_ops_in_range, default sort and view; `view` names another
        of the server's views) from the op events embedded in the report: ops starting in [start, end) are counted; a
        launch counts once per row. */
    ops(start, end, view) {
      const o = this.snap.ops;
      if (!o) return Promise.reject(new Error("this run is too large for offline range op tables; open it on the server"));
      const a = Math.floor(start), b = Math.ceil(end), n = o.id.length;
      const inside = o.ts.map((t) => t >= a && t < b), by = new Map();
      for (let i = 0; i < n; i++) {
        if (!inside[i]) continue;
        const name = o.names[o.name[i]];
        let r = by.get(name);
        if (!r) by.set(name, r = { name: name, calls: 0, python_calls: 0, cpu_total_ns: 0, self_cpu_ns: 0, self_device_ns: 0, device_total_ns: 0 });
        r.calls++; r.python_calls += o.python[i] ? 1 : 0;
        r.cpu_total_ns += o.dur[i]; r.self_cpu_ns += o.self_cpu[i]; r.self_device_ns += o.self_device[i];
        let up = o.outer_same[i];
        while (up >= 0 && !inside[up]) up = o.outer_same[up];
        if (up < 0) r.device_total_ns += o.device_total[i];  // an enclosing same-name op in range has it already
      }
      const v = view || o.default_view, kind = o.views[v];  // the server's view table: view -> row kind kept
      if (kind === undefined) return Promise.reject(new Error("unknown op view " + v));
      const key = ((o.sorts && o.sorts[v]) || o.sort).replace(/^[-+]/, "");  // the view's default sort
      const sites = (o.launch_site_views || []).includes(v);  // a view that keeps launch sites (rows with self device)
      const rows = Array.from(by.values()).filter((r) => kind === null || kind === (r.python_calls === r.calls ? "python" : "operator")
        || (sites && r.self_device_ns > 0))
        .sort((x, y) => (y[key] - x[key]) || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)).slice(0, OPS_LIMIT);
      for (const r of rows) { r.cpu_avg_ns = Math.floor(r.cpu_total_ns / r.calls); delete r.python_calls; }
      return Promise.resolve({ rows: rows, sort: (o.sorts && o.sorts[v]) || o.sort, offline: true });
    }
  }
  TE.ApiSource = ApiSource;
  TE.SnapshotSource = SnapshotSource;
})();
