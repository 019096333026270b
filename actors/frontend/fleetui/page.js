"use strict";
// The fleet page's script: polls the router's JSON endpoints (/workers,
// /loads, /decisions) and renders the tables. No library,
// no build step; every request goes to the page's own origin.
(function () {
  const POLL_MS = Number(document.body.dataset.pollMs || 2000);
  const PAGE = 50;
  const view = { sort: "worker", desc: false, filter: "", state: "", page: 0 };
  let rows = [];
  // Decision totals of recent polls, oldest first, at most WINDOW_MS old:
  // the rates are taken over that window, so a quiet poll interval does
  // not blank them.
  const WINDOW_MS = 60000;
  const samples = [];

  const $ = (id) => document.getElementById(id);
  const cell = (tr, text, cls) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  };
  const fmt = (n) => (n === undefined || n === null ? "" : Number(n).toLocaleString("en-US"));
  const ago = (s) => (s < 1 ? "< 1 s ago" : s < 120 ? Math.round(s) + " s ago" : Math.round(s / 60) + " min ago");

  async function getJSON(path) {
    const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }
  // flatten joins /workers (one element per worker, ranks inside) with
  // /loads (one element per namespace, its ranks' booked load inside)
  // into one row per (worker, dp_rank).
  function flatten(workers, spaces) {
    const load = new Map();
    for (const ns of spaces) {
      for (const l of ns.loads) load.set(l.worker_id + ":" + l.dp_rank + ":" + ns.model_name + ":" + ns.routing_group, l);
    }
    const out = [];
    for (const w of workers) {
      for (const r of w.ranks) {
        const l = load.get(w.instance_id + ":" + r.dp_rank + ":" + r.model_name + ":" + r.tenant_id) || {};
        out.push({
          worker: w.instance_id, rank: r.dp_rank, model: r.model_name, tenant: r.tenant_id, state: r.state,
          blocks: r.blocks, prefill: l.potential_prefill_tokens || 0, decode: l.potential_decode_blocks || 0,
          requests: l.active_requests || 0, seq: r.last_seq, lag: r.last_seq === null ? null : r.lag_seconds,
          endpoint: r.endpoint, warnings: (r.warnings || []).join("; "),
        });
      }
    }
    return out;
  }

  function visible() {
    const f = view.filter.toLowerCase();
    const keep = rows.filter((r) => (!view.state || r.state === view.state) &&
      (!f || [r.worker, r.rank, r.model, r.tenant, r.state, r.endpoint, r.warnings].join(" ").toLowerCase().includes(f)));
    const k = view.sort;
    keep.sort((a, b) => {
      const x = a[k], y = b[k];
      const c = typeof x === "string" || typeof y === "string" ? String(x).localeCompare(String(y)) : (x ?? -1) - (y ?? -1);
      return (view.desc ? -c : c) || a.worker - b.worker || a.rank - b.rank;
    });
    return keep;
  }

  function renderWorkers() {
    const keep = visible();
    const pages = Math.max(1, Math.ceil(keep.length / PAGE));
    view.page = Math.min(view.page, pages - 1);
    const tbody = document.querySelector("#workers tbody");
    const frag = document.createDocumentFragment();
    for (const r of keep.slice(view.page * PAGE, (view.page + 1) * PAGE)) {
      const tr = document.createElement("tr");
      tr.dataset.worker = r.worker;
      tr.dataset.rank = r.rank;
      tr.dataset.state = r.state;
      cell(tr, r.worker); cell(tr, r.rank); cell(tr, r.model); cell(tr, r.tenant);
      cell(tr, r.state, "state-" + r.state);
      cell(tr, fmt(r.blocks), "num"); cell(tr, fmt(r.prefill), "num"); cell(tr, fmt(r.decode), "num");
      cell(tr, fmt(r.requests), "num"); cell(tr, r.seq === null ? "none" : fmt(r.seq), "num");
      cell(tr, r.lag === null ? "no event yet" : ago(r.lag)); cell(tr, r.endpoint); cell(tr, r.warnings);
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
    $("page").textContent = "page " + (view.page + 1) + " of " + pages + " (" + keep.length + " of " + rows.length + " ranks)";
    for (const th of document.querySelectorAll("#workers th[data-key]")) {
      th.classList.toggle("sorted-asc", th.dataset.key === view.sort && !view.desc);
      th.classList.toggle("sorted-desc", th.dataset.key === view.sort && view.desc);
    }
  }

  function renderSummary() {
    const count = (s) => rows.filter((r) => r.state === s).length;
    $("c-ranks").textContent = rows.length;
    $("c-exact").textContent = count("exact");
    $("c-recovering").textContent = count("recovering");
    $("c-degraded").textContent = count("degraded");
    const ns = new Map();
    for (const r of rows) {
      const k = r.model + "\u0000" + r.tenant;
      const n = ns.get(k) || { model: r.model, tenant: r.tenant, ranks: 0, exact: 0, blocks: 0, requests: 0 };
      n.ranks++; n.exact += r.state === "exact" ? 1 : 0; n.blocks += r.blocks; n.requests += r.requests;
      ns.set(k, n);
    }
    const tbody = document.querySelector("#namespaces tbody");
    const frag = document.createDocumentFragment();
    for (const n of [...ns.values()].sort((a, b) => a.model.localeCompare(b.model) || a.tenant.localeCompare(b.tenant))) {
      const tr = document.createElement("tr");
      cell(tr, n.model); cell(tr, n.tenant); cell(tr, n.ranks, "num"); cell(tr, n.exact, "num");
      cell(tr, fmt(n.blocks), "num"); cell(tr, fmt(n.requests), "num");
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
  }

  function renderDecisions(log) {
    $("decisions-note").textContent = "the router keeps the latest " + log.capacity + " decisions (" +
      fmt(log.recorded) + " recorded, " + fmt(log.skipped) + " skipped while the record was busy); " +
      "scores are kept for requests that asked include_scores";
    const tbody = document.querySelector("#decisions tbody");
    const frag = document.createDocumentFragment();
    for (const d of log.decisions.slice(0, PAGE)) {
      const tr = document.createElement("tr");
      cell(tr, new Date(d.at).toLocaleTimeString("en-GB")); cell(tr, d.model_name); cell(tr, d.tenant_id);
      cell(tr, d.worker_id + ":" + d.dp_rank, d.degraded ? "state-degraded" : "");
      cell(tr, fmt(d.cached_tokens) + " / " + fmt(d.prompt_tokens), "num"); cell(tr, fmt(d.overlap_blocks), "num");
      cell(tr, fmt(d.session_credit_blocks || 0), "num"); cell(tr, d.logit.toFixed(2), "num");
      cell(tr, d.candidates || "", "num");
      cell(tr, d.scores.map((s) => s.worker_id + ":" + s.dp_rank + " " + s.logit.toFixed(2) + " " + s.overlap_blocks).join(", "));
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
  }

  // renderRates turns the decision totals of this poll and of the oldest
  // one in the window into the route rate and the predicted hit rate
  // (cached / prompt tokens) between them.
  function renderRates(log) {
    const m = { routes: log.recorded + log.skipped, prompt: log.prompt_tokens, cached: log.cached_tokens, at: performance.now() };
    while (samples.length > 0 && m.at - samples[0].at > WINDOW_MS) samples.shift();
    const first = samples[0];
    if (first) {
      const dt = (m.at - first.at) / 1000;
      const dp = m.prompt - first.prompt;
      $("c-rate").textContent = dt > 0 ? ((m.routes - first.routes) / dt).toFixed(1) : "–";
      $("c-hit").textContent = dp > 0 ? ((100 * (m.cached - first.cached)) / dp).toFixed(1) + " %" : "no routes";
      $("c-window").textContent = "over the last " + Math.round(dt) + " s";
    }
    $("c-routes").textContent = fmt(m.routes);
    samples.push(m);
  }

  async function poll() {
    try {
      const [workers, loads, log] = await Promise.all([getJSON("/workers"), getJSON("/loads"), getJSON("/decisions")]);
      rows = flatten(workers, loads);
      renderSummary();
      renderWorkers();
      renderDecisions(log);
      renderRates(log);
      $("status").textContent = "updated " + new Date().toLocaleTimeString("en-GB");
      $("status").className = "muted";
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (e) {
      $("status").textContent = "refresh failed: " + e.message;
      $("status").className = "error";
    }
  }

  for (const th of document.querySelectorAll("#workers th[data-key]")) {
    th.addEventListener("click", () => {
      view.desc = view.sort === th.dataset.key ? !view.desc : false;
      view.sort = th.dataset.key;
      view.page = 0;
      renderWorkers();
    });
  }
  $("filter").addEventListener("input", (e) => { view.filter = e.target.value; view.page = 0; renderWorkers(); });
  $("state").addEventListener("change", (e) => { view.state = e.target.value; view.page = 0; renderWorkers(); });
  $("prev").addEventListener("click", () => { view.page = Math.max(0, view.page - 1); renderWorkers(); });
  $("next").addEventListener("click", () => { view.page++; renderWorkers(); });
  // One poll at a time: the next starts POLL_MS after the last ended.
  const loop = () => poll().finally(() => setTimeout(loop, POLL_MS));
  loop();
})();
