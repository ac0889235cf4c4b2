/* Timeline panels, each an object the timeline owns: the details of a selected event (args, parents,
   the linked chain), the op table of a box-selected range, and search with jumps between matches.
   They reach the timeline only through the few methods it offers them (window, draw, URL, rows). */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  /** The selected event's details, in the side panel. `selected` is the source's event() answer. */
  class DetailsPanel {
    constructor(tl, side) { this.tl = tl; this.side = side; this.selected = null; this.gap = null; }
    async select(id, center) {
      const tl = this.tl;
      let details;
      try { details = await tl.source.event(id); } catch (err) { tl.showError(err); return; }
      this.selected = details;
      this.gap = null;
      this.render(details);
      if (center) {
        const e = details.event, span = tl.end - tl.start;
        if (e.dur_ns > span * 0.8 || e.dur_ns * 200 < span) tl.setWindow(e.ts_rel_ns - e.dur_ns * 1.5, e.ts_rel_ns + e.dur_ns * 2.5);
        else tl.setWindow(e.ts_rel_ns + e.dur_ns / 2 - span / 2, e.ts_rel_ns + e.dur_ns / 2 + span / 2);
        tl.scrollToTrack(e.track_id);
        tl.reveal(id);  // out of a fold (the Python band, "+k levels") once its window lands
      }
      tl.saveUrl();
      tl.requestDraw();
      tl.container.dataset.selected = String(id);
    }
    /** A device gap's host evidence (gaps.js) in the panel, in place of any selected event. */
    showGap(g) {
      const tl = this.tl, wasOpen = this.side.classList.contains("open");
      this.selected = null;
      this.gap = g;
      this.side.textContent = "";
      tl.gaps.renderDetails(this.side, g);
      this.side.classList.add("open");
      tl.container.dataset.selected = "";
      tl.saveUrl(); tl.requestDraw();
      if (!wasOpen) requestAnimationFrame(() => tl.resize());
    }
    clear() {
      if (!this.selected && !this.gap) return;
      const tl = this.tl;
      this.selected = null;
      this.gap = null;
      this.side.classList.remove("open");
      tl.container.dataset.selected = "";
      tl.saveUrl(); tl.requestDraw();
      requestAnimationFrame(() => tl.resize());
    }
    render(d) {
      const el = TE.el, e = d.event, side = this.side, tl = this.tl;
      side.textContent = "";
      const trackLabel = (tid) => { const r = tl.rowOfTrack.get(tid); return r ? r.track.label : String(tid); };
      const kv = (pairs) => el("table", { class: "kv" }, el("tbody", null, ...pairs.filter((p) => p[1] !== null && p[1] !== undefined && p[1] !== "" && p[1] !== -1)
        .map(([k, v]) => el("tr", null, el("td", null, k), el("td", null, String(v))))));
      side.append(
        el("div", { class: "toolbar" }, el("span", { class: "pill" }, el("span", { class: "lane-dot", style: "background:" + TE.laneColor(e.lane) }), e.lane || ""),
          el("span", { class: "spacer" }),
          el("button", { class: "small", onclick: () => this.select(e.slice_id, true) }, "zoom to"),
          el("button", { class: "small", title: "close (Esc)", onclick: () => this.clear() }, "✕")),
        el("h2", { id: "tl-detail-name" }, e.name),
        kv([["duration", TE.fmtNs(e.dur_ns)], ["start", TE.fmtNs(e.ts_rel_ns) + " after run start"], ["category", e.cat],
          ["track", trackLabel(e.track_id)], ["depth", e.depth], ["correlation", e.correlation], ["external id", e.external_id],
          ["slice id", e.slice_id]]));
      if (d.source_url && d.source_url.startsWith("vscode://")) {  // built server-side (explorer/model/source_links.py)
        side.append(el("p", null, el("a", { id: "tl-source-link", class: "source-link", href: d.source_url, title: "open in VS Code" },
          "source: " + decodeURIComponent(d.source_url.replace(/^vscode:\/\/(file|vscode-remote\/ssh-remote\+[^/]*)/, "")))));
      }
      if (d.device_profile) {
        const link = d.device_profile;
        side.append(el("p", null, el("button", { id: "tl-open-device", onclick: () => tl.openDeviceProfile(link) },
          "open device profile " + link.name)));
        const al = link.alignment;  // explorer/analysis/device/align.py: how its tracks sit on this axis
        if (al && al.method === "execution_slice") {
          side.append(el("p", { id: "tl-device-alignment", class: "muted" }, al.within
            ? "Device tracks on this time axis as captured: the profile lies inside this execution (" + TE.fmtNs(al.start_offset_ns) +
              " after its start, " + TE.fmtNs(al.end_offset_ns) + " before its end), so the clocks agree to within " + TE.fmtNs(al.uncertainty_ns) + " (no clock-sync data in the export)."
            : "As captured, the profile sticks out of this execution by " + TE.fmtNs(al.uncertainty_ns) +
              ": the device and host clocks disagree by at least that much (no clock-sync data in the export). Its tracks are " +
              (TE.alignmentText ? TE.alignmentText(al) : "shifted by " + TE.fmtNs(al.shift_ns)) + "."));
        }
      }
      const nodeId = (e.args || {}).id;  // a device instruction or DMA packet: its dependency chain (device_chain.html)
      if (e.device_profile && tl.source.live && tl.source.prefix && (e.cat === "Instruction" || e.cat === "DmaPacket") && nodeId !== undefined) {
        const chain = TE.base() + tl.source.prefix.replace("/api/runs/", "/runs/") + "/device/" + encodeURIComponent(e.device_profile) +
          "/chain?node=" + e.cat + ":" + encodeURIComponent(nodeId) + "&mode=";
        side.append(el("p", { id: "tl-chain-links" }, "Dependency chain: ", el("a", { href: chain + "step" }, "one step up"), " · ",
          el("a", { href: chain + "trace", id: "tl-trace-chain" }, "trace to root cause"),
          ...(tl.deviceAxis && tl.source.live ? [" · ", el("button", { class: "small", id: "tl-draw-chain", title: "trace it to its root cause and draw the chain here",
            onclick: () => tl.deviceAxis.showChain({ profile: e.device_profile, node: e.cat + ":" + nodeId, mode: "trace" }) }, "draw on timeline")] : [])));
      }
      if (d.offline && d.chainOmitted) side.append(el("p", { class: "muted" }, "Offline report: this run draws too many events for their linked chains to fit in the report."));
      if (d.offline && d.deviceOffline) side.append(el("p", { class: "muted" }, "Offline report: a device instruction's fields and dependencies are on the live server; open the run there for them."));
      if (d.offline && d.argsOmitted) side.append(el("p", { class: "muted" }, "Offline report: this event's args did not fit in the report; open the run on the server for them."));
      const args = e.args || {};
      if (Object.keys(args).length) {
        side.append(el("h3", null, "Args"), kv(Object.entries(args).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])));
      }
      if (d.parents && d.parents.length) {
        side.append(el("h3", null, "Parents"), el("ul", { class: "chain" }, ...d.parents.map((p) =>
          el("li", { onclick: () => this.select(p.slice_id, true) }, el("div", { class: "c-name" }, p.name),
            el("div", { class: "c-meta" }, p.lane + " · " + TE.fmtNs(p.dur_ns))))));
      }
      if (d.chain && d.chain.length > 1) {
        const items = [];
        d.chain.forEach((c, i) => {
          if (i && c.gap_ns !== null && c.gap_ns !== undefined) {
            const from = TE.overlays.fromOf(d.chain, i);  // the link it follows, not always the one above it
            items.push(el("div", { class: "gap" }, "↓ gap " + TE.fmtGap(c.gap_ns) + (from === d.chain[i - 1] ? "" : " from " + from.name + " start")));
          }
          items.push(el("li", { class: c.relation === "self" ? "self" : "", style: "border-left-color:" + TE.laneColor(c.lane),
            onclick: () => this.select(c.slice_id, true) },
            el("div", { class: "c-name" }, c.name), el("div", { class: "c-meta" }, c.lane + " · " + c.relation + " · " + TE.fmtNs(c.dur_ns))));
        });
        side.append(el("h3", null, "Linked across lanes"), el("ul", { class: "chain", id: "tl-chain" }, ...items));
      }
      if (d.children && d.children.count) {
        side.append(el("h3", null, "Children (" + d.children.count + ")"), el("ul", { class: "chain" }, ...d.children.top.map((c) =>
          el("li", { onclick: () => this.select(c.slice_id, true) }, el("div", { class: "c-name" }, c.name),
            el("div", { class: "c-meta" }, TE.fmtNs(c.dur_ns))))));
      }
      const wasOpen = side.classList.contains("open");
      side.classList.add("open");
      if (!wasOpen) requestAnimationFrame(() => tl.resize());
    }
  }

  /** The op table of a box-selected range [a, b] (relative ns), under the canvas. */
  class RangePanel {
    constructor(tl, panel) { this.tl = tl; this.panel = panel; this.range = null; }
    async set(a, b) {
      const tl = this.tl;
      this.range = [a, b];
      const el = TE.el, panel = this.panel;
      panel.textContent = "";
      const head = el("div", { class: "head" }, el("strong", { id: "tl-range-dur" }, "Range " + TE.fmtNs(b - a)),
        el("span", { class: "muted" }, TE.fmtNs(a) + " – " + TE.fmtNs(b)),
        el("button", { class: "small", onclick: () => tl.setWindow(a, b) }, "zoom to range"),
        el("span", { class: "spacer" }), el("button", { class: "small", onclick: () => this.clear() }, "✕"));
      panel.append(head);
      panel.classList.add("open");
      tl.requestDraw();
      requestAnimationFrame(() => tl.resize());
      if (tl.source.deviceSummary && tl.tracks.some((t) => t.device_profile)) this.deviceSummary(a, b);
      let res;
      try { res = await tl.source.ops(a, b); } catch (err) { panel.append(el("p", { class: "muted" }, err.message)); return; }
      const cols = [["name", "op"], ["calls", "calls"], ["cpu_total_ns", "CPU total"], ["self_cpu_ns", "self CPU"], ["device_total_ns", "device total"]];
      const rows = res.rows.slice(0, 100);
      panel.append(el("table", { class: "data", id: "tl-range-ops" },
        el("thead", null, el("tr", null, ...cols.map(([k, t]) => el("th", { class: k === "name" ? "" : "num" }, t)))),
        el("tbody", null, ...(rows.length ? rows.map((r) => el("tr", null, ...cols.map(([k]) => el("td", { class: k === "name" ? "name" : "num" },
          k === "name" ? r.name : k === "calls" ? TE.fmtInt(r.calls) : (r[k] === null || r[k] === undefined ? "–" : TE.fmtNs(r[k])))))) :
          [el("tr", null, el("td", { colspan: "5", class: "muted" }, "no ops start in this range"))]))));
    }
    /** Beside the op list: the device Summary of the range for each device profile it overlaps. */
    async deviceSummary(a, b) {
      const el = TE.el, box = el("div", { class: "device-summary", id: "tl-range-device", style: "padding:0 12px" });
      this.panel.append(box);
      let res;
      try { res = await this.tl.source.deviceSummary(a, b); } catch (err) { box.append(el("p", { class: "muted" }, err.message)); return; }
      if (!this.range || this.range[0] !== a || this.range[1] !== b) return;  // a newer range replaced this one
      for (const s of res.summaries) {
        const m = s.metrics, pct = (k) => (m[k] === undefined ? "–" : (100 * m[k]).toFixed(1) + " %");  // *_percent: fractions of 1
        const rows = [["window", TE.fmtNs(s.end_ns - s.start_ns)]];
        for (const e of ["tensor", "vector", "scalar", "gpsimd", "sync"]) {
          if (m[e + "_engine_instruction_count"]) rows.push([e + " engine active", pct(e + "_engine_active_time_percent") + " · " + TE.fmtInt(m[e + "_engine_instruction_count"]) + " instructions"]);
        }
        rows.push(["DMA active", pct("dma_active_time_percent")], ["HFU", pct("hfu_estimated_percent")],
          ["MBU", pct("mbu_estimated_percent")],
          ["DMA bytes", m.dma_transfer_total_bytes === undefined ? "–" : TE.fmtInt(m.dma_transfer_total_bytes)]);
        box.append(el("h3", null, "Device " + s.name),
          el("table", { class: "kv" }, el("tbody", null, ...rows.map(([k, v]) => el("tr", null, el("td", null, k), el("td", null, v))))));
      }
    }
    clear() {
      if (!this.range) return;
      this.range = null;
      this.panel.classList.remove("open");
      this.tl.requestDraw();
      requestAnimationFrame(() => this.tl.resize());
    }
  }

  /** Search over the whole run (the source's rule), the matches' ids for highlighting, jumps between them. */
  class SearchPanel {
    constructor(tl, info, regexBox, argsBox) {
      Object.assign(this, { tl: tl, info: info, regexBox: regexBox, argsBox: argsBox });
      this.query = ""; this.matches = []; this.index = -1; this.ids = new Set(); this.loaded = false;
    }
    async search(q, dir) {
      const tl = this.tl;
      if (q !== this.query || !this.loaded) {
        this.query = q;
        this.matches = []; this.index = -1; this.ids = new Set(); this.loaded = false;
        if (!q) { this.info.textContent = ""; tl.saveUrl(); tl.requestDraw(); return; }
        let res;
        const opts = { regex: this.regexBox.checked, args: this.argsBox.checked };
        try { res = await tl.source.search(q, opts); } catch (err) { this.info.textContent = err.message; return; }
        this.matches = res.matches;
        this.ids = new Set(res.matches.map((m) => m.slice_id));
        this.loaded = true;
        tl.saveUrl();
      }
      if (!this.matches.length) { this.info.textContent = "no matches"; tl.requestDraw(); return; }
      if (dir) this.jump(dir);
      else this.info.textContent = this.matches.length + " matches";
      tl.requestDraw();
    }
    jump(dir) {
      const n = this.matches.length;
      if (!n) return;
      this.index = this.index < 0 ? (dir > 0 ? 0 : n - 1) : (this.index + dir + n) % n;
      const m = this.matches[this.index];
      this.info.textContent = (this.index + 1) + " / " + n;
      this.tl.select(m.slice_id, true);
    }
  }

  TE.DetailsPanel = DetailsPanel;
  TE.RangePanel = RangePanel;
  TE.SearchPanel = SearchPanel;
})();
