/* The small public API over a mounted timeline (TE.timelineApi): what the browser tests and
   bench/ui.py read and drive, so they never reach into the widget's fields. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  /** Row tops are canvas CSS px (from the canvas's top left); visibleSlices() gives page coordinates. */
  TE.makeTimelineApi = function (tl) {
    const box = () => tl.canvas.getBoundingClientRect();
    const rowTop = (r) => tl.rowTop(r);
    return {
      view: () => ({ start: tl.start, end: tl.end, span: tl.end - tl.start }),
      setWindow: (a, b) => tl.setWindow(a, b),
      zoomAt: (factor, x) => tl.zoomAt(factor, x),
      pan: (ns) => tl.pan(ns),
      /** Draw this frame (the benchmark times it). */
      drawNow: () => { tl.drawPending = false; tl.drawNow(); },
      idle: () => !tl.drawPending,
      covered: () => tl.covered(),
      /** Fetch the window of the current view now (as a device-colour change does), beside any fetch in flight. */
      refetch: () => tl.fetchWindow(false),
      plotWidth: () => tl.plotW,
      gutter: TE.TL.GUTTER,
      /** How many windows have been fetched (the last one to land). */
      fetches: () => Number(tl.container.dataset.fetches || 0),
      select: (id) => tl.select(id, false),
      /** The selected event's details (the source's event() answer), or null. */
      selection: () => tl.details.selected,
      matches: () => tl.searchPanel.matches.slice(),
      /** The box-selected range [a, b] (relative ns), or null. */
      range: () => (tl.ranges.range ? tl.ranges.range.slice() : null),
      /** Layout rows: headers and tracks, with their top in canvas px. */
      rows: () => tl.rows.map((r) => {
        const tr = r.kind === "track" ? r.renderer : null;
        return { kind: r.kind, key: r.key, lane: tr ? r.track.lane : r.lane, trackKind: tr ? r.track.kind : null,
          trackId: tr ? r.track.track_id : null, top: rowTop(r), h: r.h, pinned: !!r.pinned, collapsed: !!r.collapsed,
          levels: tr ? tr.levels : null, hiddenLevels: tr && tr.folds ? tr.hidden : 0, expanded: tr ? !!tr.expanded : false,
          bandTop: tr && tr.folds ? rowTop(r) + tr.bandY : null,
          python: tr ? tr.python || 0 : 0, pythonFolded: tr ? !!tr.pyFolded : false };
      }),
      /** The landed window's per-lane summaries of the tracks it did not send ({lane, tracks, busy_ns}). */
      summaries: () => Array.from(tl.summaries.values()),
      /** Whether windows ask only for the tracks in view (a run of many tracks), and the ids the last one asked for. */
      viewportMode: () => tl.viewportMode,
      askedTracks: () => Array.from(tl.asked),
      /** The ids of the tracks whose data the landed window holds. */
      trackIdsWithData: () => Array.from(tl.trackData.keys()),
      /** The instants in the landed window's data: [name, ts (relative ns)]. */
      instantsInData: () => Array.from(tl.trackData.values()).flatMap((td) =>
        td.instants ? td.instants.ts.map((t, i) => [td.instants.name[i], t]) : []),
      /** Track `trackId`'s row (px below the track's top) for a slice at `depth` with fold key `fold`, and
          whether that row is a fold (the Python band or the "+k levels" band) rather than its own. */
      rowOfSlice: (trackId, depth, fold) => {
        const r = tl.rowOfTrack.get(trackId);
        return r ? { y: r.renderer.yOf(depth, fold), hidden: r.renderer.hides(depth, fold) } : null;
      },
      /** The landed window's depth and fold key of slice `id` ({trackId, depth, fold}), or null. */
      sliceRow: (id) => {
        for (const td of tl.trackData.values()) {
          const s = td.slices, i = s ? s.id.indexOf(id) : -1;
          if (i >= 0) return { trackId: td.track_id, depth: s.depth[i], fold: s.fold ? s.fold[i] : s.depth[i] };
        }
        return null;
      },
      /** The level budget of the layout: how many levels a slice track shows before folding the rest. */
      levelCap: () => tl.levelCap,
      /** The plot's top (canvas px): where the scrolled tracks start, under the minimap, ruler and pins. */
      bodyTop: () => tl.bodyTop,
      scrollTop: () => tl.scroll.scrollTop,
      scrollTo: (y) => { tl.scroll.scrollTop = y; tl.drawNow(); },
      pinned: () => tl.pinned.slice(),
      /** The lane header drawn over the top of the scrolled tracks, or null. */
      stickyHeader: () => (tl.sticky ? { key: tl.sticky.row.key, top: tl.sticky.y } : null),
      /** The highlighted range [a, b] (relative ns; the URL's hl_start, hl_end), or null. */
      highlight: () => (tl.highlight ? tl.highlight.slice() : null),
      setHighlight: (a, b) => tl.setHighlight(a, b),
      /** The minimap: its height, the lanes it shows and the window's box (canvas px). */
      minimap: () => ({ height: TE.TL.MINI_H, lanes: tl.minimap.lanes.slice(), box: tl.minimap.windowBox(),
        busy: Object.fromEntries(tl.minimap.lanes.map((l) => [l, Array.from(tl.minimap.busy.get(l))])) }),
      /** Slices drawn on screen at least 3 px wide, with their centre in page coordinates. */
      visibleSlices: () => {
        const b = box(), out = [];
        for (const r of tl.rows) {
          if (r.kind !== "track") continue;
          const y0 = rowTop(r);
          for (const s of r.renderer.visible(3)) {
            const y = y0 + s.y;
            if ((!r.pinned && y < tl.bodyTop + 4) || y > tl.height - 5) continue;
            out.push({ id: s.id, name: s.name, lane: r.track.lane, w: s.x1 - s.x0, x: b.left + (s.x0 + s.x1) / 2, y: b.top + y,
              python: !!s.python });
          }
        }
        return out;
      },
      /** The ids of the slices in the current window's data (drawn or not). */
      sliceIds: (name) => {
        const out = [];
        for (const td of tl.trackData.values()) {
          const s = td.slices;
          if (s) for (let i = 0; i < s.id.length; i++) if (name === undefined || tl.labels.names[s.name[i]] === name) out.push(s.id[i]);
        }
        return out;
      },
      /** What hit-testing finds at canvas point (x, y). */
      hitAt: (x, y) => tl.hit(x, y),
      /** The collectives overlay: on or off, the links of the window and those drawn (points in canvas px); null without it. */
      collectives: () => (tl.collectives ? { enabled: tl.collectives.enabled, links: tl.collectives.links.slice(),
        drawn: tl.collectives.drawn.slice() } : null),
      setCollectives: (on) => tl.collectives.toggle(on),
      /** Neuron device profiles on the host axis (device_timeline.js): their alignments, the device chain drawn and
          its outlined nodes (canvas px); null for a run without device tracks. */
      deviceAxis: () => (tl.deviceAxis ? { profiles: Array.from(tl.deviceAxis.byProfile.values()), chain: tl.deviceAxis.chain,
        drawn: tl.deviceAxis.drawn.slice() } : null),
      /** The run's largest device gaps (the breakdown's), once loaded after the first paint; null before. */
      gaps: () => (tl.gaps.loaded ? tl.gaps.gaps.slice() : null),
      /** The gap under canvas x on track `trackId` (its empty area), or null. */
      gapAt: (x, trackId) => { const r = tl.rowOfTrack.get(trackId); return r ? tl.gaps.at(r.track, tl.nsAt(x)) : null; },
      /** The cause caption drawn on the highlight band (when it is exactly a gap), or null. */
      gapCaption: () => (tl.highlight ? tl.gapCaption || null : null),
      /** The gap shown in the details panel, or null. */
      detailsGap: () => tl.details.gap,
      /** The tooltip's text as shown, or null when hidden. */
      tooltip: () => (tl.tip.style.display === "block" ? tl.tip.innerText : null),
      source: tl.source,
    };
  };
})();
