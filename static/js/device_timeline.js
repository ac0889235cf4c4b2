/* Neuron device profiles on the timeline's host axis: the alignment legend (how each profile's tracks were
   shifted onto the host clock, and how uncertain that is; GET .../timeline/device-alignment, rule in
   explorer/analysis/device/align.py), a note on each device sub-group header, and a device dependency chain
   drawn over the tracks (URL dchain_profile, dchain_node, dchain_mode; GET .../timeline/device-chain). */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  const signed = (ns) => (ns < 0 ? "−" : ns > 0 ? "+" : "") + TE.fmtNs(Math.abs(ns));

  /** One profile's alignment in words: what was done to its times, on what evidence, how uncertain. */
  TE.alignmentText = function (al) {
    if (!al || al.method !== "execution_slice") return "not linked to an nc_exec_running slice: drawn on its own clock, unaligned";
    const fits = al.shift_min_ns <= al.shift_max_ns, spread = al.shift_max_ns - al.shift_min_ns;
    if (!fits) {
      return "longer than its nc_exec_running slice by " + TE.fmtNs(al.shift_min_ns - al.shift_max_ns) + ": centred on it (shifted " +
        signed(al.shift_ns) + "); device and host clocks disagree";
    }
    const how = al.shift_ns === 0 ? "drawn as captured: it lies inside its nc_exec_running slice"
      : "shifted " + signed(al.shift_ns) + " onto the host clock to lie inside its nc_exec_running slice";
    return how + " (the slice allows " + signed(al.shift_min_ns) + " … " + signed(al.shift_max_ns) + ": uncertain by " + TE.fmtNs(spread) + ")";
  };
  /** The short form drawn on a device sub-group's header. */
  TE.alignmentShort = function (al) {
    if (!al || al.method !== "execution_slice") return "own clock, unaligned";
    const spread = al.shift_max_ns - al.shift_min_ns;
    return "aligned by execution slice: shift " + signed(al.shift_ns) + (spread >= 0 ? ", uncertain by " + TE.fmtNs(spread) : ", clocks disagree");
  };

  class DeviceAxis {
    constructor(tl) {
      this.tl = tl;
      this.byProfile = new Map();
      this.chain = null;
      this.drawn = [];
      this.legend = TE.el("div", { class: "tl-note", id: "tl-device-align" });
      this.chainBar = TE.el("div", { class: "tl-note tl-dchain", id: "tl-dchain", hidden: "" });
      tl.container.insertBefore(this.chainBar, tl.toolbar.nextSibling);
      tl.container.insertBefore(this.legend, tl.toolbar.nextSibling);
    }
    /** Load the alignments and the chain the URL names (if any); opens that chain's device groups. */
    async start() {
      const p = new URLSearchParams(location.search);
      const ask = p.get("dchain_profile") && p.get("dchain_node")
        ? { profile: p.get("dchain_profile"), node: p.get("dchain_node"), mode: p.get("dchain_mode") || "trace" } : null;
      const live = this.tl.source.live;  // the offline report embeds the alignment, not the chains
      const [aligned] = await Promise.all([this.tl.source.deviceAlignment().catch(() => null),
        ask && live ? this.showChain(ask) : null]);
      if (aligned) this.showLegend(aligned.profiles);
    }
    showLegend(profiles) {
      this.byProfile = new Map(profiles.map((x) => [x.profile_id, x]));
      this.legend.textContent = "";
      this.legend.append(TE.el("b", null, "Host and device on one axis"),
        " · best-effort alignment: the export has no clock-sync data, so each device profile is placed by the bounds of its nc_exec_running slice.",
        ...profiles.map((x) => TE.el("div", { class: "tl-note-row", "data-profile": x.profile_id },
          TE.el("b", null, x.name + (x.nc_id >= 0 ? " · NC:" + x.nc_id : "")), " — " + TE.alignmentText(x.alignment))));
      this.tl.requestDraw();
    }
    /** The profile a device sub-group header belongs to (its tracks'), or null. */
    profileOfGroup(key) {
      const t = this.tl.tracks.find((x) => x.group === key);
      return t && t.device_profile ? this.byProfile.get(t.device_profile) : null;
    }
    drawHeaderNote(ctx, r, x, y) {
      const p = this.profileOfGroup(r.key);
      if (!p) return;
      ctx.save();
      ctx.fillStyle = TE.THEME.timeline.highlight;
      ctx.fillText(TE.alignmentShort(p.alignment), x, y);
      ctx.restore();
    }

    async showChain(ask) {
      const q = "?profile=" + encodeURIComponent(ask.profile) + "&node=" + encodeURIComponent(ask.node) + "&mode=" + encodeURIComponent(ask.mode);
      let c;
      try { c = await TE.api(this.tl.source.prefix + "/timeline/device-chain" + q); }
      catch (err) { this.chainBar.hidden = false; this.chainBar.textContent = "device chain: " + err.message; return; }
      this.chain = c;
      const tl = this.tl;
      if (tl.opts.urlState) {  // the link reopens the chain
        const p = new URLSearchParams(location.search);
        p.set("dchain_profile", c.profile); p.set("dchain_node", c.node); p.set("dchain_mode", c.mode);
        history.replaceState(null, "", location.pathname + "?" + p.toString());
      }
      for (const t of tl.tracks) if (t.device_profile === c.profile && t.group) tl.openGroups.add(t.group);
      tl.relayout();
      const root = c.root !== null ? c.items[c.root] : null, node = c.items[c.items.length - 1];
      const page = TE.base() + tl.source.prefix.replace("/api/runs/", "/runs/") + "/device/" + encodeURIComponent(c.profile) +
        "/chain?node=" + encodeURIComponent(c.node) + "&mode=" + c.mode;
      this.chainBar.textContent = "";
      this.chainBar.append(TE.el("b", null, c.mode === "trace" ? "Dependency chain traced to its root cause" : "Dependency chain, one step up"),
        " · " + node.name + " (" + node.table + " " + node.id + ", " + node.lane + ") · " + c.links.length + (c.links.length === 1 ? " step" : " steps") +
        ", " + TE.fmtNs(c.total_wait_ns) + " waited" +
        (c.wait_by_lane.length ? " (" + c.wait_by_lane.map((w) => w.lane + " " + TE.fmtNs(w.wait_ns)).join(", ") + ")" : "") + " · ",
        root ? TE.el("span", { id: "tl-dchain-root" }, "root cause: ", TE.el("b", null, root.name), " on " + root.lane + " (" + root.table + " " + root.id + ")")
          : TE.el("span", { class: "muted" }, "no root cause reached"),
        " · ", TE.el("a", { href: page }, "chain page"), " ",
        TE.el("button", { class: "small", title: "stop drawing the chain", onclick: () => this.clearChain() }, "✕"));
      this.chainBar.hidden = false;
      if (node.track_id !== null) tl.scrollToTrack(node.track_id);
      tl.requestDraw();
    }
    clearChain() {
      this.chain = null; this.chainBar.hidden = true; this.tl.requestDraw();
      const p = new URLSearchParams(location.search);
      ["dchain_profile", "dchain_node", "dchain_mode"].forEach((k) => p.delete(k));
      history.replaceState(null, "", location.pathname + "?" + p.toString());
    }
    /** The chain over the tracks: each node outlined (the root cause thicker, in red), its waiting interval
        shaded, an arrow from each upstream node's end to the moment the node that waited on it ran, labelled
        with the wait. */
    draw(ctx, frame) {
      this.drawn = [];
      const c = this.chain;
      if (!c) return;
      const th = TE.THEME.timeline, tl = this.tl;
      const boxes = c.items.map((it) => (it.track_id === null ? null : tl.chainBox(Object.assign({ depth: 0 }, it))));
      ctx.save();
      ctx.beginPath(); ctx.rect(frame.left, frame.top, frame.width - frame.left, frame.height - frame.top); ctx.clip();
      boxes.forEach((b, i) => {
        if (!b) return;
        const it = c.items[i], root = i === c.root;
        if (it.run_ns > it.wait_start_ns) {  // its waiting interval, shaded on its row
          const wx = tl.xOf(it.wait_start_ns), rx = tl.xOf(it.run_ns);
          ctx.globalAlpha = 0.22; ctx.fillStyle = th.chain; ctx.fillRect(wx, b.y - 1, Math.max(1, rx - wx), b.h + 2); ctx.globalAlpha = 1;
        }
        ctx.strokeStyle = root ? th.chain : th.highlight; ctx.lineWidth = root ? 3 : 2;
        ctx.strokeRect(b.x - 1.5, b.y - 1.5, Math.max(b.w, 3) + 3, b.h + 3);
        this.drawn.push({ index: i, x: b.x, y: b.y, w: b.w, h: b.h, root: root });
      });
      ctx.lineWidth = 1.5; ctx.strokeStyle = th.chain; ctx.fillStyle = th.chain;
      for (const lk of c.links) {
        const a = boxes[lk.up], b = boxes[lk.down];
        if (!a || !b) continue;
        const ax = a.x + a.w, ay = a.y + a.h / 2, bx = tl.xOf(c.items[lk.down].run_ns), by = b.y + b.h / 2, mx = (ax + bx) / 2;
        ctx.beginPath(); ctx.moveTo(ax, ay); ctx.bezierCurveTo(mx, ay, mx, by, bx, by); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(bx, by); ctx.lineTo(bx - 7, by - 4); ctx.lineTo(bx - 7, by + 4); ctx.closePath(); ctx.fill();
        const label = "waited " + TE.fmtNs(lk.wait_ns), tw = ctx.measureText(label).width, ly = (ay + by) / 2;
        ctx.fillStyle = th.chain_label_bg; ctx.fillRect(mx - tw / 2 - 3, ly - 8, tw + 6, 15);
        ctx.fillStyle = th.chain; ctx.fillText(label, mx - tw / 2, ly);
      }
      ctx.restore();
    }
  }
  TE.DeviceAxis = DeviceAxis;
})();
