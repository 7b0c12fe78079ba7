/* The retrieval-eval HTML view (docs/view.md). Every value that comes from a report is put
   in the page as a text node or an attribute value, never as HTML: this script never sets
   innerHTML, never builds a link or an image from data, and never evaluates text. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("retrieval-eval-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var RUN = DATA.run || {};
  var RETRIEVERS = (RUN.retrievers || []).slice();
  var KS = (RUN.ks || []).slice();
  var BUDGETS = ((RUN.budget || {}).budgets || []).slice();
  var MAXK = KS.length ? Math.max.apply(null, KS) : 10;
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
                 "#8C6D31", "#7F3C8D", "#3B7A57", "#B8860B"];
  var state = {family: "recall", cut: "@" + MAXK, sort: null, sortDir: -1,
               qType: "", qRetriever: "", qOutcome: "", qK: MAXK, qDiffer: false, qText: "",
               open: null, cmpMetric: null, histMetric: null};

  /* ---------------------------------------------------------------- building blocks */
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function sv(tag, attrs, children) {
    var node = document.createElementNS(SVGNS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function setAttrs(node, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "text") node.textContent = String(value);
      else if (key === "onclick") node.addEventListener("click", value);
      else if (key === "onchange") node.addEventListener("change", value);
      else if (key === "oninput") node.addEventListener("input", value);
      else if (/^on/i.test(key)) throw new Error("no handler attributes");
      else node.setAttribute(key, value === true ? "" : String(value));
    });
  }
  function append(node, children) {
    if (children === null || children === undefined) return;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    });
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function fixed(v, digits) {
    /* Python's format(v, ".Nf"): an exact half rounds to even (toFixed rounds it up), so
       the page prints the terminal's and the Markdown's digits */
    var f = Math.pow(10, digits), s = v * f;
    if (Math.abs(s % 1) === 0.5) {
      var low = Math.floor(s);
      return ((low % 2 === 0 ? low : low + 1) / f).toFixed(digits);
    }
    return v.toFixed(digits);
  }
  function fmt(v, family) {
    if (!isNum(v)) return "–";
    return fixed(v, family === "tokens" ? 0 : 3);
  }
  function fmtMs(v) { return !isNum(v) ? "–" : v >= 100 ? v.toFixed(0) + " ms" : v.toFixed(2) + " ms"; }
  function color(name) {
    var i = RETRIEVERS.indexOf(name);
    if (name === "oracle") return "#888888";
    return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
  }
  function short(text, n) {
    text = String(text === null || text === undefined ? "" : text);
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }
  function section(id, title, intro) {
    var s = el("section", {id: id, "aria-labelledby": id + "-h"}, [
      el("h2", {id: id + "-h", text: title})]);
    if (intro) append(s, el("p", {"class": "intro", text: intro}));
    return s;
  }
  function segmented(label, options, current, onPick) {
    var group = el("div", {"class": "seg", role: "group", "aria-label": label});
    options.forEach(function (o) {
      append(group, el("button", {type: "button", "aria-pressed": String(o.value === current),
                                  "data-value": o.value, text: o.label,
                                  onclick: function () { onPick(o.value); }}));
    });
    return group;
  }
  function select(label, options, current, onPick, attrs) {
    var s = el("select", Object.assign({"aria-label": label, onchange: function () {
      onPick(s.value); }}, attrs || {}));
    options.forEach(function (o) {
      var opt = el("option", {value: o.value, text: o.label});
      if (o.value === current) opt.selected = true;
      s.appendChild(opt);
    });
    return el("label", {"class": "field"}, [el("span", {text: label}), s]);
  }

  /* ---------------------------------------------------------------- the run's numbers */
  var SUMMARY = RUN.summary || {};
  function types() {
    var seen = [];
    RETRIEVERS.forEach(function (r) {
      Object.keys(((SUMMARY[r] || {}).by_type) || {}).forEach(function (t) {
        if (seen.indexOf(t) < 0) seen.push(t);
      });
    });
    return seen;
  }
  var TYPES = types();
  function families() {
    var out = {};
    var order = [];
    RETRIEVERS.forEach(function (r) {
      Object.keys(((SUMMARY[r] || {}).overall) || {}).forEach(function (key) {
        var at = key.indexOf("@");
        if (at < 0) return;
        var fam = key.slice(0, at), cut = key.slice(at);
        if (/tok$/.test(cut)) fam = "recall (budget)";
        if (!out[fam]) { out[fam] = []; order.push(fam); }
        if (out[fam].indexOf(cut) < 0) out[fam].push(cut);
      });
    });
    order.sort(function (a, b) { return (a === "recall" ? -1 : 0) - (b === "recall" ? -1 : 0); });
    return order.map(function (f) {
      var cuts = out[f].slice().sort(function (a, b) { return parseInt(a.slice(1), 10) - parseInt(b.slice(1), 10); });
      return {name: f, cuts: cuts};
    });
  }
  var FAMILIES = families();
  function metricKey(family, cut) { return (family === "recall (budget)" ? "recall" : family) + cut; }
  function cell(retriever, type, key) {
    var s = SUMMARY[retriever] || {};
    var row = type === "overall" ? s.overall : (s.by_type || {})[type];
    return row ? row[key] : undefined;
  }
  function nOf(type) {
    for (var i = 0; i < RETRIEVERS.length; i++) {
      var s = SUMMARY[RETRIEVERS[i]] || {};
      var row = type === "overall" ? s.overall : (s.by_type || {})[type];
      if (row && isNum(row.n)) return row.n;
    }
    return null;
  }

  /* ---------------------------------------------------------------- 1. the run */
  function factsList() {
    var ds = RUN.dataset || {}, model = RUN.model || {}, git = ((RUN.run || {}).git) || {};
    var tok = ((RUN.budget || {}).tokenizer) || null;
    var facts = [
      ["dataset", [ds.name, ds.sha256 ? "sha256 " + String(ds.sha256).slice(0, 12) : null,
                   ds.gold_source ? "gold: " + ds.gold_source : null]],
      ["lane", [RUN.lane]],
      ["model", [model && typeof model === "object" ? model.name : model,
                 model && model.fingerprint ? "fingerprint " + String(model.fingerprint).slice(0, 12) : null]],
      ["recipe", model && typeof model === "object" ? [model.pooling ? model.pooling + " pooling" : null,
                 isNum(model.dim) ? "dim " + model.dim : null,
                 isNum(model.max_length) ? "max length " + model.max_length : null,
                 model.query_prefix ? "query prefix " + JSON.stringify(model.query_prefix) : null] : []],
      ["protocol", [RUN.protocol, RUN.granularity ? "granularity " + RUN.granularity : null]],
      ["commit", [git.commit ? String(git.commit).slice(0, 12) : "not a git checkout", git.branch]],
      ["tokenizer", tok ? [tok.name, tok.library ? tok.library + " " + (tok.version || "") : null,
                           tok.sha256 ? "sha256 " + String(tok.sha256).slice(0, 12) : null]
                        : ["no budget asked for"]],
      ["date", [(RUN.run || {}).created]],
      ["pairs", [String(RUN.pairs ? uniqueQuestions().length : 0) + " questions",
                 "k " + KS.join(", "), BUDGETS.length ? "budgets " + BUDGETS.join(", ") + " tokens" : null]]
    ];
    var dl = el("dl", {"class": "facts", id: "facts"});
    facts.forEach(function (f) {
      var parts = (f[1] || []).filter(function (x) { return x !== null && x !== undefined && x !== ""; });
      append(dl, el("div", {"data-fact": f[0]}, [el("dt", {text: f[0]}),
                                              el("dd", {text: parts.length ? parts.join(" · ") : "–"})]));
    });
    return dl;
  }

  function summaryTable() {
    var fam = FAMILIES.filter(function (f) { return f.name === state.family; })[0] || FAMILIES[0];
    if (!fam) return el("p", {text: "no pair was scored"});
    if (fam.cuts.indexOf(state.cut) < 0) state.cut = fam.cuts[fam.cuts.length - 1];
    var key = metricKey(fam.name, state.cut);
    var columns = TYPES.concat(["overall"]);
    var lowerBetter = fam.name === "tokens";
    var best = {};
    columns.forEach(function (t) {
      var vals = RETRIEVERS.filter(function (r) { return r !== "oracle"; })
        .map(function (r) { return cell(r, t, key); }).filter(isNum);
      if (vals.length) best[t] = lowerBetter ? Math.min.apply(null, vals) : Math.max.apply(null, vals);
    });
    var rows = RETRIEVERS.slice();
    if (state.sort) {
      rows.sort(function (a, b) {
        var va = cell(a, state.sort, key), vb = cell(b, state.sort, key);
        va = isNum(va) ? va : -Infinity; vb = isNum(vb) ? vb : -Infinity;
        return (va - vb) * state.sortDir;
      });
    }
    var head = el("tr", null, [el("th", {scope: "col", text: "retriever"})]);
    columns.forEach(function (t) {
      var sorted = state.sort === t;
      var th = el("th", {scope: "col", "aria-sort": sorted ? (state.sortDir < 0 ? "descending" : "ascending") : "none"});
      append(th, el("button", {type: "button", "class": "sort", "data-sort": t,
                               title: "sort the retrievers by this column",
                               onclick: function () {
                                 if (state.sort === t) state.sortDir = -state.sortDir;
                                 else { state.sort = t; state.sortDir = -1; }
                                 renderTable();
                               }}, [t, el("span", {"class": "n", text: "n=" + (nOf(t) === null ? "?" : nOf(t))}),
                                    el("span", {"class": "arrow", "aria-hidden": "true",
                                                text: sorted ? (state.sortDir < 0 ? "▼" : "▲") : "↕"})]));
      append(head, th);
    });
    var body = el("tbody");
    rows.forEach(function (r) {
      var tr = el("tr", {"data-retriever": r}, [el("th", {scope: "row"}, [
        el("span", {"class": "swatch", style: "background:" + color(r), "aria-hidden": "true"}), r])]);
      columns.forEach(function (t) {
        var v = cell(r, t, key);
        var isBest = r !== "oracle" && isNum(v) && best[t] !== undefined && v === best[t];
        append(tr, el("td", {"data-type": t, "data-metric": key, "data-value": isNum(v) ? String(v) : "",
                             "class": isBest ? "best" : null, title: isNum(v) ? r + " " + key + " " + t + ": " + v : null},
                      [fmt(v, fam.name), isBest ? el("span", {"class": "best-mark", title: "best in this column (oracle aside)", text: " ★"}) : null]));
      });
      append(body, tr);
    });
    return el("div", {"class": "scroll"}, el("table", {"class": "summary", id: "summary-table"}, [
      el("caption", {text: key + " by question type (" + (lowerBetter ? "★ fewest tokens" : "★ best") + " per column, oracle aside)"}),
      el("thead", null, head), body]));
  }

  var tableHolder = el("div", {id: "table-holder"});
  var barsHolder = el("div", {id: "bars-holder"});
  function renderTable() {
    clear(tableHolder);
    var fam = FAMILIES.filter(function (f) { return f.name === state.family; })[0] || FAMILIES[0];
    if (fam) {
      append(tableHolder, el("div", {"class": "controls"}, [
        segmented("metric family", FAMILIES.map(function (f) { return {value: f.name, label: f.name}; }),
                  state.family, function (v) { state.family = v; renderTable(); }),
        segmented("cut-off", fam.cuts.map(function (c) { return {value: c, label: c}; }),
                  fam.cuts.indexOf(state.cut) >= 0 ? state.cut : fam.cuts[fam.cuts.length - 1],
                  function (v) { state.cut = v; renderTable(); })]));
    }
    append(tableHolder, summaryTable());
    renderBars();
  }

  function runSection() {
    var s = section("run", "The run");
    append(s, factsList());
    append(s, tableHolder);
    var lines = (RUN.diagnostic_lines || []).concat(RUN.headline_lines || []);
    if (lines.length) {
      append(s, el("div", {"class": "lines", id: "headline"}, lines.map(function (l) {
        return el("p", {text: l});
      })));
    }
    var errors = RUN.errors || [];
    if (errors.length) append(s, el("p", {"class": "warn", text: errors.length + " item(s) failed; their pairs are not scored"}));
    renderTable();
    return s;
  }

  /* ---------------------------------------------------------------- figures */
  function frame(w, h, title, id) {
    var root = sv("svg", {viewBox: "0 0 " + w + " " + h, role: "img", "aria-label": title,
                          "class": "chart" + (w > 500 ? " wide" : ""), id: id,
                          preserveAspectRatio: "xMidYMid meet"});
    append(root, sv("title", {text: title}));
    return root;
  }
  function linear(d0, d1, r0, r1) {
    return function (v) { return d1 === d0 ? (r0 + r1) / 2 : r0 + (v - d0) * (r1 - r0) / (d1 - d0); };
  }
  function logScale(d0, d1, r0, r1) {
    var l0 = Math.log(d0), l1 = Math.log(d1);
    return function (v) { return r0 + (Math.log(Math.max(v, d0)) - l0) * (r1 - r0) / (l1 - l0 || 1); };
  }
  function yAxis(g, y, x0, x1, label) {
    [0, 0.25, 0.5, 0.75, 1].forEach(function (t) {
      append(g, sv("line", {x1: x0, x2: x1, y1: y(t), y2: y(t), "class": "grid"}));
      append(g, sv("text", {x: x0 - 6, y: y(t) + 4, "class": "tick", "text-anchor": "end", text: t.toFixed(2)}));
    });
    append(g, sv("text", {x: 12, y: y(0.5), "class": "axis-label", transform: "rotate(-90 12 " + y(0.5) + ")",
                          "text-anchor": "middle", text: label}));
  }
  function logTicks(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      [1, 2, 5].forEach(function (m) { var v = m * Math.pow(10, e); if (v >= lo && v <= hi) out.push(v); });
    }
    return out;
  }
  function tickText(v) { return v >= 1000 ? (v / 1000) + "k" : String(+v.toPrecision(3)); }
  function legend(names) {
    return el("ul", {"class": "legend"}, names.map(function (r) {
      return el("li", null, [el("span", {"class": "swatch", style: "background:" + color(r), "aria-hidden": "true"}), r]);
    }));
  }

  function renderBars() {
    clear(barsHolder);
    var fam = FAMILIES.filter(function (f) { return f.name === state.family; })[0];
    if (!fam || fam.name === "tokens") fam = FAMILIES[0];
    if (!fam) return;
    var cut = fam.cuts.indexOf(state.cut) >= 0 ? state.cut : fam.cuts[fam.cuts.length - 1];
    var key = metricKey(fam.name, cut);
    var groups = TYPES.concat(["overall"]);
    var w = 760, h = 300, left = 48, right = 10, top = 14, bottom = 92;
    var y = linear(0, 1, h - bottom, top);
    var svgNode = frame(w, h, key + " per question type, one bar per retriever", "bars");
    var g = sv("g");
    yAxis(g, y, left, w - right, key);
    var gw = (w - left - right) / groups.length, bw = Math.max(2, (gw - 10) / Math.max(1, RETRIEVERS.length));
    groups.forEach(function (t, gi) {
      var gx = left + gi * gw + 5;
      RETRIEVERS.forEach(function (r, ri) {
        var v = cell(r, t, key);
        if (!isNum(v)) return;
        append(g, sv("rect", {x: gx + ri * bw, y: y(v), width: Math.max(1, bw - 1), height: Math.max(0, y(0) - y(v)),
                              fill: color(r), "data-retriever": r, "data-type": t, "data-value": v},
                     sv("title", {text: r + " · " + t + " · " + key + " " + fmt(v)})));
      });
      var lx = gx + gw / 2 - 5;
      append(g, sv("text", {x: lx, y: h - bottom + 12, "class": "tick", "text-anchor": "end",
                            transform: "rotate(-35 " + lx + " " + (h - bottom + 12) + ")", text: short(t, 26)}));
    });
    append(svgNode, g);
    append(barsHolder, el("figure", null, [svgNode, el("figcaption", {text: key + " per question type (follows the table's metric and cut-off)"}), legend(RETRIEVERS)]));
  }

  function reachOf(p) {
    /* budget.reach as the report holds it; a report written before it existed: worked out
       from the tokens it kept of the first max-k memories (exact up to their sum) */
    var b = p.budget || {};
    if (b.reach) return {reach: b.reach, read: b.read_tokens, ended: b.ended};
    if (!Array.isArray(b.tokens)) return null;  /* no budget; [] : nothing ranked, none reached */
    var reach = {}, total = 0;
    (p.gold || []).forEach(function (g) { reach[g] = null; });
    b.tokens.forEach(function (t, i) {
      total += t;
      var m = (p.memories || [])[i];
      var covers = p.memories ? (m ? memCovers(m) : []) : [(p.ranked || [])[i]];
      covers.forEach(function (s) { if (reach[s] === null) reach[s] = total; });
    });
    return {reach: reach, read: total, ended: b.tokens.length === b.read ? b.ended : null};
  }
  function curveOf(name) {
    var pairs = (RUN.pairs || []).filter(function (p) { return p.retriever === name && reachOf(p); });
    if (!pairs.length || !BUDGETS.length) return null;
    var maxB = Math.max.apply(null, BUDGETS), n = pairs.length, limit = Infinity, events = [];
    pairs.forEach(function (p) {
      var r = reachOf(p), reach = r.reach, gold = Object.keys(reach);
      var whole = r.ended && r.ended[String(maxB)] === "ranking";
      if (!whole && isNum(r.read)) limit = Math.min(limit, r.read);
      gold.forEach(function (id) {
        if (isNum(reach[id])) events.push([reach[id], 1 / (gold.length * n)]);
      });
    });
    events.sort(function (a, b) { return a[0] - b[0]; });
    return {events: events, limit: limit, n: n,
            at: function (b) { var s = 0; events.forEach(function (e) { if (e[0] <= b) s += e[1]; }); return s; }};
  }

  function curveFigure() {
    var curves = {}, names = [];
    RETRIEVERS.forEach(function (r) { var c = curveOf(r); if (c) { curves[r] = c; names.push(r); } });
    if (!names.length) {
      return el("p", {"class": "note", id: "curve-missing", text: BUDGETS.length
        ? "This report keeps no token counts of its rankings: run again to draw recall against context tokens."
        : "Recall against context tokens needs token counts: run with --retrieval-eval-budget (e.g. 500,2000) to draw it."});
    }
    var maxB = Math.max.apply(null, BUDGETS), minB = Math.min.apply(null, BUDGETS);
    var lo = Math.pow(10, Math.floor(Math.log10(Math.max(1, minB / 10))));
    var hi = maxB * 4;
    names.forEach(function (r) {
      var c = curves[r];
      var last = c.events.length ? c.events[c.events.length - 1][0] : maxB;
      /* exact up to the fewest tokens a pair read (this version reads past k to the
         largest budget, so that is never short of it; an older report's kept tokens may be) */
      c.end = isFinite(c.limit) ? c.limit : Math.max(last, maxB) * 1.25;
      hi = Math.max(hi, Math.min(c.end, maxB * 64));
    });
    hi = Math.pow(10, Math.ceil(Math.log10(hi) * 4) / 4);
    var w = 760, h = 340, left = 48, right = 14, top = 14, bottom = 40;
    var x = logScale(lo, hi, left, w - right), y = linear(0, 1, h - bottom, top);
    var svgNode = frame(w, h, "recall against context tokens, one curve per retriever", "curve");
    var g = sv("g");
    yAxis(g, y, left, w - right, "recall@tokens");
    logTicks(lo, hi).forEach(function (t) {
      append(g, sv("line", {x1: x(t), x2: x(t), y1: top, y2: h - bottom, "class": "grid"}));
      append(g, sv("text", {x: x(t), y: h - bottom + 14, "class": "tick", "text-anchor": "middle", text: tickText(t)}));
    });
    append(g, sv("text", {x: (left + w - right) / 2, y: h - 4, "class": "axis-label", "text-anchor": "middle",
                          text: "context tokens handed to a reader (" + ((((RUN.budget || {}).tokenizer) || {}).name || "tokens") + ", log scale)"}));
    BUDGETS.forEach(function (b) {
      append(g, sv("line", {x1: x(b), x2: x(b), y1: top, y2: h - bottom, "class": "budget-line", "data-budget": b}));
      append(g, sv("text", {x: x(b) + 3, y: top + 10, "class": "tick", text: b + " tok"}));
    });
    names.forEach(function (r) {
      /* one pass over the sorted steps: each distinct token count lifts the curve once */
      var c = curves[r], ev = c.events, end = Math.min(c.end, hi), v = 0, i = 0;
      while (i < ev.length && ev[i][0] <= lo) v += ev[i++][1];
      var d = "M" + x(lo).toFixed(1) + "," + y(v).toFixed(1);
      while (i < ev.length && ev[i][0] <= end) {
        var t = ev[i][0];
        while (i < ev.length && ev[i][0] === t) v += ev[i++][1];
        d += "H" + x(t).toFixed(1) + "V" + y(v).toFixed(1);
      }
      d += "H" + x(end).toFixed(1);
      append(g, sv("path", {d: d, "class": "curve" + (r === "oracle" ? " oracle" : ""), stroke: color(r), "data-retriever": r,
                            "data-end": c.end}, sv("title", {text: r + ": recall against context tokens, exact up to " + Math.round(c.end) + " tokens"})));
      BUDGETS.forEach(function (b) {
        var summary = cell(r, "overall", "recall@" + b + "tok");
        var val = b <= c.end || !isNum(summary) ? c.at(b) : summary;  /* past the curve: the run's */
        append(g, sv("circle", {cx: x(b), cy: y(val), r: 4, fill: color(r), "class": "budget-point",
                                "data-retriever": r, "data-budget": b, "data-value": val},
                     sv("title", {text: r + " recall@" + b + "tok " + fmt(isNum(summary) ? summary : val)})));
      });
    });
    append(svgNode, g);
    return el("figure", null, [svgNode, el("figcaption", {text: "Recall against the tokens of the context a reader is handed: the ranking's memories taken in rank order while they fit (the first that does not fit ends the context). Dashed lines: the run's budgets, dots: its recall@<B>tok. A curve stops where its rankings were read to."}), legend(names)]);
  }

  function paretoFigure(id, title, xLabel, costOf) {
    var pts = [];
    var key = "recall@" + MAXK;
    RETRIEVERS.forEach(function (r) {
      if (r === "oracle") return;
      var cost = costOf(r), rec = cell(r, "overall", key);
      if (isNum(cost) && isNum(rec)) pts.push({r: r, c: Math.max(cost, 1e-3), v: rec});
    });
    var missing = RETRIEVERS.filter(function (r) { return r !== "oracle" && !pts.some(function (p) { return p.r === r; }); });
    if (!pts.length) return el("p", {"class": "note", text: title + ": no retriever recorded this cost."});
    var lo = Math.min.apply(null, pts.map(function (p) { return p.c; })), hi = Math.max.apply(null, pts.map(function (p) { return p.c; }));
    lo = Math.pow(10, Math.floor(Math.log10(lo))); hi = Math.pow(10, Math.ceil(Math.log10(hi) + 1e-9));
    if (hi <= lo) hi = lo * 10;
    var w = 370, h = 280, left = 48, right = 12, top = 24, bottom = 40;
    var x = logScale(lo, hi, left, w - right), y = linear(0, 1, h - bottom, top);
    var svgNode = frame(w, h, title, id);
    var g = sv("g");
    yAxis(g, y, left, w - right, key);
    logTicks(lo, hi).forEach(function (t) {
      append(g, sv("text", {x: x(t), y: h - bottom + 14, "class": "tick", "text-anchor": "middle", text: tickText(t)}));
    });
    append(g, sv("text", {x: (left + w - right) / 2, y: h - 4, "class": "axis-label", "text-anchor": "middle", text: xLabel}));
    var sorted = pts.slice().sort(function (a, b) { return a.c - b.c || b.v - a.v; });
    var front = [], bestV = -1;
    sorted.forEach(function (p) { if (p.v > bestV) { front.push(p); bestV = p.v; } });
    if (front.length) {
      var d = "M" + x(front[0].c).toFixed(1) + "," + y(front[0].v).toFixed(1);
      for (var i = 1; i < front.length; i++) d += "H" + x(front[i].c).toFixed(1) + "V" + y(front[i].v).toFixed(1);
      d += "H" + x(hi).toFixed(1);
      append(g, sv("path", {d: d, "class": "front"}, sv("title", {text: "Pareto front: no retriever is both cheaper and better"})));
    }
    var placed = [];  /* labels' boxes: a label that would cover another moves down a line */
    pts.forEach(function (p) {
      var onFront = front.indexOf(p) >= 0;
      append(g, sv("circle", {cx: x(p.c), cy: y(p.v), r: onFront ? 6 : 4.5, fill: color(p.r), "class": onFront ? "on-front" : "off-front",
                              "data-retriever": p.r, "data-cost": p.c, "data-value": p.v},
                   sv("title", {text: p.r + ": " + key + " " + fmt(p.v) + ", " + fmtMs(p.c) + (onFront ? " (on the front)" : "")})));
      var right = x(p.c) > w - 110, label = short(p.r, 22), lw = label.length * 6.2;
      var lx = right ? x(p.c) - 7 - lw : x(p.c) + 7, ly = y(p.v) - 7;
      for (var tries = 0; tries < 6 && placed.some(function (b) {
        return lx < b[0] + b[2] && b[0] < lx + lw && Math.abs(ly - b[1]) < 12; }); tries++) ly += 13;
      placed.push([lx, ly, lw]);
      append(g, sv("text", {x: lx, y: ly, "class": "point-label", text: label}));
    });
    append(svgNode, g);
    return el("figure", null, [svgNode, el("figcaption", {text: title + (missing.length ? " (not recorded: " + missing.join(", ") + ")" : "")})]);
  }

  function picturesSection() {
    var s = section("pictures", "Pictures");
    append(s, el("div", {"class": "fig-row"}, [
      el("div", {"class": "fig-cell"}, [el("h3", {text: "Recall by question type"}), barsHolder]),
      el("div", {"class": "fig-cell"}, [el("h3", {text: "Recall against context tokens"}), curveFigure()])]));
    append(s, el("h3", {text: "Recall against cost"}));
    var timing = RUN.timing || {};
    append(s, el("div", {"class": "pair-figs"}, [
      paretoFigure("latency", "recall against query latency (median ms per query)", "median query latency, ms (log)",
                   function (r) { return ((timing[r] || {}).query || {}).median; }),
      paretoFigure("ingest", "recall against ingest cost (median ms per persona)", "median ingest per persona, ms (log)",
                   function (r) { return ((timing[r] || {}).ingest || {}).median; })]));
    return s;
  }

  /* ---------------------------------------------------------------- 3. every question */
  var BYQ = {};
  var QORDER = [];
  function uniqueQuestions() {
    if (QORDER.length) return QORDER;
    (RUN.pairs || []).forEach(function (p) {
      var id = String(p.question_id);
      if (!BYQ[id]) { BYQ[id] = {}; QORDER.push(id); }
      BYQ[id][p.retriever] = p;
    });
    return QORDER;
  }
  function first(qid) {
    var ps = BYQ[qid] || {};
    for (var i = 0; i < RETRIEVERS.length; i++) if (ps[RETRIEVERS[i]]) return ps[RETRIEVERS[i]];
    var keys = Object.keys(ps);
    return keys.length ? ps[keys[0]] : null;
  }
  function outcome(p, k) {
    var v = p && p.metrics ? p.metrics["recall@" + k] : undefined;
    if (!isNum(v)) return "none";
    return v >= 1 ? "hit" : v > 0 ? "partial" : "miss";
  }
  var OUTCOME_MARK = {hit: "●", partial: "◐", miss: "○", none: "·"};
  var listHolder = el("div", {id: "question-list", "class": "qlist"});
  var detailHolder = el("div", {id: "question-detail", "class": "qdetail", tabindex: "-1", "aria-live": "polite"});
  var countLine = el("p", {"class": "count", id: "question-count"});

  function matches(qid) {
    var p0 = first(qid);
    if (!p0) return false;
    if (state.qType && p0.question_type !== state.qType) return false;
    if (state.qText) {
      var t = state.qText.toLowerCase();
      if (String(qid).toLowerCase().indexOf(t) < 0 && String(p0.question || "").toLowerCase().indexOf(t) < 0) return false;
    }
    var ps = BYQ[qid];
    var real = RETRIEVERS.filter(function (r) { return r !== "oracle" && ps[r]; });
    if (state.qDiffer) {
      var vals = real.map(function (r) { return (ps[r].metrics || {})["recall@" + state.qK]; });
      if (vals.every(function (v) { return v === vals[0]; })) return false;
    }
    if (state.qOutcome) {
      var who = state.qRetriever ? [state.qRetriever] : real;
      if (!who.some(function (r) { return ps[r] && outcome(ps[r], state.qK) === state.qOutcome; })) return false;
    }
    else if (state.qRetriever && !ps[state.qRetriever]) return false;
    return true;
  }

  function renderList() {
    clear(listHolder);
    var shown = uniqueQuestions().filter(matches);
    countLine.textContent = shown.length + " of " + uniqueQuestions().length + " questions";
    var ul = el("ul", {role: "list"});
    shown.forEach(function (qid) {
      var p0 = first(qid), ps = BYQ[qid];
      var marks = el("span", {"class": "marks"}, RETRIEVERS.filter(function (r) { return ps[r]; }).map(function (r) {
        var o = outcome(ps[r], state.qK);
        return el("span", {"class": "mark " + o, style: "color:" + color(r), title: r + ": " + o + " at " + state.qK,
                           role: "img", "aria-label": r + " " + o, text: OUTCOME_MARK[o]});
      }));
      append(ul, el("li", null, el("button", {type: "button", "class": "qbtn" + (state.open === qid ? " current" : ""),
                                              "data-qid": qid, "aria-current": state.open === qid ? "true" : null,
                                              onclick: function () { openQuestion(qid, true); }}, [
        el("span", {"class": "qid", text: qid}), el("span", {"class": "qtype", text: p0.question_type}),
        el("span", {"class": "qtext", text: p0.question || ""}), marks])));
    });
    append(listHolder, ul);
  }

  function goldRanks(p) {
    var out = {}, ex = (p.explain || {}).gold_ranks || {};
    (p.gold || []).forEach(function (g) {
      if (Object.prototype.hasOwnProperty.call(ex, g)) out[g] = ex[g];
      else { var i = (p.ranked || []).indexOf(g); out[g] = i >= 0 ? i + 1 : null; }
    });
    return out;
  }
  function sessionOf(turn) { return String(turn).replace(/_\d+$/, ""); }
  function memCovers(m) {
    return (m.sessions || []).concat((m.turns || []).map(sessionOf));
  }

  function cutRows(p, index) {
    /* the budget contexts that end after item `index` (0-based; -1: before the first) */
    var fit = (p.budget || {}).fit || {};
    return BUDGETS.filter(function (b) { return fit[String(b)] === index + 1; }).map(function (b) {
      var held = ((p.budget || {}).held || {})[String(b)];
      return el("li", {"class": "cut", "data-budget": b, text: "✂ " + b + "-token context ends here (" + (isNum(held) ? held : "?") + " tokens held)"});
    });
  }

  function maskWords(mask, words) {
    var out = [];
    if (!isNum(mask) || !Array.isArray(words)) return out;
    for (var n = 0; n < words.length; n++) if (Math.floor(mask / Math.pow(2, n)) % 2 === 1) out.push(String(words[n]));
    return out;
  }
  function rowOf(list, i, id) {
    /* a per-row fact: this version's list in the shown rows' order, or an older report's
       object keyed by id (reporting/explain_facts.py) */
    if (Array.isArray(list)) return list[i];
    if (list && typeof list === "object") return list[id];
    return undefined;
  }
  function rowFacts(p, i, id) {
    var ex = p.explain || {}, bits = [];
    var fu = ex.fusion;
    if (fu) {
      var rr = rowOf(fu.rows, i, id);
      if (rr && !Array.isArray(rr)) rr = [rr.semantic, rr.fts];
      if (rr && isNum(fu.rrf_k)) {
        var part = function (r) { return isNum(r) ? 1 / (fu.rrf_k + r) : 0; };
        bits.push("sem " + (isNum(rr[0]) ? rr[0] : "-") + " + fts " + (isNum(rr[1]) ? rr[1] : "-") + " = " + (part(rr[0]) + part(rr[1])).toFixed(4));
      }
    }
    [fu, ex.fts].forEach(function (src) {
      if (!src) return;
      var m = rowOf(src.matched, i, id);
      if (m === undefined) return;
      var words = Array.isArray(m) ? m.map(String) : maskWords(m, src.words);
      bits.push(words.length ? "matched " + words.join(", ") : "matched none");
    });
    var score = rowOf(ex.rows, i, id);
    if (score && typeof score === "object") score = score.score;
    if (isNum(score) && !fu) bits.push("score " + (+score.toPrecision(4)));
    return bits.length ? el("span", {"class": "why", text: bits.join(" · ")}) : null;
  }

  function retrieverColumn(p, r, k, goldSet) {
    var col = el("section", {"class": "rcol", "data-retriever": r, "aria-label": r}, [
      el("h4", null, [el("span", {"class": "swatch", style: "background:" + color(r), "aria-hidden": "true"}), r]),
      el("p", {"class": "rmetrics", text: KS.map(function (kk) { return "@" + kk + " " + fmt((p.metrics || {})["recall@" + kk]); }).join("  ")})]);
    var ol = el("ol", {"class": "ranking"});
    var tokens = (p.budget || {}).tokens || [];
    append(ol, cutRows(p, -1));
    if (p.memories && p.memories.length) {
      p.memories.forEach(function (m, i) {
        var covers = memCovers(m), isGold = covers.some(function (s) { return goldSet[s]; });
        if (m.rank > k && i >= k) return;
        append(ol, el("li", {"class": isGold ? "gold" : null, "data-id": m.id, "data-rank": m.rank}, [
          el("span", {"class": "rank", text: String(m.rank)}),
          el("span", {"class": "id", text: m.id}), isGold ? el("span", {"class": "gold-mark", text: "★ gold"}) : null,
          el("span", {"class": "prov", text: [m.sessions && m.sessions.length ? "sessions " + m.sessions.join(", ") : null,
                                             m.turns && m.turns.length ? "turns " + m.turns.join(", ") : null,
                                             isNum(m.tokens) ? m.tokens + " tok" : null,
                                             isNum(m.score) ? "score " + (+m.score.toPrecision(4)) : null].filter(Boolean).join(" · ")}),
          (m.text || m.excerpt) ? el("span", {"class": "excerpt", text: m.text || m.excerpt}) : null]));
        append(ol, cutRows(p, i));
      });
    } else {
      (p.ranked || []).slice(0, k).forEach(function (id, i) {
        var isGold = !!goldSet[id];
        append(ol, el("li", {"class": isGold ? "gold" : null, "data-id": id, "data-rank": i + 1}, [
          el("span", {"class": "rank", text: String(i + 1)}), el("span", {"class": "id", text: id}),
          isGold ? el("span", {"class": "gold-mark", text: "★ gold"}) : null,
          isNum(tokens[i]) ? el("span", {"class": "prov", text: tokens[i] + " tok"}) : null,
          rowFacts(p, i, id)]));
        append(ol, cutRows(p, i));
      });
    }
    append(col, ol);
    var ranks = goldRanks(p), past = el("ul", {"class": "gold-ranks"});
    Object.keys(ranks).forEach(function (g) {
      var rank = ranks[g];
      append(past, el("li", {"data-gold": g, "data-rank": rank === null ? "" : rank, "class": rank !== null && rank <= k ? "in" : "out"},
                      ["gold ", el("code", {text: g}), rank === null ? ": not in the ranking" + (isNum((p.explain || {}).searched) ? " (" + p.explain.searched + " searched)" : "")
                                                                     : ": rank " + rank + (rank > k ? " (past k=" + k + ")" : "")]));
    });
    append(col, past);
    var ex = p.explain || {}, fu = ex.fusion, facts = [];
    if (fu) {
      if (fu.fts_match !== undefined) facts.push("FTS5 query: " + fu.fts_match + " (" + (fu.fts_mode || "") + ")");
      if (fu.words) facts.push("words: " + fu.words.join(" "));
      if (isNum(fu.rrf_k)) facts.push("RRF k " + fu.rrf_k + ", semantic rows " + fu.semantic_rows + ", fts rows " + fu.fts_rows);
      Object.keys(fu.gold || {}).forEach(function (g) {
        var gr = fu.gold[g] || {};
        facts.push("gold " + g + ": semantic #" + (gr.semantic === null || gr.semantic === undefined ? "–" : gr.semantic) + ", fts #" + (gr.fts === null || gr.fts === undefined ? "–" : gr.fts));
      });
    }
    var ties = (p.ties || {}).sensitive || {};
    var tieKeys = Object.keys(ties);
    if (tieKeys.length) facts.push("tie-sensitive: " + tieKeys.join(", "));
    if (facts.length) append(col, el("details", {"class": "explain"}, [el("summary", {text: "explain"}),
                                                                      el("ul", null, facts.map(function (f) { return el("li", {text: f}); }))]));
    return col;
  }

  function openQuestion(qid, focus) {
    state.open = qid;
    clear(detailHolder);
    var ps = BYQ[qid], p0 = first(qid);
    if (!p0) return;
    var goldSet = {};
    (p0.gold || []).forEach(function (g) { goldSet[g] = true; });
    var k = state.qK;
    append(detailHolder, [
      el("h3", {id: "q-title", text: p0.question || "(no question text)"}),
      el("p", {"class": "qmeta"}, [el("code", {"class": "qid", text: qid}), " · ", p0.question_type, " · asked ", p0.question_date || "–"]),
      el("p", {"class": "gold-line"}, ["gold sessions (" + (p0.gold_source || "gold") + "): "].concat(
        (p0.gold || []).map(function (g) { return el("code", {"class": "gold-id", "data-gold": g, text: g}); }))),
      p0.gold_turns && p0.gold_turns.length ? el("p", {"class": "gold-line"}, ["gold turns: "].concat(
        p0.gold_turns.map(function (t) { return el("code", {"class": "gold-turn", text: t}); }))) : null,
      el("p", {"class": "note", text: "Top " + k + " of each retriever; ★ gold; ✂ where each budget's context ends."})]);
    var grid = el("div", {"class": "rgrid"});
    RETRIEVERS.forEach(function (r) { if (ps[r]) append(grid, retrieverColumn(ps[r], r, k, goldSet)); });
    append(detailHolder, grid);
    Array.prototype.forEach.call(listHolder.querySelectorAll("button.qbtn"), function (b) {
      var cur = b.getAttribute("data-qid") === qid;
      b.classList.toggle("current", cur);
      if (cur) b.setAttribute("aria-current", "true"); else b.removeAttribute("aria-current");
    });
    if (focus) { detailHolder.focus({preventScroll: true}); detailHolder.scrollIntoView({block: "nearest"}); }
  }

  function questionsSection() {
    var s = section("questions", "Every question", "Filter, then open a question: its gold, each retriever's top k side by side, ranks of gold past k, memories and budget cuts, explain's facts.");
    var refresh = function () { renderList(); if (state.open && BYQ[state.open]) openQuestion(state.open, false); };
    var kOptions = KS.map(function (k) { return {value: String(k), label: "k = " + k}; });
    append(s, el("div", {"class": "controls filters"}, [
      select("type", [{value: "", label: "every type"}].concat(TYPES.map(function (t) { return {value: t, label: t}; })),
             "", function (v) { state.qType = v; refresh(); }, {id: "f-type"}),
      select("retriever", [{value: "", label: "any retriever"}].concat(RETRIEVERS.map(function (r) { return {value: r, label: r}; })),
             "", function (v) { state.qRetriever = v; refresh(); }, {id: "f-retriever"}),
      select("at k", [{value: "", label: "hit or miss"}, {value: "hit", label: "hit: all gold in top k"},
                      {value: "partial", label: "some gold in top k"}, {value: "miss", label: "miss: no gold in top k"}],
             "", function (v) { state.qOutcome = v; refresh(); }, {id: "f-outcome"}),
      select("k", kOptions, String(state.qK), function (v) { state.qK = parseInt(v, 10); refresh(); }, {id: "f-k"}),
      el("label", {"class": "field check"}, [el("input", {type: "checkbox", id: "f-differ", onchange: function (e) { state.qDiffer = e.target.checked; refresh(); }}),
                                           el("span", {text: "retrievers differ"})]),
      el("label", {"class": "field"}, [el("span", {text: "search"}),
                                       el("input", {type: "search", id: "f-text", placeholder: "id or words", oninput: function (e) { state.qText = e.target.value; renderList(); }})])]));
    append(s, countLine);
    append(s, el("div", {"class": "qpane"}, [listHolder, detailHolder]));
    renderList();
    append(detailHolder, el("p", {"class": "note", text: "Choose a question to see its rankings."}));
    return s;
  }

  /* ---------------------------------------------------------------- 4. compare, history */
  function qButton(qid) {
    var known = !!BYQ[String(qid)];
    return el("button", {type: "button", "class": "qlink", "data-qid": qid, disabled: !known,
                         onclick: function () { openQuestion(String(qid), true); document.getElementById("questions").scrollIntoView(); }}, String(qid));
  }
  function compareSection() {
    var c = DATA.comparison;
    var s = section("compare", "Compared with " + ((c.base || {}).label || "the base"),
                    (c.method ? c.method.ci + ", " + c.method.test + " p, " + c.method.correction + " across each metric's rows; " : "") +
                    "m: pairs that differ; detectable Δ: the smallest difference this many pairs would show (power 0.8).");
    var metrics = c.metrics || Object.keys(c.rows || {});
    if (!state.cmpMetric || metrics.indexOf(state.cmpMetric) < 0) state.cmpMetric = metrics[metrics.length - 1];
    var holder = el("div");
    function render() {
      clear(holder);
      append(holder, segmented("compared metric", metrics.map(function (m) { return {value: m, label: m}; }), state.cmpMetric,
                               function (v) { state.cmpMetric = v; render(); }));
      var rows = (c.rows || {})[state.cmpMetric] || [];
      var tb = el("tbody");
      rows.forEach(function (row) {
        var dd = row.detectable_delta || {};
        var sig = row.significant ? "*" : "";
        append(tb, el("tr", {"class": row.question_type === "overall" ? "overall" : null, "data-retriever": row.retriever, "data-type": row.question_type}, [
          el("th", {scope: "row", text: row.retriever}), el("td", {text: row.question_type}), el("td", {text: String(row.n)}),
          el("td", {text: fmt(row.base)}), el("td", {text: fmt(row.new)}),
          el("td", {"class": row.delta > 0 ? "up" : row.delta < 0 ? "down" : null, "data-value": row.delta, text: (row.delta > 0 ? "+" : "") + fmt(row.delta) + sig}),
          el("td", {text: "[" + fmt(row.ci_low) + ", " + fmt(row.ci_high) + "]"}), el("td", {text: isNum(row.p) ? fixed(row.p, 3) : "–"}),
          el("td", {text: isNum(row.p_holm) ? fixed(row.p_holm, 3) : "–"}), el("td", {text: isNum(row.differing) ? String(row.differing) : "–"}),
          el("td", {text: isNum(dd.estimate) ? "±" + fmt(dd.estimate) : (dd.reason || "–")})]));
      });
      append(holder, el("div", {"class": "scroll"}, el("table", {"class": "compare", id: "compare-table"}, [
        el("caption", {text: state.cmpMetric + ": new " + ((c.new || {}).label || "") + " against base " + ((c.base || {}).label || "") + " (* significant after Holm)"}),
        el("thead", null, el("tr", null, ["retriever", "type", "n", "base", "new", "Δ", "95% CI of Δ", "p", "Holm", "m", "detectable Δ"].map(function (h) { return el("th", {scope: "col", text: h}); }))),
        tb])));
      var ch = el("div", {"class": "changes", id: "changes"});
      Object.keys(c.changes || {}).forEach(function (r) {
        Object.keys(c.changes[r]).forEach(function (k) {
          var ch1 = c.changes[r][k];
          ["gained", "lost"].forEach(function (kind) {
            var qs = ch1[kind] || [];
            if (!qs.length) return;
            append(ch, el("p", {"class": kind, "data-retriever": r, "data-k": k}, [r + " @" + k + " " + kind + " (" + qs.length + "): "].concat(qs.map(qButton))));
          });
        });
      });
      if (!ch.childNodes.length) append(ch, el("p", {"class": "note", text: "No pair gained or lost a gold in the top k."}));
      append(holder, ch);
    }
    render();
    append(s, holder);
    return s;
  }

  function historySection() {
    var hst = DATA.history;
    var s = section("history", "History", hst.rows.length + " reports, oldest first: each one's overall value per retriever.");
    var fams = hst.families || hst.metrics;
    if (!state.histMetric) state.histMetric = hst.metrics[hst.metrics.length - 1];
    var holder = el("div");
    function render() {
      clear(holder);
      append(holder, select("metric", fams.map(function (m) { return {value: m, label: m}; }), state.histMetric,
                            function (v) { state.histMetric = v; render(); }, {id: "h-metric"}));
      var m = state.histMetric, rows = hst.rows, w = 760, h = 300, left = 48, right = 14, top = 14, bottom = 60;
      var x = linear(0, Math.max(1, rows.length - 1), left + 20, w - right - 20), y = linear(0, 1, h - bottom, top);
      var svgNode = frame(w, h, m + " across " + rows.length + " reports", "history-chart");
      var g = sv("g");
      yAxis(g, y, left, w - right, m);
      rows.forEach(function (row, i) {
        var label = row.commit ? String(row.commit).slice(0, 7) : short(row.label, 14);
        append(g, sv("text", {x: x(i), y: h - bottom + 14, "class": "tick", "text-anchor": "middle", text: label}));
      });
      var names = hst.retrievers.filter(function (r) { return r !== "oracle"; });
      names.forEach(function (r) {
        var d = "", pts = [];
        rows.forEach(function (row, i) {
          var v = ((row.overall || {})[r] || {})[m];
          if (!isNum(v)) return;
          d += (d ? "L" : "M") + x(i).toFixed(1) + "," + y(v).toFixed(1);
          pts.push(sv("circle", {cx: x(i), cy: y(v), r: 3.5, fill: color(r)}, sv("title", {text: r + " " + m + " " + fmt(v) + " · " + row.label})));
        });
        if (d) append(g, sv("path", {d: d, "class": "curve", stroke: color(r), "data-retriever": r}));
        append(g, pts);
      });
      append(svgNode, g);
      append(holder, el("figure", null, [svgNode, legend(names)]));
      var tb = el("tbody");
      rows.forEach(function (row) {
        append(tb, el("tr", null, [el("th", {scope: "row", text: row.commit ? String(row.commit).slice(0, 12) : "–"}),
                                   el("td", {text: row.branch || "–"}), el("td", {text: row.label}),
                                   el("td", {text: row.when ? new Date(row.when * 1000).toISOString().slice(0, 16).replace("T", " ") : "–"})]
          .concat(names.map(function (r) { return el("td", {text: fmt(((row.overall || {})[r] || {})[m])}); }))));
      });
      append(holder, el("div", {"class": "scroll"}, el("table", {"class": "history", id: "history-table"}, [
        el("thead", null, el("tr", null, ["commit", "branch", "report", "written (UTC)"].concat(names).map(function (t) { return el("th", {scope: "col", text: t}); }))), tb])));
    }
    render();
    append(s, holder);
    return s;
  }

  /* ---------------------------------------------------------------- the page */
  function main() {
    var ds = (RUN.dataset || {}).name;
    document.getElementById("title").textContent = "retrieval-eval" + (ds ? " · " + ds : "");
    var mainNode = document.getElementById("main");
    var sections = [];
    uniqueQuestions();  /* before any section: compare's links look questions up */
    if (DATA.mode === "compare" && DATA.comparison) sections.push(compareSection());
    if (DATA.mode === "history" && DATA.history) sections.push(historySection());
    sections.push(runSection(), picturesSection(), questionsSection());
    if (DATA.mode !== "run") sections.push(sections.shift());
    sections.sort(function (a, b) {
      var order = ["run", "compare", "history", "pictures", "questions"];
      return order.indexOf(a.id) - order.indexOf(b.id);
    });
    var nav = document.getElementById("nav");
    sections.forEach(function (sec) {
      append(mainNode, sec);
      append(nav, el("a", {href: "#" + sec.id, text: sec.querySelector("h2").textContent.split(" ")[0] === "Compared" ? "Compare" : sec.querySelector("h2").textContent}));
    });
    append(document.getElementById("foot"), el("p", {text: "pytest-retrieval-eval · made from " + (RUN.label || "a JSON report") +
      (DATA.base ? " against " + DATA.base.label : "") + " · this file loads nothing from the network"}));
    document.body.setAttribute("data-ready", "true");
  }
  main();
}());
