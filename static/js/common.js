/* Trace Explorer shared helpers (classic script: the offline report inlines it as is).
   Trace-derived text only ever reaches the DOM through textContent / text nodes. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});

  TE.base = () => (document.body && document.body.dataset.base) || "";

  /** Duration in ns -> "12.345 ms" (the largest unit that keeps the value >= 1). */
  TE.fmtNs = function (ns, digits) {
    if (ns === null || ns === undefined || Number.isNaN(ns)) return "–";
    const d = digits === undefined ? 3 : digits;
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(d) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(d) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(d) + " µs";
    return Math.round(ns) + " ns";
  };
  TE.fmtInt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

  /** Build an element; string children become text nodes (never parsed as HTML). */
  TE.el = function (tag, attrs) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") node.className = v;
        else if (k === "text") node.textContent = v;
        else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
        else if (k === "style") node.style.cssText = v;
        else if (k === "dataset") Object.assign(node.dataset, v);
        else node.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) {
      const c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return node;
  };

  /** JSON from the explorer's API (same origin); throws Error(message) with the API's error text. */
  TE.api = async function (path, options) {
    const resp = await fetch(TE.base() + path, Object.assign({ headers: { Accept: "application/json" } }, options || {}));
    if (resp.status === 204) return null;
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const msg = body && body.error ? body.error.message : "HTTP " + resp.status;
      const err = new Error(msg);
      err.status = resp.status;
      throw err;
    }
    return body;
  };

  TE.readJSON = function (id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  };

  /** A stable color per name: FNV-1a hash -> hue; saturation and lightness fixed for legibility. */
  const colorCache = new Map();
  TE.colorFor = function (name) {
    let c = colorCache.get(name);
    if (c) return c;
    let h = 0x811c9dc5;
    for (let i = 0; i < name.length; i++) {
      h ^= name.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    const hue = h % 360;
    const sat = 45 + ((h >>> 9) % 20);
    const light = 55 + ((h >>> 17) % 12);
    c = "hsl(" + hue + "," + sat + "%," + light + "%)";
    colorCache.set(name, c);
    return c;
  };
  /** The one colour table (static/theme.json), embedded in every page by base.html. */
  TE.THEME = TE.readJSON("te-theme");
  if (!TE.THEME) throw new Error("the page lacks its colour table (#te-theme)");
  TE.LANE_COLORS = TE.THEME.lanes;
  /** A lane's colour; lanes outside the table take `other`'s. */
  TE.laneColor = (lane) => TE.LANE_COLORS[lane] || TE.LANE_COLORS.other;

  /** The body column each header cell stands for, honouring colspan and rowspan (a two-row header's
      group cells span several columns): Map(th -> column index); cells spanning columns map to null. */
  TE.headerColumns = function (thead) {
    const taken = [], out = new Map();  // taken[row][col]: a slot filled by a cell from a row above
    Array.from(thead.rows).forEach((tr, r) => {
      taken[r] = taken[r] || [];
      let col = 0;
      for (const th of tr.cells) {
        while (taken[r][col]) col++;
        const span = th.colSpan || 1, rows = th.rowSpan || 1;
        for (let dr = 0; dr < rows; dr++) {
          taken[r + dr] = taken[r + dr] || [];
          for (let dc = 0; dc < span; dc++) taken[r + dr][col + dc] = true;
        }
        out.set(th, span === 1 ? col : null);
        col += span;
      }
    });
    return out;
  };

  /** The cell of body row `tr` in column `col` (body cells may span columns too). */
  TE.cellAt = function (tr, col) {
    let c = 0;
    for (const cell of tr.cells) {
      if (col < c + (cell.colSpan || 1)) return cell;
      c += cell.colSpan || 1;
    }
    return null;
  };

  /** Client-side sort for tables marked data-client-sort (the offline report has no server to sort).
      A cell sorts by its data-v (a number; "" = no value, always last), else by its text. */
  TE.sortableTable = function (table) {
    const columns = TE.headerColumns(table.tHead);
    const heads = Array.from(columns.keys()).filter((th) => columns.get(th) !== null);
    heads.forEach((th) => {
      const col = columns.get(th);
      th.style.cursor = "pointer";
      th.addEventListener("click", () => {
        const desc = th.dataset.dir !== "desc";
        heads.forEach((h) => { delete h.dataset.dir; h.classList.remove("sorted"); });
        th.dataset.dir = desc ? "desc" : "asc";
        th.classList.add("sorted");
        const tbody = table.tBodies[0];
        const key = (r) => {
          const cell = TE.cellAt(r, col);
          if (!cell) return null;
          const v = cell.dataset.v;
          if (v === "") return null;
          return v !== undefined ? Number(v) : cell.textContent.toLowerCase();
        };
        const rows = Array.from(tbody.rows).map((r, i) => ({ r, i, k: key(r) }));
        rows.sort((a, b) => {
          if (a.k === null || b.k === null) return a.k === b.k ? a.i - b.i : a.k === null ? 1 : -1;
          const c = a.k < b.k ? -1 : a.k > b.k ? 1 : 0;
          return (desc ? -c : c) || a.i - b.i;
        });
        rows.forEach((x) => tbody.appendChild(x.r));
      });
    });
  };
})();
