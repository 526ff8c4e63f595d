#!/usr/bin/env bash
# Installs what fsdpc needs to build and test, from Debian packages (Debian 12).
# Idempotent: installs only what is missing. Run it as root (a fresh Debian
# container has no sudo), or as a user with sudo, which it then uses itself.
# The CUDA path additionally needs the CUDA toolkit (nvcc, cudart, cuBLASLt)
# and NCCL under /usr/local/cuda; it is optional and auto-detected.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libyaml-dev libcjson-dev libpcre2-dev libopenblas-dev libgloo-dev check
      python3 python3-yaml procps bc
      libsentencepiece-dev  # tokenizer.model files (SentencePiece)
      libunistring-dev      # NFC normalization of tokenizer.json files (Qwen2)
      zlib1g-dev            # .jsonl.gz datasets (fsdpc data prepare)
      libssl-dev            # SHA-256 cache keys, HMAC-SHA256 job tokens (libcrypto)
      libcairo2-dev  # optional: `fsdpc plot` and the `fsdpc bench` chart (SVG and PNG)
      python3-jinja2  # test-only: chat templates are checked against Python's jinja2
      clang-format    # scripts/check-format.sh, run first by scripts/test.sh
      clang)          # libFuzzer + ASan/UBSan for the bounded fuzz runs (scripts/fuzz.sh)
# TensorBoard event files (log.tensorboard): the Event protobuf, compiled by
# protoc-c at build time and encoded by libprotobuf-c.
pkgs+=(libprotobuf-c-dev protobuf-c-compiler)
# test-only: scripts/gpu/lib/make_hf_random.py (random HF folders) in ckpt_hf_random_flow
pkgs+=(python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: installing packages needs root: run this script as root (sudo is not installed)" >&2
    exit 1
  fi
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
