#!/usr/bin/env node
// A complete store for pytest-retrieval-eval's `cmd:` retriever, in plain Node (no packages).
//
//   pytest --retrieval-eval --no-model \
//     --retrieval-eval-retriever "semantic,cmd:node examples/stores/node/store.js"
//
// It speaks the JSON-lines protocol of docs/cmd-protocol.md on stdin/stdout: one request a
// line, one answer a line; logs go to stderr. It ranks by cosine over the vectors the harness
// sends (hello asks for them), computed as vipune's Database::search does: float64 sums left
// to right, a zero norm scores 0, and a stable sort, so equal scores keep the rows' order.
// Its rankings therefore equal the built-in `semantic` retriever's, pair by pair.
//
// Options: `--base64` asks in hello for vectors as base64 little-endian float32
// ("vector_encoding": "base64-f32le": the same values, a fraction of the JSON to parse);
// `--times FILE` writes the store's own milliseconds per request (from reading the chunk that
// ends the request's line to the answer's write beginning) to FILE as JSON when stdin closes,
// to set against the plugin's figures.
"use strict";

const fs = require("node:fs");

const args = process.argv.slice(2);
const base64 = args.includes("--base64");
const timesFile = args.includes("--times") ? args[args.indexOf("--times") + 1] : null;
const times = { index_ms: [], rank_ms: [] };

// A vector as the request carries it: a JSON array, or base64 of little-endian float32.
function vector(v) {
  if (base64 !== (typeof v === "string")) throw new Error(`a vector came as ${typeof v}`);
  if (typeof v !== "string") return v;
  const bytes = Buffer.from(v, "base64");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const out = new Float64Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

const personas = new Map(); // persona key -> {ids, vectors, norms}

function norm(v) {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  return Math.sqrt(s);
}

function index(req) {
  const ids = [];
  const vectors = [];
  for (const session of req.sessions) {
    if (!Array.isArray(session.vector) && typeof session.vector !== "string") {
      return { error: `session ${session.id} came without a vector` };
    }
    ids.push(session.id);
    vectors.push(vector(session.vector));
  }
  personas.set(req.persona, { ids, vectors, norms: vectors.map(norm) });
  process.stderr.write(`store.js: indexed ${ids.length} sessions of ${req.persona.slice(0, 12)}\n`);
  return { ok: true };
}

function rank(req) {
  const p = personas.get(req.persona);
  if (p === undefined) return { error: `persona ${req.persona} was never indexed` };
  if (!Array.isArray(req.vector) && typeof req.vector !== "string") {
    return { error: "the rank request came without a vector" };
  }
  const q = vector(req.vector);
  const qn = norm(q);
  const scores = p.vectors.map((v, row) => {
    if (v.length !== q.length) return NaN;
    let dot = 0;
    for (let i = 0; i < q.length; i++) dot += v[i] * q[i];
    const rn = p.norms[row];
    return qn === 0 || rn === 0 ? 0 : dot / (qn * rn);
  });
  if (scores.some(Number.isNaN)) return { error: "query and session vectors differ in width" };
  const order = scores.map((_, row) => row);
  order.sort((a, b) => scores[b] - scores[a]); // stable (ES2019): ties keep row order
  // The first `limit` rows, and the rows past them tied with the last one: the harness
  // cuts at the limit and keeps the rest only to see ties at the cut.
  let end = Math.min(req.limit, order.length);
  while (end > 0 && end < order.length && scores[order[end]] === scores[order[end - 1]]) end++;
  const top = order.slice(0, end);
  return {
    ids: top.map((row) => p.ids[row]),
    scores: top.map((row) => scores[row]),
    facts: top.map((row) => ({ cosine: scores[row] })),
  };
}

function answer(req) {
  switch (req.op) {
    case "hello":
      if (req.protocol !== 1) return { error: `protocol ${req.protocol} is not 1` };
      return base64
        ? { name: "node-cosine", vectors: true, vector_encoding: "base64-f32le" }
        : { name: "node-cosine", vectors: true };
    case "index":
      return index(req);
    case "rank":
      return rank(req);
    default:
      return { error: `unknown op ${JSON.stringify(req.op)}` };
  }
}

// Requests are read as raw chunks and split at newline bytes, each chunk scanned once: Node's
// readline rescans the whole of a long line held so far at every chunk (about 1 ms for the last
// chunk of a 700 KB index request), time that falls outside the store's own timer but inside
// the plugin's store time. The timer starts when the chunk that ends a line arrives, so it
// holds decoding the line as well as parsing and answering it.
function serve(line, begun) {
  if (line.trim() === "") return; // blank lines are no request
  let reply;
  let op = null;
  try {
    const req = JSON.parse(line);
    op = req.op;
    reply = answer(req);
  } catch (err) {
    reply = { error: `store.js: ${err.message}` };
  }
  const text = JSON.stringify(reply) + "\n";
  // The timer stops as the answer's write begins: a write that wakes the plugin may return
  // only after the plugin has run (on a busy machine, milliseconds of its next work).
  const ended = process.hrtime.bigint();
  process.stdout.write(text);
  if (op === "index" || op === "rank") {
    times[`${op}_ms`].push(Number(ended - begun) / 1e6);
  }
}

let held = []; // the chunks of a line not yet ended
process.stdin.on("data", (chunk) => {
  let begun = process.hrtime.bigint();
  let start = 0;
  for (let end = chunk.indexOf(10); end >= 0; end = chunk.indexOf(10, start)) {
    held.push(chunk.subarray(start, end));
    const line = Buffer.concat(held).toString("utf8");
    held = [];
    serve(line, begun);
    begun = process.hrtime.bigint();
    start = end + 1;
  }
  if (start < chunk.length) held.push(chunk.subarray(start));
});
// stdin closed: the session is over (a last line without its newline is served); Node exits.
process.stdin.on("end", () => {
  if (held.length > 0) serve(Buffer.concat(held).toString("utf8"), process.hrtime.bigint());
  held = [];
});
if (timesFile !== null) {
  process.on("exit", () => fs.writeFileSync(timesFile, JSON.stringify(times)));
}
