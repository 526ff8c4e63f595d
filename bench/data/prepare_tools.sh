#!/usr/bin/env bash
# `fsdpc data prepare` throughput on tool-calling chat data (issue 34), with
# plain chat data measured at the same moment: one command, for a quiet
# machine (bench/results/2026-11-28-prepare-tools.md).
#
# usage: bench/data/prepare_tools.sh [BUILD_DIR] [RUNS] [MB]
#   BUILD_DIR  default build (its bin/fsdpc)
#   RUNS       runs per data set, default 3 (the best is reported)
#   MB         size of each JSONL, default 200
# env: WORK    data, tokenizer and token files (default /tmp/fsdpc-prepare-tools;
#              the JSONL files are kept there for reruns, the token files not)
#      PLAIN=0 skip the plain-chat runs
#
# Data: bench/data/gen_tools_jsonl.py --mb MB (seed 1; 70,757 conversations
# at 200 MB) and bench/data/gen_chat_jsonl.py --mb MB (seed 1; the 53.8 MB/s
# baseline of 2026-11-23-data-prepare.md). Tokenizer: the real Llama 3
# vocabulary (tests/fixtures/tokenizers/make_hub.py llama3.1-instruct) with
# the real Llama 3.1 Instruct template (tests/fixtures/chat_templates) as its
# folder's chat_template.jinja. Each run is
#   /usr/bin/time fsdpc data prepare --in DATA --tokenizer HUB --out TOK
# (default threads). Prints a Markdown table (load before/after, examples,
# tokens, targets, wall, CPU, MB/s and examples/s wall, MB per CPU-second),
# the best run of each data set against the 53.8 MB/s bar, and whether the
# runs of a data set wrote byte-identical token files. Exit status 0 when
# every run succeeded and the token files agree; the bar is reported, not
# enforced (a loaded machine cannot meet it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
runs=${2:-3}
mb=${3:-200}
work=${WORK:-/tmp/fsdpc-prepare-tools}
fsdpc=$build/bin/fsdpc
BAR=53.8
[ -x "$fsdpc" ] || { echo "no $fsdpc: build first (cmake --build $build)"; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)"; exit 1; }
mkdir -p "$work"
hub=$work/hub/llama3.1-instruct

# The data, made once per size and kept (its sha256 printed, to compare runs).
make_data() { # NAME GENERATOR
  local f=$work/$1-$mb.jsonl
  if [ ! -s "$f" ]; then
    python3 "$root/bench/data/$2" --out "$f.part" --mb "$mb" >/dev/null
    mv "$f.part" "$f"
  fi
  echo "$f"
}
tools=$(make_data tools gen_tools_jsonl.py)
sets="tools:$tools"
if [ "${PLAIN:-1}" != 0 ]; then
  plain=$(make_data chat gen_chat_jsonl.py)
  sets="$sets plain:$plain"
fi
if [ ! -s "$hub/chat_template.jinja" ]; then
  python3 "$root/tests/fixtures/tokenizers/make_hub.py" "$work/hub" llama3.1-instruct >/dev/null
  python3 - "$root/tests/fixtures/chat_templates/llama3.1-instruct/tokenizer_config.json" \
    "$hub/chat_template.jinja" <<'PY'
import json, sys
open(sys.argv[2], "w", encoding="utf-8").write(json.load(open(sys.argv[1]))["chat_template"])
PY
fi

load() { cut -d' ' -f1 /proc/loadavg; }
echo "machine: $(nproc) cores, $(uname -srm); fsdpc $("$fsdpc" --version 2>/dev/null | head -1)"
echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
for s in $sets; do
  f=${s#*:}
  echo "data ${s%%:*}: $f, $(stat -c %s "$f") bytes, sha256 $(sha256sum "$f" | cut -c1-16)"
done
echo
echo "| data | run | load before / after | examples | tokens | targets | wall | user + sys CPU | MB/s wall | examples/s wall | MB per CPU-s | peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
summary=""
status=0
for s in $sets; do
  name=${s%%:*} f=${s#*:}
  bytes=$(stat -c %s "$f")
  best="" hashes=""
  for r in $(seq 1 "$runs"); do
    tok=$work/$name.tok
    rm -f "$tok"
    before=$(load)
    if ! /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" \
      "$fsdpc" data prepare --in "$f" --tokenizer "$hub" --out "$tok" >"$work/log.txt" 2>&1; then
      echo "FAIL: $name run $r: $(tail -1 "$work/log.txt")"
      status=1
      continue
    fi
    after=$(load)
    hashes="$hashes $(sha256sum "$tok" | cut -c1-16)"
    read -r wall user sys rss <"$work/time.txt"
    line=$(grep '^prepared ' "$work/log.txt")
    ex=$(sed -E 's/^prepared ([0-9]+) examples.*/\1/' <<<"$line")
    toks=$(sed -E 's/.*: ([0-9]+) tokens.*/\1/' <<<"$line")
    tgts=$(sed -E 's/.* ([0-9]+) targets.*/\1/' <<<"$line")
    row=$(python3 - "$name" "$r" "$before" "$after" "$ex" "$toks" "$tgts" "$wall" "$user" "$sys" \
      "$rss" "$bytes" <<'PY'
import sys
name, r, before, after, ex, toks, tgts, wall, user, sys_, rss, size = sys.argv[1:]
mb, wall, cpu = int(size) / 1e6, float(wall), float(user) + float(sys_)
print(f"| {name} | {r} | {before} / {after} | {int(ex):,} | {int(toks):,} | {int(tgts):,} | "
      f"{wall:.2f} s | {user} + {sys_} s | {mb / wall:.1f} | {int(ex) / wall:,.0f} | "
      f"{mb / cpu:.1f} | {int(rss) // 1024} MB |\t{mb / wall:.3f}")
PY
    )
    echo "${row%%$'\t'*}"
    mbs=${row##*$'\t'}
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(not $mbs > $best)"; then best=$mbs; fi
  done
  same=$(tr ' ' '\n' <<<"$hashes" | sed '/^$/d' | sort -u | wc -l)
  [ "$same" -le 1 ] || { status=1; same="DIFFERENT ($hashes)"; }
  [ "$same" = 1 ] && same="identical"
  summary="$summary
$name: best $(printf %.1f "${best:-0}") MB/s wall over $runs run(s) (bar $BAR MB/s: $(python3 -c "print('met' if ${best:-0} >= $BAR else 'not met')")); token files $same"
  rm -f "$work/$name.tok"
done
echo "$summary"
exit $status
