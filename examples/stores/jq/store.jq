# A store for pytest-retrieval-eval's `cmd:` retriever in jq alone: word overlap.
#
#   pytest --retrieval-eval --no-model \
#     --retrieval-eval-retriever "cmd:jq -nc --unbuffered -f examples/stores/jq/store.jq"
#
# The protocol is docs/cmd-protocol.md: one JSON request a line on stdin, one JSON answer a
# line on stdout. jq reads the requests as a stream (`inputs`) and keeps its state, every
# indexed persona's word sets, across them (`foreach`); `--unbuffered` sends each answer at
# once. A session's score is how many distinct words (lowercase runs of ASCII letters and
# digits) of the question it holds; equal scores keep the sessions' order. No vectors.

def words: ascii_downcase | [scan("[a-z0-9]+")] | unique;

def rank($docs; $req):
  ($req.question | words | map({(.): true}) | add // {}) as $q
  | [$docs | to_entries[]
     | {row: .key, id: .value.id, score: ([.value.words[] | select($q[.])] | length)}]
  | sort_by(-.score, .row) | .[:$req.limit]
  | {ids: map(.id), scores: map(.score)};

foreach inputs as $req ({personas: {}};
  if $req.op == "hello" then
    .answer = {name: "jq-overlap", vectors: false}
  elif $req.op == "index" then
    .personas[$req.persona] = [$req.sessions[] | {id, words: (.text | words)}]
    | .answer = {ok: true}
  elif $req.op == "rank" then
    .answer = (if .personas[$req.persona] == null
               then {error: "persona \($req.persona) was never indexed"}
               else rank(.personas[$req.persona]; $req) end)
  else
    .answer = {error: "unknown op \($req.op | tojson)"}
  end;
  .answer)
