/* The SQL page (templates/sql.html): run the editor's query through POST /api/runs/{id}/sql, show the rows
   as a client-sortable table, keep the query in the URL (?q=) and offer the CSV twin. Result values reach
   the DOM through textContent only; integers beyond 2^53 (absolute ns) are kept exact as BigInt. */
(function () {
  "use strict";
  const TE = window.TE;
  const el = TE.el;

  /** JSON.parse that keeps integers a double cannot hold exactly (JSON.parse source text access). */
  function parseExact(text) {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)) {
        return BigInt(context.source);
      }
      return value;
    });
  }

  function cellText(v) {
    if (v === null || v === undefined) return "NULL";
    if (typeof v === "object") return JSON.stringify(v, (k, x) => (typeof x === "bigint" ? x.toString() : x));
    return String(v);
  }

  function isNumber(v) { return typeof v === "number" || typeof v === "bigint"; }

  function resultTable(body) {
    const numeric = body.columns.map((_, i) => body.rows.length > 0 && body.rows.every((r) => r[i] === null || isNumber(r[i])));
    const head = el("tr", null, ...body.columns.map((c, i) => el("th", { class: numeric[i] ? "num" : null, title: "sort" }, c)));
    const rows = body.rows.map((r) => el("tr", null, ...r.map((v, i) => {
      const text = cellText(v);
      const td = el("td", { class: (numeric[i] ? "num" : "") + (v === null ? " null" : "") || null,
        title: text.length > 80 ? text : null }, text);  // the cell may cut a long value; the hover has it all
      if (numeric[i]) td.dataset.v = v === null ? "" : String(v);
      return td;
    })));
    const table = el("table", { class: "data", id: "sql-table", "data-client-sort": "" }, el("thead", null, head), el("tbody", null, ...rows));
    TE.sortableTable(table);
    return table;
  }

  function init() {
    const root = document.getElementById("sql-page");
    if (!root) return;
    const runId = root.dataset.run;
    const editor = document.getElementById("sql-editor");
    const status = document.getElementById("sql-status");
    const errorBox = document.getElementById("sql-error");
    const results = document.getElementById("sql-results");
    const csv = document.getElementById("sql-csv");
    const twin = document.getElementById("json-twin");
    const api = "/api/runs/" + encodeURIComponent(runId);
    let seq = 0;

    function showError(message) {
      errorBox.textContent = message;
      errorBox.hidden = false;
      results.hidden = true;
      root.dataset.state = "error";
      csv.hidden = true;
      status.textContent = "";
    }

    async function run(pushUrl) {
      const q = editor.value.trim();
      if (!q) { showError("Write a SELECT query first (or pick an example)."); return; }
      const query = "?q=" + encodeURIComponent(q);
      if (pushUrl && location.search !== query) history.pushState({ q: q }, "", location.pathname + query);
      if (twin) twin.href = TE.base() + api + "/sql" + query;
      csv.href = TE.base() + api + "/sql.csv" + query;
      const mine = ++seq;
      root.dataset.state = "running";
      status.textContent = "running…";
      errorBox.hidden = true;
      let resp, text;
      try {
        resp = await fetch(TE.base() + api + "/sql", { method: "POST", body: JSON.stringify({ sql: q }),
          headers: { "Content-Type": "application/json", Accept: "application/json" } });
        text = await resp.text();
      } catch (e) {
        if (mine === seq) showError("The server did not answer: " + e.message);
        return;
      }
      if (mine !== seq) return;  // a newer query was started meanwhile
      let body = null;
      try { body = parseExact(text); } catch (e) { body = null; }
      if (!resp.ok || !body || !body.columns) {
        showError(body && body.error ? body.error.message : "HTTP " + resp.status);
        return;
      }
      results.replaceChildren(resultTable(body));
      results.hidden = false;
      csv.hidden = false;
      const n = body.rows.length;
      status.textContent = TE.fmtInt(n) + (n === 1 ? " row" : " rows") + (body.truncated ? " (cut at the row limit)" : "")
        + " · " + Number(body.elapsed_ms).toFixed(1) + " ms";
      root.dataset.state = "done";
    }

    function insert(text) {
      const start = editor.selectionStart, end = editor.selectionEnd;
      editor.setRangeText(text, start, end, "end");
      editor.focus();
    }

    document.getElementById("sql-form").addEventListener("submit", (e) => { e.preventDefault(); run(true); });
    editor.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(true); }
    });
    document.querySelectorAll(".sql-example").forEach((b) => b.addEventListener("click", () => {
      editor.value = b.dataset.sql;
      run(true);
    }));
    document.querySelectorAll(".sql-insert").forEach((b) => b.addEventListener("click", (e) => {
      e.preventDefault();  // inside <summary>: insert without toggling the table's columns
      insert(b.dataset.insert);
    }));
    window.addEventListener("popstate", () => {
      editor.value = new URLSearchParams(location.search).get("q") || "";
      if (editor.value.trim()) run(false);
    });
    if (editor.value.trim()) run(false);
    root.dataset.ready = "1";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
