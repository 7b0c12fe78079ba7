#!/usr/bin/env node
// A memory store for pytest-retrieval-eval's `cmd:` retriever, in plain Node (no packages):
// one memory per turn, embedded with the run's model through the `embed` op.
//
//   pytest --retrieval-eval --no-model \
//     --retrieval-eval-retriever "semantic+unit:turn,cmd:node examples/memories/store.js"
//
// At `index` it names each turn as the turn granularity does (`<session_id>_<n>`, n the
// turn's 1-based position, blank turns left out), renders it "role: content" and sends
// {"op": "embed", "texts": [...]} before it answers: the plugin answers {"vectors": [...]}
// (the run's model and vector cache), then waits on for the index answer. At `rank` it scores
// the turns by cosine (float64 sums left to right, a stable sort: vipune's Database::search)
// against the query vector the plugin sends, and answers {"memories": [...]} until they cover
// `limit` sessions (docs/memories.md). It ranks as `semantic+unit:turn` does.
"use strict";

const readline = require("node:readline");

const personas = new Map(); // persona key -> {ids, sessions, vectors, norms}
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const waiting = []; // resolvers of lines awaited (the embed answers)
const queued = []; // lines read before anyone awaited them

lines.on("line", (line) => {
  const next = waiting.shift();
  if (next !== undefined) next(line);
  else queued.push(line);
});

function nextLine() {
  if (queued.length > 0) return Promise.resolve(queued.shift());
  return new Promise((resolve) => waiting.push(resolve));
}

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function norm(v) {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  return Math.sqrt(s);
}

async function embed(texts) {
  send({ op: "embed", texts });
  const reply = JSON.parse(await nextLine());
  if (reply.error !== undefined) throw new Error(reply.error);
  return reply.vectors;
}

async function index(req) {
  const ids = [];
  const sessions = [];
  const texts = [];
  for (const session of req.sessions) {
    session.turns.forEach((turn, i) => {
      if (turn.content.trim() === "") return;
      ids.push(`${session.id}_${i + 1}`);
      sessions.push(session.id);
      texts.push(`${turn.role}: ${turn.content}`);
    });
  }
  const vectors = await embed(texts);
  personas.set(req.persona, { ids, sessions, vectors, norms: vectors.map(norm) });
  return { ok: true };
}

function rank(req) {
  const p = personas.get(req.persona);
  if (p === undefined) return { error: `persona ${req.persona} was never indexed` };
  const q = req.vector;
  const qn = norm(q);
  const scores = p.vectors.map((v, row) => {
    let dot = 0;
    for (let i = 0; i < q.length; i++) dot += v[i] * q[i];
    const rn = p.norms[row];
    return qn === 0 || rn === 0 ? 0 : dot / (qn * rn);
  });
  const order = scores.map((_, row) => row);
  order.sort((a, b) => scores[b] - scores[a]); // stable (ES2019): ties keep row order
  const memories = [];
  const covered = new Set();
  for (const row of order) {
    if (covered.size >= req.limit) break; // limit counts sessions, not memories
    covered.add(p.sessions[row]);
    memories.push({ id: p.ids[row], score: scores[row], turns: [p.ids[row]] });
  }
  return { memories };
}

async function answer(req) {
  switch (req.op) {
    case "hello":
      return { name: "node-turns", vectors: true }; // the query vector comes with rank
    case "index":
      return index(req);
    case "rank":
      return rank(req);
    default:
      return { error: `unknown op ${JSON.stringify(req.op)}` };
  }
}

async function serve() {
  for (;;) {
    const line = await nextLine();
    if (line === undefined) return;
    let reply;
    try {
      reply = await answer(JSON.parse(line));
    } catch (err) {
      reply = { error: `store.js: ${err.message}` };
    }
    send(reply);
  }
}

lines.on("close", () => {
  for (const resolve of waiting.splice(0)) resolve(undefined);
  queued.push(undefined);
});
serve();
