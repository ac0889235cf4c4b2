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
  TE.LANE_COLORS = { framework: "#4e79a7", runtime: "#f28e2b", hardware: "#59a14f", counter: "#b07aa1", other: "#9c9c9c" };

  /** Client-side sort for tables marked data-client-sort (the offline report has no server to sort). */
  TE.sortableTable = function (table) {
    const heads = table.querySelectorAll("thead th");
    heads.forEach((th, col) => {
      th.style.cursor = "pointer";
      th.addEventListener("click", () => {
        const desc = th.dataset.dir !== "desc";
        heads.forEach((h) => { delete h.dataset.dir; h.classList.remove("sorted"); });
        th.dataset.dir = desc ? "desc" : "asc";
        th.classList.add("sorted");
        const tbody = table.tBodies[0];
        const rows = Array.from(tbody.rows);
        const key = (r) => {
          const cell = r.cells[col];
          const v = cell.dataset.v;
          return v !== undefined ? Number(v) : cell.textContent.toLowerCase();
        };
        rows.sort((a, b) => {
          const x = key(a), y = key(b);
          const c = x < y ? -1 : x > y ? 1 : 0;
          return desc ? -c : c;
        });
        rows.forEach((r) => tbody.appendChild(r));
      });
    });
  };
})();
