/* Timeline panels: the details of a selected event (args, parents, the linked chain), the op table of
   a box-selected range, and search with jumps between matches. Methods of TE.Timeline. */
(function () {
  "use strict";
  const TE = window.TE;
  const RULER_H = TE.TL.RULER_H, ROW_H = TE.TL.ROW_H;

  Object.assign(TE.Timeline.prototype, {
    // -- selection and details -------------------------------------------------------------------
    async select(id, center) {
      let details;
      try { details = await this.source.event(id); } catch (err) { this.showError(err); return; }
      this.selected = details;
      this.renderDetails(details);
      if (center) {
        const e = details.event, span = this.end - this.start;
        if (e.dur_ns > span * 0.8 || e.dur_ns * 200 < span) this.setWindow(e.ts_rel_ns - e.dur_ns * 1.5, e.ts_rel_ns + e.dur_ns * 2.5);
        else this.setWindow(e.ts_rel_ns + e.dur_ns / 2 - span / 2, e.ts_rel_ns + e.dur_ns / 2 + span / 2);
        this.scrollToTrack(e.track_id);
      }
      this.saveUrl();
      this.requestDraw();
      this.container.dataset.selected = String(id);
    },
    scrollToTrack(tid) {
      const row = this.rowOfTrack.get(tid);
      if (!row) return;
      const top = this.scroll.scrollTop, h = this.height - RULER_H;
      if (row.y < top || row.y + ROW_H > top + h) this.scroll.scrollTop = Math.max(0, row.y - h / 3);
    },
    clearSelection() {
      if (!this.selected) return;
      this.selected = null;
      this.side.classList.remove("open");
      this.container.dataset.selected = "";
      this.saveUrl(); this.requestDraw();
      requestAnimationFrame(() => this.resize());
    },
    renderDetails(d) {
      const el = TE.el, e = d.event, side = this.side;
      side.textContent = "";
      const trackLabel = (tid) => { const r = this.rowOfTrack.get(tid); return r ? r.track.label : String(tid); };
      const kv = (pairs) => el("table", { class: "kv" }, el("tbody", null, ...pairs.filter((p) => p[1] !== null && p[1] !== undefined && p[1] !== "" && p[1] !== -1)
        .map(([k, v]) => el("tr", null, el("td", null, k), el("td", null, String(v))))));
      side.append(
        el("div", { class: "toolbar" }, el("span", { class: "pill" }, el("span", { class: "lane-dot", style: "background:" + (TE.LANE_COLORS[e.lane] || "#999") }), e.lane || ""),
          el("span", { class: "spacer" }),
          el("button", { class: "small", onclick: () => this.select(e.slice_id, true) }, "zoom to"),
          el("button", { class: "small", title: "close (Esc)", onclick: () => this.clearSelection() }, "✕")),
        el("h2", { id: "tl-detail-name" }, e.name),
        kv([["duration", TE.fmtNs(e.dur_ns)], ["start", TE.fmtNs(e.ts_rel_ns) + " after run start"], ["category", e.cat],
          ["track", trackLabel(e.track_id)], ["depth", e.depth], ["correlation", e.correlation], ["external id", e.external_id],
          ["slice id", e.slice_id]]));
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
          if (i && c.gap_ns !== null && c.gap_ns !== undefined) items.push(el("div", { class: "gap" }, "↓ gap " + TE.fmtNs(c.gap_ns, 1)));
          items.push(el("li", { class: c.relation === "self" ? "self" : "", style: "border-left-color:" + (TE.LANE_COLORS[c.lane] || "#999"),
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
      if (!wasOpen) requestAnimationFrame(() => this.resize());
    },

    // -- box selection ---------------------------------------------------------------------------
    async setRange(a, b) {
      this.range = [a, b];
      const el = TE.el, panel = this.rangePanel;
      panel.textContent = "";
      const head = el("div", { class: "head" }, el("strong", { id: "tl-range-dur" }, "Range " + TE.fmtNs(b - a)),
        el("span", { class: "muted" }, TE.fmtNs(a) + " – " + TE.fmtNs(b)),
        el("button", { class: "small", onclick: () => this.setWindow(a, b) }, "zoom to range"),
        el("span", { class: "spacer" }), el("button", { class: "small", onclick: () => this.clearRange() }, "✕"));
      panel.append(head);
      panel.classList.add("open");
      this.requestDraw();
      requestAnimationFrame(() => this.resize());
      let res;
      try { res = await this.source.ops(a, b); } catch (err) { panel.append(el("p", { class: "muted" }, err.message)); return; }
      const cols = [["name", "op"], ["calls", "calls"], ["cpu_total_ns", "CPU total"], ["self_cpu_ns", "self CPU"], ["device_total_ns", "device total"]];
      const rows = res.rows.slice(0, 100);
      panel.append(el("table", { class: "data", id: "tl-range-ops" },
        el("thead", null, el("tr", null, ...cols.map(([k, t]) => el("th", { class: k === "name" ? "" : "num" }, t)))),
        el("tbody", null, ...(rows.length ? rows.map((r) => el("tr", null, ...cols.map(([k]) => el("td", { class: k === "name" ? "name" : "num" },
          k === "name" ? r.name : k === "calls" ? TE.fmtInt(r.calls) : (r[k] === null || r[k] === undefined ? "–" : TE.fmtNs(r[k])))))) :
          [el("tr", null, el("td", { colspan: "5", class: "muted" }, "no ops start in this range"))]))));
    },
    clearRange() {
      if (!this.range) return;
      this.range = null;
      this.rangePanel.classList.remove("open");
      this.requestDraw();
      requestAnimationFrame(() => this.resize());
    },

    // -- search ----------------------------------------------------------------------------------
    async search(q, dir) {
      if (q !== this.query || !this.matchesLoaded) {
        this.query = q;
        this.matches = []; this.matchIdx = -1; this.matchIds = new Set(); this.matchesLoaded = false;
        if (!q) { this.matchInfo.textContent = ""; this.saveUrl(); this.requestDraw(); return; }
        let res;
        const opts = { regex: !!(this.regexBox && this.regexBox.checked), args: !!(this.argsBox && this.argsBox.checked) };
        try { res = await this.source.search(q, opts); } catch (err) { this.matchInfo.textContent = err.message; return; }
        this.matches = res.matches;
        this.matchIds = new Set(res.matches.map((m) => m.slice_id));
        this.matchesLoaded = true;
        this.saveUrl();
      }
      if (!this.matches.length) { this.matchInfo.textContent = "no matches"; this.requestDraw(); return; }
      if (dir) this.jump(dir);
      else this.matchInfo.textContent = this.matches.length + " matches";
      this.requestDraw();
    },
    jump(dir) {
      const n = this.matches.length;
      if (!n) return;
      this.matchIdx = this.matchIdx < 0 ? (dir > 0 ? 0 : n - 1) : (this.matchIdx + dir + n) % n;
      const m = this.matches[this.matchIdx];
      this.matchInfo.textContent = (this.matchIdx + 1) + " / " + n;
      this.select(m.slice_id, true);
    },

  });
})();
