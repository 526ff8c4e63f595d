#!/usr/bin/env bash
# The start-up warning that a checkpoint save may not fit dist.term_grace_s
# (issue 17): the estimate uses checkpoint.write_mib_s when set; unset, the
# rate is measured by a probe write in checkpoint.dir (or its nearest
# existing parent) when the save is large enough to matter, and the probe
# file does not stay.
source "$(dirname "$0")/common.sh"
run slow 1 train.max_steps=3 checkpoint.write_mib_s=0.001 || fail "training (slow rate)"
grep -q "MiB/s (checkpoint.write_mib_s): more than dist.term_grace_s=25.0 s" slow.log ||
  fail "no warning at 0.001 MiB/s: $(grep -m1 'checkpoint save' slow.log)"
run fast 1 train.max_steps=3 checkpoint.write_mib_s=100000 || fail "training (fast rate)"
grep -q "a checkpoint save writes" fast.log && fail "warned at 100000 MiB/s"
# 14 MiB of shards against a 0.1 s grace: above 10 MiB/s x grace, so measured.
run probe 1 train.max_steps=3 model.hidden_size=256 model.intermediate_size=512 \
  dist.term_grace_s=0.1 || fail "training (measured rate)"
find probe -name '.fsdpc-write-probe-*' | grep -q . && fail "the probe file stayed"
grep "a checkpoint save writes" probe.log | grep -q "could not be measured" &&
  fail "the rate could not be measured in a writable folder"
echo "PASS"
