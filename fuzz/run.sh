#!/usr/bin/env bash
# Runs fuzz targets for a while each, two at a time, keeping what they find:
# new inputs grow fuzz/corpus/<target>/, failures land in
# fuzz/artifacts/<target>/ (and the run goes on: fork mode). Each run's last
# libFuzzer stats line (executions, coverage) is in fuzz/logs/<target>.log.
#
#   fuzz/run.sh 600                # every target, 10 minutes each
#   fuzz/run.sh 60 frames decompress
#
# Needs nightly and cargo-fuzz (`cargo install cargo-fuzz`). No sanitizer:
# the fuzzed code is safe Rust (the crate denies `unsafe` outside the
# arena, which has its own Miri and valgrind runs); allocations over 64 MiB
# count as failures, so a length a peer declares cannot size a buffer.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v tonic-hotpath-fuzz)
fi
cargo +nightly fuzz build --sanitizer none
mkdir -p logs
run() {
  local target=$1
  mkdir -p "corpus/$target" "artifacts/$target"
  cargo +nightly fuzz run --sanitizer none "$target" -- \
    -max_total_time="$seconds" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -timeout=10 -malloc_limit_mb=64 -rss_limit_mb=2048 -max_len=8192 \
    >"logs/$target.log" 2>&1 || true
  echo "== $target: $(grep -E '^#[0-9]+' "logs/$target.log" | tail -1)"
}
pending=("${targets[@]}")
while [ "${#pending[@]}" -gt 0 ]; do
  run "${pending[0]}" &
  if [ "${#pending[@]}" -gt 1 ]; then
    run "${pending[1]}" &
  fi
  wait
  pending=("${pending[@]:2}")
done
