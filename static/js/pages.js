/* Page behaviour, chosen by <body data-page>: runs (upload, edit, compare), timeline, charts, report. */
(function () {
  "use strict";
  const TE = window.TE;
  const el = TE.el;

  // ---- runs page ---------------------------------------------------------------------------
  async function collectDropped(dataTransfer) {
    const items = Array.from(dataTransfer.items || []);
    const entries = items.map((it) => (it.webkitGetAsEntry ? it.webkitGetAsEntry() : null)).filter(Boolean);
    if (!entries.length) return Array.from(dataTransfer.files || []).map((f) => ({ file: f, path: f.name }));
    const out = [];
    async function walk(entry, prefix) {
      if (entry.isFile) {
        const file = await new Promise((res, rej) => entry.file(res, rej));
        out.push({ file: file, path: prefix + file.name });
      } else if (entry.isDirectory) {
        const reader = entry.createReader();
        for (;;) {
          const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
          if (!batch.length) break;
          for (const child of batch) await walk(child, prefix + entry.name + "/");
        }
      }
    }
    for (const e of entries) await walk(e, "");
    return out;
  }

  function uploadRow(label) {
    const bar = el("div"), ingest = el("div");
    const state = el("span", { class: "muted" }, "uploading…");
    const row = el("div", { class: "upload" }, el("span", { class: "mono" }, label),
      el("div", { class: "bars" }, el("span", { class: "muted" }, "upload"), el("div", { class: "progress", title: "upload" }, bar),
        el("span", { class: "muted" }, "ingest"), el("div", { class: "progress ingest", title: "ingest" }, ingest)),
      state);
    return { row, bar, ingest, state };
  }

  function upload(files, ui) {
    return new Promise((resolve, reject) => {
      const form = new FormData();
      for (const f of files) form.append("files", f.file, f.path);
      const xhr = new XMLHttpRequest();
      xhr.open("POST", TE.base() + "/api/runs");
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.onprogress = (e) => { if (e.lengthComputable) ui.bar.style.width = (100 * e.loaded / e.total).toFixed(1) + "%"; };
      xhr.onload = () => {
        let body = null;
        try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
        if (xhr.status >= 200 && xhr.status < 300 && body) { ui.bar.style.width = "100%"; resolve(body); }
        else reject(new Error(body && body.error ? body.error.message : "upload failed: HTTP " + xhr.status));
      };
      xhr.onerror = () => reject(new Error("upload failed: network error"));
      xhr.send(form);
    });
  }

  async function refreshRunsTable() {
    const resp = await fetch(location.href, { headers: { Accept: "text/html" } });
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const fresh = doc.getElementById("runs-table"), cur = document.getElementById("runs-table");
    if (fresh && cur) {
      const keep = new Set(selectedRuns());
      cur.replaceWith(document.importNode(fresh, true));
      document.querySelectorAll("input.pick-run").forEach((c) => { c.checked = keep.has(c.value); });
    }
    updateCompare();
  }

  async function handleFiles(files) {
    if (!files.length) return;
    const label = files.length === 1 ? files[0].path : files.length + " files (" + files[0].path + ", …)";
    const ui = uploadRow(label);
    document.getElementById("uploads").prepend(ui.row);
    try {
      const res = await upload(files, ui);
      if (res.duplicate_of) {
        ui.ingest.style.width = "100%";
        ui.state.textContent = "";
        ui.state.append("already uploaded: ", el("a", { href: TE.base() + "/runs/" + encodeURIComponent(res.duplicate_of) }, "open run"));
        return;
      }
      ui.state.textContent = "queued";
      for (;;) {
        const run = await TE.api("/api/runs/" + encodeURIComponent(res.id));
        ui.ingest.style.width = (100 * (run.progress || 0)).toFixed(0) + "%";
        if (run.status === "ready") {
          ui.ingest.style.width = "100%";
          ui.state.textContent = "";
          ui.state.append(el("span", { class: "status ready" }, "ready"), " ",
            el("a", { href: TE.base() + "/runs/" + encodeURIComponent(run.id), class: "open-run" }, "open"));
          ui.row.dataset.run = run.id;
          break;
        }
        if (run.status === "failed") throw new Error(run.message || "ingest failed");
        ui.state.textContent = run.status + (run.message ? ": " + run.message : "");
        await new Promise((r) => setTimeout(r, 300));
      }
      await refreshRunsTable();
    } catch (err) {
      ui.row.classList.add("failed");
      ui.state.textContent = err.message;
      await refreshRunsTable();
    }
  }

  // Runs in the order the user ticked them: the first picked is the compare baseline, whatever the
  // table's order (boxes ticked some other way, e.g. restored by the browser, join at the end).
  let pickOrder = [];
  function notePick(box) {
    pickOrder = pickOrder.filter((id) => id !== box.value);
    if (box.checked) pickOrder.push(box.value);
  }
  function selectedRuns() {
    const checked = Array.from(document.querySelectorAll("input.pick-run:checked")).map((c) => c.value);
    pickOrder = pickOrder.filter((id) => checked.includes(id));
    checked.forEach((id) => { if (!pickOrder.includes(id)) pickOrder.push(id); });
    return pickOrder.slice();
  }
  function updateCompare() {
    const picked = selectedRuns(), n = picked.length, btn = document.getElementById("compare-btn");
    document.querySelectorAll("input.pick-run").forEach((c) => {
      const mark = c.parentNode.querySelector(".pick-order");
      const i = picked.indexOf(c.value);
      if (mark) mark.textContent = i < 0 ? "" : i === 0 ? "baseline" : String(i + 1);
    });
    const side = document.getElementById("device-side-btn");
    if (side) side.disabled = n < 1;
    if (!btn) return;
    btn.disabled = n < 2 || n > 3;
    btn.textContent = "Compare selected (" + n + ")";
  }
  function compareHref(ids) {
    return TE.base() + "/compare?runs=" + ids.map(encodeURIComponent).join(",") + "&baseline=" + encodeURIComponent(ids[0]);
  }

  async function runAction(btn) {
    const tr = btn.closest("tr"), id = tr.dataset.run, act = btn.dataset.act;
    const path = "/api/runs/" + encodeURIComponent(id);
    if (act === "delete") {
      if (btn.dataset.armed !== "1") { btn.dataset.armed = "1"; btn.textContent = "confirm delete"; return; }
      await TE.api(path, { method: "DELETE" });
      tr.remove();
      updateCompare();
      return;
    }
    if (act === "rename" || act === "tag") {
      const cell = tr.querySelector(act === "rename" ? ".run-name" : ".run-tags");
      const current = act === "rename" ? tr.dataset.name : Array.from(cell.querySelectorAll(".pill")).map((p) => p.textContent).join(", ");
      const input = el("input", { type: "text", class: "edit-" + act, value: current, size: 28, placeholder: act === "tag" ? "tag1, tag2" : "run name" });
      cell.textContent = "";
      cell.append(input);
      input.focus(); input.select();
      input.addEventListener("keydown", async (e) => {
        if (e.key === "Escape") { await refreshRunsTable(); return; }
        if (e.key !== "Enter") return;
        const body = act === "rename" ? { name: input.value.trim() } : { tags: input.value.split(",").map((t) => t.trim()).filter(Boolean) };
        try {
          await TE.api(path, { method: "PATCH", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(body) });
        } catch (err) { input.setCustomValidity(err.message); input.reportValidity(); return; }
        await refreshRunsTable();
      });
    }
  }

  // new runs (serve --watch, the CLI, another browser) appear without a reload: the newest rows of the
  // JSON twin are compared with the table's, and the table is re-rendered by the server when they differ
  const LIVE_ROWS = 20;
  async function pollRuns() {
    const table = document.getElementById("runs-table");
    if (!table || document.hidden) return;
    const query = new URLSearchParams(location.search);
    query.set("limit", String(LIVE_ROWS));
    const list = await TE.api("/api/runs?" + query.toString());
    const fresh = list.runs.map((r) => r.id + ":" + r.status).join(",");
    const shown = Array.from(table.querySelectorAll("tr[data-run]")).slice(0, LIVE_ROWS)
      .map((tr) => tr.dataset.run + ":" + tr.dataset.status).join(",");
    if (fresh !== shown || String(list.total) !== table.dataset.total) await refreshRunsTable();
  }

  function initRuns() {
    const drop = document.getElementById("drop");
    const inputs = [document.getElementById("file-input"), document.getElementById("folder-input")];
    inputs.forEach((inp) => inp && inp.addEventListener("change", () => {
      const files = Array.from(inp.files).map((f) => ({ file: f, path: f.webkitRelativePath || f.name }));
      inp.value = "";
      handleFiles(files);
    }));
    ["dragenter", "dragover"].forEach((t) => drop.addEventListener(t, (e) => { e.preventDefault(); drop.classList.add("over"); }));
    ["dragleave", "drop"].forEach((t) => drop.addEventListener(t, () => drop.classList.remove("over")));
    drop.addEventListener("drop", async (e) => { e.preventDefault(); handleFiles(await collectDropped(e.dataTransfer)); });
    document.addEventListener("change", (e) => {
      if (e.target.classList && e.target.classList.contains("pick-run")) { notePick(e.target); updateCompare(); }
    });
    document.addEventListener("click", (e) => {
      const btn = e.target.closest && e.target.closest("button[data-act]");
      if (btn) runAction(btn).catch((err) => { btn.textContent = err.message; });
    });
    document.addEventListener("click", (e) => {
      if (e.target.id !== "compare-btn") return;
      location.href = compareHref(selectedRuns());
    });
    document.addEventListener("click", (e) => {  // every device profile of the picked runs (views/device_side.py)
      if (e.target.id !== "device-side-btn") return;
      location.href = TE.base() + "/device/side-by-side?runs=" + selectedRuns().map(encodeURIComponent).join(",");
    });
    updateCompare();
    const live = Number(document.getElementById("runs-table").dataset.pollMs);
    if (live > 0) setInterval(() => { pollRuns().catch(() => {}); }, live);
    // runs still ingesting (uploaded from elsewhere) refresh until they settle
    if (document.querySelector("#runs-table .status.queued, #runs-table .status.ingesting")) {
      const timer = setInterval(async () => {
        await refreshRunsTable();
        if (!document.querySelector("#runs-table .status.queued, #runs-table .status.ingesting")) clearInterval(timer);
      }, 1000);
    }
  }

  // ---- share button (run pages) ------------------------------------------------------------
  function initShare() {
    const btn = document.getElementById("share-btn");
    if (!btn) return;
    btn.addEventListener("click", async () => {
      try {
        const res = await TE.api("/api/runs/" + encodeURIComponent(btn.dataset.run) + "/share", { method: "POST" });
        const out = document.getElementById("share-out");
        out.textContent = "";
        const url = location.origin + TE.base() + res.url;
        out.append("read-only link: ", el("a", { href: url, id: "share-link" }, url));
      } catch (err) { btn.textContent = err.message; }
    });
  }

  // ---- compare page: sortable tables, ops / kernels tabs (#kernels opens the second) ----------
  function initCompare() {
    document.querySelectorAll("table[data-client-sort]").forEach((t) => TE.sortableTable(t));
    const buttons = Array.from(document.querySelectorAll(".compare-tabs .tab-btn"));
    function show(tab) {
      buttons.forEach((b) => b.classList.toggle("on", b.dataset.tab === tab));
      document.querySelectorAll(".tab-panel").forEach((p) => { p.hidden = p.id !== "tab-" + tab; });
    }
    buttons.forEach((b) => b.addEventListener("click", () => {
      show(b.dataset.tab);
      history.replaceState(null, "", b.dataset.tab === "ops" ? location.pathname + location.search : "#" + b.dataset.tab);
    }));
    if (location.hash === "#kernels") show("kernels");
  }

  // ---- timeline & report ---------------------------------------------------------------------
  function initTimeline() {
    const box = document.getElementById("timeline");
    TE.mountTimeline(box, new TE.ApiSource(box.dataset.run), { spanNs: Number(box.dataset.span),
      extentLo: Number(box.dataset.extentLo || 0), extentHi: Number(box.dataset.extentHi || 0),
      collectives: box.dataset.collectives === "1" });
  }
  function initReport() {
    document.querySelectorAll("table[data-client-sort]").forEach((t) => TE.sortableTable(t));
    const filter = document.getElementById("ops-filter");
    if (filter) filter.addEventListener("input", () => {
      const q = filter.value.toLowerCase();
      document.querySelectorAll("#ops-table tbody tr").forEach((tr) => {
        tr.style.display = tr.cells[0].textContent.toLowerCase().includes(q) ? "" : "none";
      });
    });
    filterRows("kernels-filter", "#kernels-table tbody tr");
    const snap = TE.readJSON("timeline-snapshot"), box = document.getElementById("timeline");
    if (snap && box) TE.mountTimeline(box, new TE.SnapshotSource(snap), { spanNs: snap.span_ns, urlState: false });
  }

  /** Rows of `rows` whose first cell contains the text of input `inputId` stay visible (offline tables). */
  function filterRows(inputId, rows) {
    const input = document.getElementById(inputId);
    if (input) input.addEventListener("input", () => {
      const q = input.value.toLowerCase();
      document.querySelectorAll(rows).forEach((tr) => {
        tr.style.display = tr.cells[0].textContent.toLowerCase().includes(q) ? "" : "none";
      });
    });
  }

  function init() {
    const page = document.body.dataset.page;
    TE.drawCharts();
    TE.initTables();  // the op and kernel tables sort, filter and page here (tables.js)
    initShare();
    if (page === "runs") initRuns();
    else if (page === "timeline") initTimeline();
    else if (page === "report") initReport();
    else if (page === "compare") initCompare();
    const kernelCategory = document.getElementById("kernels-category");
    if (kernelCategory) kernelCategory.addEventListener("change", () => kernelCategory.form.submit());
    const byShape = document.getElementById("by-shape");
    if (byShape) byShape.addEventListener("change", () => byShape.form.submit());
    const byModule = document.getElementById("by-module");
    if (byModule) byModule.addEventListener("change", () => byModule.form.submit());
    document.body.dataset.init = "1";
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
