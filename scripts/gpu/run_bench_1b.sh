#!/bin/bash
# On a 4-GPU host: bench/torch_side_by_side.sh 1b 4 (PyTorch FSDP2 rows, then
# `fsdpc bench configs/bench/llama3-1b-4gpu.yaml --baseline ...`), with the
# carried build. PyTorch runs with the host's libraries; fsdpc through a
# wrapper that adds the carried ones. Results in $OUT/bench.tar.gz.
set -u
C=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/rt "$OUT"
tar xf "$C/runtime.tar.xz" -C /tmp/rt
tar xf "$C/build.tar.xz" -C /
B=$(cat "$C/build_dir")
cat >/tmp/fsdpc-wrap <<WRAP
#!/bin/bash
export LD_LIBRARY_PATH=/tmp/rt:$B/lib:\${LD_LIBRARY_PATH:-}
export FSDPC_PLUGIN_PATH=$B/plugins
exec $B/bin/fsdpc "\$@"
WRAP
chmod +x /tmp/fsdpc-wrap
R=/tmp/bench-1b
FSDPC=/tmp/fsdpc-wrap OUT=$R BENCH_ARGS="--repeats 2" bash bench/torch_side_by_side.sh 1b 4 2>&1 | tail -40
tar czf "$OUT/bench.tar.gz" -C /tmp bench-1b
