/* The op and kernel tables of the server's pages, sorted, filtered and paged in the browser from their
   JSON (the page's JSON twin), without reloading. The server renders the first page and the header's rules:
   data-col (the row field), data-fmt (how a cell is drawn), data-desc (the direction a first click sorts,
   from the server's own rule), so a sort here orders rows as the API's `sort=` does. Trace text reaches the
   DOM only through text nodes. */
(function () {
  "use strict";
  const TE = (window.TE = window.TE || {});
  const el = TE.el;

  // ---- numbers as the server's filters write them (explorer/views/render.py) -----------------------------
  /** Python's format(x, ".<d>f"): the exact binary value rounded half to even. toFixed rounds the exact
      value too but breaks ties upwards; a tie is a value whose last bit is at 2^-(d+1). */
  TE.pyFixed = function (x, d) {
    const scaled = Math.abs(x) * 2 ** (d + 1);
    if (Number.isInteger(scaled) && scaled % 2 === 1) {
      const units = Math.floor(Math.abs(x) * 10 ** d);  // the tie lies between units and units + 1
      const even = units % 2 === 0 ? units : units + 1;
      return (x < 0 ? "-" : "") + (even / 10 ** d).toFixed(d);
    }
    return x.toFixed(d);
  };
  /** "1234567.5" -> "1,234,567.5" (Python's `,` option). */
  TE.thousands = function (text) {
    const m = /^(-?)(\d+)(.*)$/.exec(text);
    return m ? m[1] + m[2].replace(/\B(?=(\d{3})+(?!\d))/g, ",") + m[3] : text;
  };
  const none = (v) => v === null || v === undefined;
  TE.fmtUs = (ns) => (none(ns) ? "–" : TE.thousands(TE.pyFixed(ns / 1e3, 1)) + " µs");  // render.fmt_us
  TE.fmtPct = (p) => (none(p) ? "–" : TE.pyFixed(p, 1) + " %");  // render.fmt_pct
  /** _kernels_table.html's rate(): 1.23 GFLOP/s. */
  function rate(v, unit) {
    if (none(v)) return "–";
    for (const [scale, prefix] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (v >= scale) return TE.pyFixed(v / scale, 2) + " " + prefix + unit;
    }
    return TE.pyFixed(v, 0) + " " + unit;
  }

  /** _memory_macros.html's mib(): bytes in binary units (the exact count on hover). */
  TE.fmtBytes = function (n) {
    if (none(n)) return "–";
    const a = Math.abs(n);
    if (a >= 2 ** 30) return TE.pyFixed(n / 2 ** 30, 2) + " GiB";
    if (a >= 2 ** 20) return TE.pyFixed(n / 2 ** 20, 2) + " MiB";
    if (a >= 1024) return TE.pyFixed(n / 1024, 1) + " KiB";
    return TE.thousands(String(n)) + " B";
  };

  // ---- cells, by the header's data-fmt ---------------------------------------------------------------
  const muted = (text) => el("span", { class: "muted" }, text);
  const num = (v, text) => el("td", { class: "num", "data-v": none(v) ? "" : String(v) }, text);
  const CELLS = {
    int: (v) => num(v, TE.fmtInt(v)),
    us: (v) => num(v, TE.fmtUs(v)),
    pct: (v) => {
      const td = num(v, null);
      td.classList.add("bar-cell");
      td.append(el("div", { class: "bar", style: "width:" + Math.min(v || 0, 100).toFixed(1) + "%" }), el("span", {}, TE.fmtPct(v)));
      return td;
    },
    bytes: (v) => num(v, el("span", { title: TE.fmtInt(v) + " bytes" }, TE.fmtBytes(v))),
    mono: (v) => el("td", { class: "mono" }, none(v) ? "" : String(v)),
    module: (v) => el("td", { class: "mono", title: v || "outside any nn.Module" }, v ? v : muted("—")),
    opname: (v, row, table) => {
      const td = el("td", { class: "name", title: v });
      td.append(document.createTextNode(v));
      // as _ops_table.html: Python frames outside the python view, and runtime calls (launch sites), are marked
      if (row.kind === "python" && table.dataset.view !== "python") {
        td.append(" ", el("span", { class: "pill", title: "a with_stack Python frame" + (table.dataset.view === "operators"
          ? ", here because it launched device work with no op around it" : "") }, "py"));
      } else if (row.kind === "runtime") {
        td.append(" ", el("span", { class: "pill", title: "a runtime call that launched device work outside any op or Python frame" }, "launch"));
      }
      // as _ops_table.html: a `source` link after the name, to the editor only (the server builds vscode:// URLs)
      if (row.source_url && /^vscode:/i.test(row.source_url)) {
        td.append(" ", el("a", { class: "source-link", href: row.source_url, title: "open in VS Code" }, "source"));
      }
      return td;
    },
    kname: (v) => el("td", { class: "kname" }, v),
    kcat: (v) => el("td", {}, el("span", { class: "kcat", "data-cat": v }, v)),
    kops: (v, row) => {
      const ops = row.top_ops || [];
      if (!ops.length) return el("td", { class: "kops" }, muted("–"));
      return el("td", { class: "kops" }, ...ops.map((op) => el("div", {}, el("span", { class: "mono" }, op.name), " ", muted(TE.fmtUs(op.total_ns)))));
    },
    work: (v, row) => {  // _rates.html's work_cell: achieved rate · % of peak, then kind · dtype · which peak
      const w = row.work, td = el("td", { class: "num work" });
      if (!w) { td.append(muted("–")); return td; }
      const line = el("div", {}, none(w.flop_per_s) ? rate(w.bytes_per_s, "B/s") : rate(w.flop_per_s, "FLOP/s"));
      if (!none(w.pct_of_peak)) line.append(" · ", el("span", { class: "work-pct", title: "% of the device's " + w.peak_kind + " peak" }, TE.fmtPct(w.pct_of_peak)));
      td.append(line, el("div", { class: "muted" }, w.kind + (w.dtype ? " · " + w.dtype : "") + (none(w.pct_of_peak) ? "" : " · " + w.peak_kind)));
      return td;
    },
    klaunch: (v, row) => {
      const l = row.launch, td = el("td", { class: "klaunch" });
      if (!l) { td.append(muted("–")); return td; }
      const dims = (d) => d.join("×"), or = (x) => (none(x) ? "–" : String(x));
      if (!none(l.grid)) td.append(el("div", {}, "grid " + dims(l.grid) + " · block " + (none(l.block) ? "–" : dims(l.block))));
      if (!none(l.registers_per_thread) || !none(l.shared_memory)) td.append(el("div", {}, or(l.registers_per_thread) + " regs · " + TE.fmtInt(l.shared_memory) + " B shared"));
      if (!none(l.est_occupancy_pct)) td.append(el("div", {}, "est. occupancy " + TE.fmtPct(l.est_occupancy_pct)));
      if (!none(l.configs) && l.configs > 1) td.append(el("div", { class: "muted" }, "most common of " + l.configs + " configs (" + TE.fmtInt(l.config_calls) + " calls)"));
      if (!none(l.flop_per_s)) td.append(el("div", {}, rate(l.flop_per_s, "FLOP/s")));
      if (!none(l.gb_per_s)) td.append(el("div", {}, rate(l.gb_per_s * 1e9, "B/s")));
      if (!none(l.bytes)) td.append(el("div", { class: "muted" }, TE.fmtInt(l.bytes) + " bytes"));
      return td;
    },
  };

  // ---- order: Arrow's sort_by([(col, dir), ("name", "ascending")]) -------------------------------------
  // Arrow orders strings by their UTF-8 bytes, i.e. by code point; JS's `<` compares UTF-16 units, which
  // agrees unless a string holds a character from U+D800 up. Those (rare) strings compare by code point.
  const HIGH = /[\uD800-\uFFFF]/;
  function byCodePoint(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const x = a.codePointAt(i), y = b.codePointAt(i);
      if (x !== y) return x < y ? -1 : 1;
      if (x > 0xffff) i++;
    }
    return a.length - b.length;
  }
  const high = (v) => typeof v === "string" && HIGH.test(v);
  /** Two keys of one column (numbers, or strings with `ha`/`hb`: whether each holds a high character). */
  function compareValues(a, b, ha, hb) {
    if (a === b) return 0;
    if (ha || hb) return byCodePoint(a, b);
    return a < b ? -1 : 1;
  }
  /** `rows` (each with its index `i` in the fetched order) sorted by `col`, nulls last either way, rows
      equal in `col` by the `ties` columns ascending (the server's tie-break, from data-tie-break). Keys are
      read once (decorate, sort, undecorate): a sort of thousands of rows stays within a frame or two. */
  TE.sortRows = function (rows, col, desc, ties) {
    const sign = desc ? -1 : 1;
    const cols = [col].concat((ties || ["name"]).filter((c) => c !== col));
    const keyed = rows.map((r) => ({ r: r, k: cols.map((c) => r.row[c]), h: cols.map((c) => high(r.row[c])) }));
    keyed.sort((x, y) => {
      for (let j = 0; j < cols.length; j++) {
        const a = x.k[j], b = y.k[j];
        let c;
        if (none(a) || none(b)) c = none(a) === none(b) ? 0 : none(a) ? 1 : -1;
        else if (typeof a === "number" && typeof b === "number") c = a - b;
        else c = compareValues(a, b, x.h[j], y.h[j]);
        if (c) return j === 0 && !(none(a) || none(b)) ? sign * c : c;
      }
      return x.r.i - y.r.i;
    });
    return keyed.map((x) => x.r);
  };

  // ---- a live table -----------------------------------------------------------------------------------
  /** Take over `table` (marked data-live by the server): rows from `jsonUrl`, filtered by `filter` (an
      input, may be null), paged into `pager`, `count` showing how many rows match. */
  function liveTable(table, opts) {
    const heads = Array.from(table.tHead.rows[0].cells);
    const pageSize = Number(table.dataset.pageSize);
    const params = new URLSearchParams(location.search);
    const state = { sort: table.dataset.sort, q: params.get("q") || "", page: Math.max(1, Number(params.get("page")) || 1) };
    const ties = (table.dataset.tieBreak || "name").split(",");
    let all = [], shown = [], loaded = false;  // until the rows arrive, the header and pager links and the
    // filter's form go to the server, which sorts, pages and filters the same way (no empty table drawn)

    const descOf = (sort) => (sort[0] === "-" ? true : sort[0] === "+" ? false : headFor(sort.replace(/^[-+]/, "")).dataset.desc === "1");
    const keyOf = (sort) => sort.replace(/^[-+]/, "");
    function headFor(col) { return heads.find((th) => th.dataset.col === col) || heads[0]; }

    function apply() {
      const q = state.q.toLowerCase();
      const matching = q ? all.filter((r) => String(r.row.name).toLowerCase().includes(q)) : all;
      shown = TE.sortRows(matching, keyOf(state.sort), descOf(state.sort), ties);
      const pages = Math.max(1, Math.ceil(shown.length / pageSize));
      state.page = Math.min(state.page, pages);
      draw(pages);
      syncUrl();
    }

    function draw(pages) {
      const start = (state.page - 1) * pageSize, tbody = document.createElement("tbody");
      for (const r of shown.slice(start, start + pageSize)) {
        const tr = document.createElement("tr");
        for (const th of heads) tr.append(CELLS[th.dataset.fmt](r.row[th.dataset.col], r.row, table));
        tbody.append(tr);
      }
      if (!shown.length) {
        tbody.append(el("tr", {}, el("td", { colspan: heads.length, class: "empty" }, state.q ? "No rows match “" + state.q + "”." : "No rows.")));
      }
      table.tBodies[0].replaceWith(tbody);
      const col = keyOf(state.sort), desc = descOf(state.sort);
      heads.forEach((th) => {
        const a = th.querySelector("a");
        th.classList.toggle("sorted", th.dataset.col === col);
        if (a) a.textContent = a.textContent.replace(/ [▼▲]$/, "") + (th.dataset.col === col ? (desc ? " ▼" : " ▲") : "");
      });
      drawPager(pages, start);
      if (opts.count) opts.count.textContent = TE.fmtInt(shown.length) + (opts.noun ? " " + opts.noun(shown.length) : "");
    }

    function drawPager(pages, start) {
      const pager = opts.pager;
      if (!pager) return;
      pager.hidden = pages <= 1;
      pager.textContent = "";
      const link = (page, cls, text) => (page >= 1 && page <= pages && page !== state.page
        ? el("a", { href: "?" + query({ page: page }), class: cls, "data-page": page }, text)
        : el("span", { class: "muted " + cls }, text));
      pager.append(link(state.page - 1, "prev", "‹ previous"), " ",
        el("span", { class: "where" }, "rows " + TE.fmtInt(start + 1) + "–" + TE.fmtInt(Math.min(start + pageSize, shown.length)) +
          " of " + TE.fmtInt(shown.length) + " · page " + state.page + " of " + pages), " ",
        link(state.page + 1, "next", "next ›"));
    }

    /** The page's query string with this table's state (sort, q, page) in it. */
    function query(override) {
      const s = Object.assign({}, state, override || {}), p = new URLSearchParams(location.search);
      p.set("sort", s.sort);
      if (s.q) p.set("q", s.q); else p.delete("q");
      if (s.page > 1) p.set("page", String(s.page)); else p.delete("page");
      return p.toString();
    }
    /** Shareable links: the address bar, the JSON twin, the hidden form fields and the view links. */
    function syncUrl() {
      history.replaceState(history.state, "", location.pathname + "?" + query() + location.hash);
      const twin = document.getElementById("json-twin");
      if (twin) {
        const u = new URL(twin.href);
        u.searchParams.set("sort", state.sort);
        if (state.q) u.searchParams.set("q", state.q); else u.searchParams.delete("q");
        u.searchParams.delete("page");
        twin.href = u.toString();
      }
      const form = table.closest(".panel") && table.closest(".panel").querySelector("form");
      if (form && form.elements.sort) form.elements.sort.value = state.sort;
      document.querySelectorAll("#op-views a[href]").forEach((a) => {
        const u = new URL(a.href);
        u.searchParams.set("sort", state.sort);
        u.searchParams.delete("page");
        a.href = u.toString();
      });
    }

    table.tHead.addEventListener("click", (e) => {
      const th = e.target.closest("th[data-col]");
      if (!th || !th.querySelector("a") || !loaded) return;
      e.preventDefault();
      const col = th.dataset.col, desc = keyOf(state.sort) === col ? !descOf(state.sort) : th.dataset.desc === "1";
      const t0 = performance.now();
      state.sort = (desc ? "-" : "+") + col;
      state.page = 1;
      apply();
      table.dataset.sortMs = (performance.now() - t0).toFixed(1);
    });
    if (opts.pager) opts.pager.addEventListener("click", (e) => {
      const a = e.target.closest("a[data-page]");
      if (!a || !loaded) return;
      e.preventDefault();
      state.page = Number(a.dataset.page);
      apply();
    });
    if (opts.filter) {
      let timer = null;
      opts.filter.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(() => { state.q = opts.filter.value; state.page = 1; if (loaded) apply(); }, 120);
      });
      // Enter filters here too; the form's other fields (view, grouping, category) still reload the page
      opts.filter.form.addEventListener("submit", (e) => {
        if (opts.filter.form.dataset.dirty || !loaded) return;
        e.preventDefault();
        clearTimeout(timer);
        state.q = opts.filter.value; state.page = 1; apply();
      });
      opts.filter.form.addEventListener("change", (e) => { if (e.target !== opts.filter) opts.filter.form.dataset.dirty = "1"; });
    }

    const url = new URL(opts.jsonUrl, location.href);
    ["sort", "q", "page", "limit"].forEach((k) => url.searchParams.delete(k));
    return TE.api(url.pathname + url.search).then((data) => {
      all = data.rows.map((row, i) => ({ row: row, i: i }));
      loaded = true;
      apply();
      table.dataset.live = "1";  // sorting, filtering and paging happen here from now on
    });
  }

  /** The op and kernel tables of this page, if the server marked them live. */
  TE.initTables = function () {
    const twin = document.getElementById("json-twin");
    const ops = document.querySelector("#ops-table[data-live]"), kernels = document.querySelector("#kernels-table[data-live]");
    const base = TE.base();
    const jsonUrl = () => (twin ? twin.getAttribute("href").slice(base.length) : "");
    const fail = (table) => (err) => { table.dataset.live = "error"; table.title = "the table could not load its rows: " + err.message; };
    if (ops && twin) {
      liveTable(ops, { jsonUrl: jsonUrl(), filter: document.getElementById("ops-q"), pager: document.getElementById("ops-pager"),
        count: document.getElementById("ops-count") }).catch(fail(ops));
    }
    if (kernels && twin) {
      liveTable(kernels, { jsonUrl: jsonUrl(), filter: document.getElementById("kernels-q"), pager: document.getElementById("kernels-pager"),
        count: document.getElementById("kernels-count"), noun: (n) => (n === 1 ? "kernel" : "kernels") }).catch(fail(kernels));
    }
  };
})();
