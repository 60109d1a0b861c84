// crl browse: renders the run data embedded in this page. No network: everything is inline.
// One renderer per view name (RENDERERS); the Python side (composition_rl/jobs/browse/views.py)
// registers the matching collector.
"use strict";

const COLORS = { solve_all: "#2b8a3e", goldilocks: "#e8a33d", solve_none: "#c92a2a", informative: "#1c7ed6",
  reward: "#6741d9", length: "#495057", kept: "#1c7ed6" };
const PAGE = 25;

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.appendChild(typeof kid === "string" || typeof kid === "number" ? document.createTextNode(String(kid)) : kid);
  }
  return el;
}
const fmt = (n) => (n === undefined || n === null ? "–" : typeof n === "number" ? n.toLocaleString("en-US") : String(n));
const pct = (v, d = 1) => (v === undefined || v === null || Number.isNaN(v) ? "–" : (100 * v).toFixed(d) + "%");
const num = (v, d = 3) => (v === undefined || v === null ? "–" : typeof v === "number" ? (Number.isInteger(v) ? fmt(v) : v.toFixed(d)) : String(v));

function table(head, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => (r instanceof HTMLElement ? r : h("tr", {}, r.map((c) => (c instanceof HTMLElement ? c : h("td", {}, fmt(c)))))))));
}

function kv(obj) {
  const rows = Object.entries(obj || {}).filter(([, v]) => v === null || typeof v !== "object")
    .map(([k, v]) => [k, typeof v === "number" && !Number.isInteger(v) ? num(v, 4) : fmt(v)]);
  return table(["key", "value"], rows, { class: "kv" });
}

// ---- charts (uPlot) ----------------------------------------------------------------------------

function chartWidth(host) {
  return Math.max(360, Math.min(900, (host.clientWidth || 900) - 20));
}

function barChart(host, labels, series, opts) {
  // labels: category names on x; series: [{label, values, color}]
  const x = labels.map((_, i) => i);
  const bars = uPlot.paths.bars({ size: [series.length > 1 ? 0.8 : 0.6, 120], gap: 1 });
  const u = new uPlot({
    width: chartWidth(host), height: (opts && opts.height) || 260, title: opts && opts.title,
    scales: { x: { time: false, range: [-0.6, labels.length - 0.4] }, y: { range: (u, lo, hi) => [0, hi * 1.08 || 1] } },
    axes: [
      { splits: () => x, values: (u, splits) => splits.map((i) => labels[i] ?? ""), size: (opts && opts.xsize) || 40,
        rotate: opts && opts.rotate, gap: 4 },
      { size: 70, values: (u, s) => s.map((v) => fmt(v)) },
    ],
    legend: { show: series.length > 1 },
    series: [{ label: (opts && opts.xlabel) || "x", value: (u, i) => labels[i] ?? "" },
      ...series.map((s) => ({ label: s.label, fill: s.color + "cc", stroke: s.color, paths: bars, points: { show: false },
        value: (u, v) => fmt(v) }))],
  }, [x, ...series.map((s) => s.values)], host);
  return u;
}

function lineChart(host, xs, series, opts) {
  const marks = (opts && opts.marks) || [];
  const u = new uPlot({
    width: chartWidth(host), height: (opts && opts.height) || 260, title: opts && opts.title,
    scales: { x: { time: false }, y: opts && opts.yrange ? { range: () => opts.yrange } : {} },
    axes: [{ label: "step" }, { size: 60 }],
    series: [{ label: "step" }, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: true,
      value: (u, v) => (v === null || v === undefined ? "–" : num(v)) }))],
    hooks: { draw: [(u) => {
      // curriculum transitions: a dashed vertical line at the step where the stage changed
      const ctx = u.ctx;
      ctx.save();
      ctx.setLineDash([6, 4]);
      ctx.strokeStyle = "#868e96";
      ctx.fillStyle = "#495057";
      ctx.font = `${11 * devicePixelRatio}px sans-serif`;
      for (const m of marks) {
        const cx = u.valToPos(m.step, "x", true);
        ctx.beginPath();
        ctx.moveTo(cx, u.bbox.top);
        ctx.lineTo(cx, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.fillText(m.label, cx + 4, u.bbox.top + 12 * devicePixelRatio);
      }
      ctx.restore();
    }] },
  }, [xs, ...series.map((s) => s.values)], host);
  return u;
}

// ---- pass-rate histograms (profile, eval) -------------------------------------------------------

function passRateBlock(hist, title) {
  const div = h("div", { class: "passrates" });
  const ns = {};
  for (const [n, , k] of hist.hist) ns[n] = (ns[n] || 0) + k;
  const n = Number(Object.entries(ns).sort((a, b) => b[1] - a[1])[0]?.[0] ?? 0);
  const labels = [], all = [], gold = [], none = [];
  for (let c = 0; c <= n; c++) {
    labels.push(`${c}/${n}`);
    const k = hist.hist.filter(([nn, cc]) => nn === n && cc === c).reduce((a, r) => a + r[2], 0);
    const v = k || null; // no bar, not a flat one, where no prompt has this pass rate
    all.push(c === n ? v : null); none.push(c === 0 ? v : null); gold.push(c > 0 && c < n ? v : null);
  }
  const b = hist.bands || {};
  const P = hist.prompts || 1;
  div.appendChild(h("p", { class: "bands" },
    h("span", { class: "chip solve_none" }, `solve_none ${fmt(b.solve_none || 0)} (${pct((b.solve_none || 0) / P)})`), " ",
    h("span", { class: "chip goldilocks" }, `band ${fmt(b.goldilocks || 0)} (${pct((b.goldilocks || 0) / P)})`), " ",
    h("span", { class: "chip solve_all" }, `solve_all ${fmt(b.solve_all || 0)} (${pct((b.solve_all || 0) / P)})`),
    ` of ${fmt(hist.prompts)} prompts` + (Object.keys(ns).length > 1 ? ` (chart: the ${fmt(ns[n])} with n = ${n})` : "")));
  const host = h("div", { class: "chart" });
  div.appendChild(host);
  requestAnimationFrame(() => barChart(host, labels, [
    { label: "solve_none", values: none, color: COLORS.solve_none },
    { label: "band", values: gold, color: COLORS.goldilocks },
    { label: "solve_all", values: all, color: COLORS.solve_all }], { title, xlabel: "pass rate" }));
  const depths = Object.entries(hist.by_depth || {});
  if (depths.length > 1 || (depths.length === 1 && depths[0][0] !== "1")) {
    div.appendChild(table(["depth", "prompts", "solve_none", "band", "solve_all"], depths.map(([d, c]) => {
      const t = (c.solve_none || 0) + (c.goldilocks || 0) + (c.solve_all || 0);
      return [d, t, pct((c.solve_none || 0) / t), pct((c.goldilocks || 0) / t), pct((c.solve_all || 0) / t)];
    }), { class: "by-depth" }));
  }
  return div;
}

function renderProfile(sec, data) {
  sec.appendChild(h("h3", {}, "Pass rates"));
  sec.appendChild(passRateBlock(data, "prompts per pass rate"));
  sec.appendChild(h("h3", {}, "Summary"));
  sec.appendChild(kv(data.summary));
  if (data.run && Object.keys(data.run).length) {
    sec.appendChild(h("details", {}, h("summary", {}, "settings (run.json)"), h("pre", {}, JSON.stringify(data.run, null, 2))));
  }
}

function renderEval(sec, data) {
  const res = data.results || {};
  const n = res.n;
  const benches = Object.entries(res.benchmarks || {});
  const ks = [1, 2, 4, 8, 16, 32, 64].filter((k) => k <= n);
  if (n && !ks.includes(n)) ks.push(n);
  sec.appendChild(h("h3", {}, `Benchmarks (n = ${n})`));
  const rows = benches.map(([name, m]) => [name, m.problems, pct(m[`avg@${n}`]), ...ks.map((k) => pct((m["pass@k"] || {})[String(k)])),
    pct(m.solve_all), pct(m.solve_none), num(m.mean_tokens, 1), pct(m.truncated)]);
  const o = res.overall || {};
  rows.push(["average", "", pct(o[`avg@${n}`]), ...ks.map((k) => pct((o["pass@k"] || {})[String(k)])), "", "", "", ""]);
  sec.appendChild(table(["benchmark", "problems", `avg@${n}`, ...ks.map((k) => `pass@${k}`), "solve_all", "solve_none", "mean tokens", "truncated"],
    rows, { class: "bench" }));
  const hists = Object.entries(data.hists || {});
  if (hists.length) {
    sec.appendChild(h("h3", {}, "Pass rates per benchmark"));
    const pick = h("select", { class: "bench-pick" }, hists.map(([name]) => h("option", { value: name }, name)));
    const host = h("div");
    const show = () => { host.replaceChildren(passRateBlock(data.hists[pick.value], pick.value)); };
    pick.addEventListener("change", show);
    sec.appendChild(h("p", {}, "benchmark: ", pick));
    sec.appendChild(host);
    show();
  }
  const comp = res.compositional;
  if (comp) {
    sec.appendChild(h("h3", {}, "Compositional analysis (Section 5.2)"));
    const crow = [];
    for (const [name, byDepth] of Object.entries(comp)) {
      for (const [d, m] of Object.entries(byDepth)) {
        const s = m.error_split || {}, c = m.error_counts || {};
        crow.push([name, d, m.problems, pct(m[`avg@${n}`]), pct(m.solve_all), pct(m.solve_none), pct(m.v1_recovery), pct(m.v1_stated),
          pct(s.q1), pct(s.linkage), pct(s.middle), pct(s.last), c.undecidable ?? "–"]);
      }
    }
    sec.appendChild(table(["benchmark", "depth", "problems", `avg@${n}`, "solve_all", "solve_none", "v1 recovery", "v1 stated",
      "q1 err", "linkage err", "middle err", "last err", "undecidable"], crow, { class: "comp" }));
  }
}

function renderTrain(sec, data) {
  const steps = data.steps || [];
  const xs = steps.map((r) => r.step);
  const col = (k) => steps.map((r) => (r[k] === undefined ? null : r[k]));
  const marks = (data.transitions || []).map((t) => ({ step: t.step, label: `${t.from_stage}→${t.to_stage || "end"}` }));
  sec.appendChild(h("p", {}, `${fmt(steps.length)} steps, ${fmt(marks.length)} curriculum transitions (dashed lines).`));
  const c1 = h("div", { class: "chart train-solve" }), c2 = h("div", { class: "chart" }), c3 = h("div", { class: "chart" });
  sec.append(h("h3", {}, "solve_all / solve_none / informative"), c1, h("h3", {}, "Reward"), c2, h("h3", {}, "Response length"), c3);
  requestAnimationFrame(() => {
    lineChart(c1, xs, [{ label: "solve_all", values: col("solve_all"), color: COLORS.solve_all },
      { label: "solve_none", values: col("solve_none"), color: COLORS.solve_none },
      { label: "informative", values: col("informative"), color: COLORS.informative }], { marks, yrange: [0, 1] });
    lineChart(c2, xs, [{ label: "reward (all groups)", values: col("reward_mean"), color: COLORS.reward },
      { label: "reward (trained groups)", values: col("reward_mean_trained"), color: COLORS.goldilocks }], { marks });
    lineChart(c3, xs, [{ label: "mean response length", values: col("response_length"), color: COLORS.length }], { marks });
  });
  if (marks.length) {
    sec.appendChild(h("h3", {}, "Transitions"));
    sec.appendChild(table(["step", "from", "to", "kind", "reason"], data.transitions.map((t) =>
      [t.step, t.from_stage, t.to_stage || "end", t.kind || "", t.reason || ""]), { class: "transitions" }));
  }
  if (data.summary && Object.keys(data.summary).length) {
    sec.appendChild(h("details", {}, h("summary", {}, "summary.json"), h("pre", {}, JSON.stringify(data.summary, null, 2))));
  }
}

// ---- compose -------------------------------------------------------------------------------------

function composeModel(data) {
  const P = data.problems, G = data.glues;
  const recs = data.records;
  const texts = new Array(recs.length);
  const byId = new Map();
  recs.forEach((r, i) => byId.set(r.id, i));
  const users = new Map(); // "pos:problem index" -> record indexes (neighbours in one pool)
  recs.forEach((r, i) => r.p.forEach((p, pos) => {
    const key = pos + ":" + p;
    let a = users.get(key);
    if (!a) users.set(key, (a = []));
    a.push(i);
  }));
  const off = (r, k) => (r.u ? r.u[k] : r.l[k][5]);
  // the record's text rebuilt from the parent and glue tables (checked equal when the page was built)
  function text(i) {
    if (texts[i] !== undefined) return texts[i];
    const r = recs[i];
    let t;
    if (r.text !== undefined) t = r.text;
    else {
      t = P[r.p[0]][0];
      for (let k = 0; k < r.l.length; k++) {
        const orig = P[r.p[k + 1]][0], o = off(r, k);
        t += "\n\n" + G[r.g[k]] + "\n\n" + orig.slice(0, o) + r.t[k] + orig.slice(o + r.l[k][4].length);
      }
    }
    return (texts[i] = t);
  }
  return { data, recs, P, G, text, byId, users, off };
}

function renderCompose(sec, data) {
  const st = data.stats || {};
  const M = composeModel(data);
  const cfg = st.config || {};
  sec.appendChild(h("p", { class: "lead" },
    `${fmt(st.accepted)} of ${fmt(st.candidates)} candidates accepted (${pct(st.acceptance)}), depth ${fmt(cfg.depth)}, `
    + `engine ${st.engine || cfg.engine || "?"}, seed ${fmt(cfg.seed)}, pools ${(st.pools || []).map(fmt).join(" × ")}`
    + (st.elapsed_s ? `, ${fmt(st.elapsed_s)} s` : "") + "."));

  // funnel
  const funnel = st.funnel || [];
  sec.appendChild(h("h3", {}, "Funnel"));
  const fh = h("div", { class: "chart funnel-chart" });
  sec.appendChild(fh);
  requestAnimationFrame(() => barChart(fh, funnel.map((f) => f.stage), [{ label: "kept", values: funnel.map((f) => f.kept), color: COLORS.kept }],
    { xlabel: "stage", xsize: 50 }));
  const first = funnel.length ? funnel[0].kept : 0;
  sec.appendChild(table(["stage", "kept", "dropped here", "share of candidates"], funnel.map((f, i) =>
    h("tr", { "data-stage": f.stage }, h("td", {}, f.stage), h("td", { class: "kept" }, fmt(f.kept)),
      h("td", { class: "dropped" }, fmt(i ? funnel[i - 1].kept - f.kept : 0)), h("td", {}, pct(first ? f.kept / first : null)))),
  { class: "funnel" }));

  // the reasons table sits under the funnel; the reject list, which it filters, after the records
  const rejects = h("div", { class: "rejects-part" });
  renderRejects(sec, rejects, data);
  renderRecords(sec, data, M);
  sec.appendChild(rejects);
}

function renderRejects(sec, part, data) {
  sec.appendChild(h("h3", {}, "Rejects by stage and reason"));
  const by = data.rejects_by || [];
  const pick = h("select", { class: "rej-reason" }, h("option", { value: "" }, "all reasons"),
    by.map(([s, r, n]) => h("option", { value: s + "\u001f" + r }, `${s} / ${r} (${fmt(n)})`)));
  const rows = by.map(([s, r, n]) => h("tr", { "data-reason": r, "data-stage": s }, h("td", {}, s), h("td", {}, r),
    h("td", { class: "n" }, fmt(n)), h("td", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); pick.value = s + "\u001f" + r; show(0); part.scrollIntoView(); } }, "show"))));
  sec.appendChild(table(["stage", "reason", "count", ""], rows, { class: "rej-by" }));
  const info = h("p", { class: "rej-count" });
  const list = h("div", { class: "rej-list" });
  const pager = h("div", { class: "pager" });
  part.append(h("h3", {}, "Rejected candidates"), h("p", {}, "reason: ", pick), info, list, pager);
  const all = data.rejects || [];
  const sampled = data.rejects_total > all.length;
  function show(page) {
    const [s, r] = pick.value ? pick.value.split("\u001f") : [null, null];
    const sel = pick.value ? all.filter((x) => x.stage === s && x.reason === r) : all;
    const total = pick.value ? (by.find((b) => b[0] === s && b[1] === r) || [0, 0, 0])[2] : data.rejects_total;
    info.replaceChildren(h("span", { class: "n" }, fmt(sel.length)), ` rejects` + (sampled ? ` shown of ${fmt(total)} (a seeded sample: the page keeps ${fmt(all.length)} of ${fmt(data.rejects_total)})` : ""));
    list.replaceChildren(table(["stage", "reason", "detail", "candidates / row"], sel.slice(page * PAGE, (page + 1) * PAGE).map((x) =>
      h("tr", { class: "reject" }, h("td", {}, x.stage), h("td", { class: "reason" }, x.reason), h("td", {}, x.detail, x.q ? h("div", { class: "q" }, x.q) : null),
        h("td", { class: "ids" }, x.c ? x.c.join(" → ") : x.row !== undefined ? `row ${x.row}` : ""))), { class: "rejects" }));
    pagerFor(pager, sel.length, page, show);
  }
  pick.addEventListener("change", () => show(0));
  show(0);
}

function pagerFor(el, total, page, go) {
  const pages = Math.max(1, Math.ceil(total / PAGE));
  el.replaceChildren(
    h("button", { disabled: page <= 0, onclick: () => go(page - 1) }, "‹ prev"),
    ` page ${fmt(page + 1)} of ${fmt(pages)} `,
    h("button", { disabled: page >= pages - 1, onclick: () => go(page + 1) }, "next ›"));
}

function esc(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function renderRecords(sec, data, M) {
  const recs = M.recs;
  sec.appendChild(h("h3", {}, "Composed records"));
  const depths = [...new Set(recs.map((r) => r.k))].sort((a, b) => a - b);
  const dPick = h("select", { class: "rec-depth" }, h("option", { value: "" }, "all depths"), depths.map((d) => h("option", { value: d }, `depth ${d}`)));
  const sPick = h("select", { class: "rec-source" }, h("option", { value: "" }, "all sources"), data.sources.map((s, i) => h("option", { value: i }, s || "(none)")));
  const q = h("input", { type: "search", class: "rec-search", placeholder: "search text, id or answer", size: 40 });
  const info = h("p", { class: "rec-count" });
  const list = h("div", { class: "rec-list" });
  const pager = h("div", { class: "pager" });
  const detail = h("div", { class: "rec-detail" });
  sec.append(h("p", { class: "filters" }, dPick, " ", sPick, " ", q), info, h("div", { class: "rec-split" }, h("div", {}, list, pager), detail));
  let sel = [];
  function apply(page) {
    const d = dPick.value === "" ? null : Number(dPick.value);
    const s = sPick.value === "" ? null : Number(sPick.value);
    const needle = q.value.trim().toLowerCase();
    sel = [];
    for (let i = 0; i < recs.length; i++) {
      const r = recs[i];
      if (d !== null && r.k !== d) continue;
      if (s !== null && r.s !== s) continue;
      if (needle && !(r.id.includes(needle) || r.a.toLowerCase().includes(needle) || M.text(i).toLowerCase().includes(needle))) continue;
      sel.push(i);
    }
    const sampled = data.records_total > recs.length;
    info.replaceChildren(h("span", { class: "n" }, fmt(sel.length)), ` records match` +
      (sampled ? ` (the page holds a seeded sample of ${fmt(recs.length)} of the run's ${fmt(data.records_total)} records)` : ` (of ${fmt(recs.length)})`));
    show(page || 0);
  }
  function show(page) {
    list.replaceChildren(...sel.slice(page * PAGE, (page + 1) * PAGE).map((i) => {
      const r = recs[i];
      const cut = (t, n) => (t.length > n ? t.slice(0, n) + "…" : t);
      // q1, then the problem the answer comes from: the part the glue hides in a long prompt
      const snip = r.text !== undefined ? [cut(r.text, 220)]
        : [cut(M.P[r.p[0]][0], 110), h("span", { class: "arrow" }, " ⟶ "), cut(M.P[r.p[r.p.length - 1]][0], 110)];
      return h("div", { class: "rec", "data-id": r.id, onclick: () => openRecord(i) },
        h("div", { class: "rec-head" }, h("code", {}, r.id), ` depth ${r.k} · ${data.sources[r.s]} · answer `, h("code", {}, r.a)),
        h("div", { class: "rec-snip" }, ...snip));
    }));
    pagerFor(pager, sel.length, page, show);
  }
  function openRecord(i) {
    const r = recs[i];
    detail.replaceChildren(recordView(M, i, openRecord));
    detail.dataset.id = r.id;
    history.replaceState(null, "", "#rec=" + r.id);
    detail.scrollIntoView({ block: "nearest" });
  }
  let timer = null;
  q.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => apply(0), 200); });
  dPick.addEventListener("change", () => apply(0));
  sPick.addEventListener("change", () => apply(0));
  apply(0);
  const m = /#rec=([0-9a-f]+)/.exec(location.hash);
  if (m && M.byId.has(m[1])) openRecord(M.byId.get(m[1]));
  else if (recs.length) openRecord(sel.length ? sel[0] : 0);
}

function recordView(M, i, open) {
  const r = M.recs[i];
  const P = M.P;
  const box = h("div", { class: "record" });
  box.appendChild(h("h4", {}, "record ", h("code", {}, r.id), ` · depth ${r.k} · answer `, h("code", {}, r.a)));
  box.appendChild(table(["link", "x", "y", "v1", "d", "v2", "v2_offset"], r.l.map((lk, k) =>
    [`${k + 1}: q${k + 1} → q${k + 2}`, lk[0], lk[1], lk[2], lk[3], lk[4], lk[5]]), { class: "links" }));
  box.appendChild(h("p", { class: "parents" }, "parents: ", r.p.map((p, k) => h("span", { class: "parent" },
    `q${k + 1} `, h("code", {}, P[p][1]), P[p][2] ? ` (${P[p][2]})` : "", k + 1 < r.p.length ? " · " : ""))));
  if (r.text !== undefined) {
    box.appendChild(h("p", { class: "warn" }, "This record's text does not have the SPC shape the diff view reads (for example an LLM rephrase): shown as is."));
    box.appendChild(h("pre", { class: "composed" }, r.text));
  } else {
    box.appendChild(h("div", { class: "q1" }, h("div", { class: "lbl" }, "q1 (unchanged)"), h("pre", {}, P[r.p[0]][0])));
    for (let k = 0; k < r.l.length; k++) {
      const lk = r.l[k], orig = P[r.p[k + 1]][0], o = M.off(r, k), lit = lk[4], tok = r.t[k];
      box.appendChild(h("div", { class: "glue" }, h("div", { class: "lbl" }, `glue ${k + 1}`), h("pre", {}, M.G[r.g[k]])));
      const left = h("pre", { class: "orig" });
      left.innerHTML = esc(orig.slice(0, o)) + `<mark class="lit" data-offset="${lk[5]}">${esc(lit)}</mark>` + esc(orig.slice(o + lit.length));
      const right = h("pre", { class: "subst" });
      right.innerHTML = esc(orig.slice(0, o)) + `<mark class="tok">${esc(tok)}</mark>` + esc(orig.slice(o + lit.length));
      box.appendChild(h("div", { class: "diff", "data-link": k + 1 },
        h("div", {}, h("div", { class: "lbl" }, `q${k + 2} original: the constant ${lit} at offset ${lk[5]}`), left),
        h("div", {}, h("div", { class: "lbl" }, `q${k + 2} as composed: ${lit} → ${tok.trim()}`), right)));
    }
    box.appendChild(h("details", {}, h("summary", {}, "the full prompt as the policy sees it"), h("pre", { class: "composed" }, M.text(i))));
  }
  // neighbours: records sharing a pool member at the same position
  const nb = h("div", { class: "neighbours" }, h("div", { class: "lbl" }, "neighbours in the same pool"));
  r.p.forEach((p, pos) => {
    const others = (M.users.get(pos + ":" + p) || []).filter((j) => j !== i);
    if (!others.length) return;
    nb.appendChild(h("p", {}, `same q${pos + 1} (${P[p][1]}): ${fmt(others.length)} other records `,
      ...others.slice(0, 12).map((j) => h("a", { href: "#rec=" + M.recs[j].id, class: "nb", onclick: (e) => { e.preventDefault(); open(j); } }, M.recs[j].id)),
      others.length > 12 ? " …" : ""));
  });
  box.appendChild(nb);
  return box;
}

const RENDERERS = { compose: renderCompose, profile: renderProfile, eval: renderEval, train: renderTrain };

async function inflate(b64) {
  const s = atob(b64);
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

async function main() {
  const app = document.getElementById("app");
  const report = await inflate(document.getElementById("crl-data").textContent.trim());
  const toc = h("nav", { class: "toc" });
  const main = h("main");
  app.replaceChildren(h("header", {}, h("h1", {}, `crl browse: ${report.root}`), toc), main);
  report.sections.forEach((s, idx) => {
    const id = `sec-${idx}`;
    const sec = h("section", { id, class: `view view-${s.view}`, "data-view": s.view, "data-path": s.path },
      h("h2", {}, `${s.title}: `, h("code", {}, s.path === "." ? report.root : s.path)));
    main.appendChild(sec);
    toc.appendChild(h("a", { href: "#" + id, onclick: (e) => { e.preventDefault(); sec.scrollIntoView(); } }, `${s.view}: ${s.path === "." ? report.root : s.path}`));
    const render = RENDERERS[s.view];
    if (!render) sec.appendChild(h("p", { class: "warn" }, `no renderer for view ${s.view}`));
    else render(sec, s.data);
  });
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  document.body.dataset.ready = "1";
}

main().catch((e) => {
  document.body.dataset.ready = "error";
  document.getElementById("app").prepend(h("pre", { class: "error" }, "could not render this report: " + (e && e.stack || e)));
});
