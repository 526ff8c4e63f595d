# Bad checkpoints fail with one line naming the file (exit 1), never a crash.
. "$(dirname "$0")/common.sh"

run A 1 checkpoint.save_steps=4 || fail "run"
SH=shard-00000-of-00001.safetensors
# case NAME SETUP EXPECTED-TEXT [overrides...]
check() {
  local name=$1 setup=$2 want=$3
  shift 3
  rm -rf X && cp -r A/ck/step-000004 X && (cd X && eval "$setup")
  timeout 60 "$FSDPC" train tiny.yaml log.dir=Y checkpoint.resume=X "$@" >$name.log 2>&1
  local rc=$?
  [ $rc = 1 ] || fail "$name: exit $rc (want 1): $(tail -2 $name.log)"
  local err
  err=$(grep -c '^error:' $name.log)
  [ "$err" = 1 ] || fail "$name: expected one error line, got $err"
  grep '^error:' $name.log | grep -qF -- "$want" || fail "$name: $(grep '^error:' $name.log)"
}
check truncated "truncate -s 1000 $SH" "X/$SH: 1000 bytes, the checkpoint's checksums say"
check corrupt "printf '\\001' | dd of=$SH bs=1 seek=5000 conv=notrunc 2>/dev/null" \
  "X/$SH: checksum mismatch"
check missing "rm $SH" "X/$SH: missing from the checkpoint"
check other_model "true" "X/meta.json is for another model: tensor 'model.embed_tokens.weight'" \
  model.hidden_size=64
check other_optim "true" "X/meta.json: the saved optimizer state has slots [exp_avg, exp_avg_sq]" \
  optim.name=sgd
check no_checksums "rm checksums.rank-00000.txt" "checkpoint X: its checksums.rank-*.txt files are missing"
check bad_meta "echo '{}' > meta.json" "X/meta.json: 3 bytes, the checkpoint's checksums say"
check not_ckpt "rm meta.json" "checkpoint X: no statedict plugin recognises this folder"
check bad_manifest "echo 'zz' > checksums.rank-00000.txt" "checksums.rank-00000.txt:1: expected"
check no_dir "rm -rf ../X" "checkpoint X: no such folder"
# A consistent meta.json (checksum updated) that describes another model.
check meta_other "sed -i 's/\[259, 32\]/[260, 32]/' meta.json &&
  c=\"\$(gzip -c meta.json | tail -c8 | od -An -tx4 -N4 | tr -d ' ') \$(stat -c %s meta.json)\" &&
  sed -i \"s/^[0-9a-f]* [0-9]* meta.json\$/\$c meta.json/\" checksums.rank-00000.txt" \
  "X/meta.json is for another model: tensor 'model.embed_tokens.weight'"
echo PASS
