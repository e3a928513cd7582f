#!/bin/sh
# SPDX-License-Identifier: MIT
# The 'fuzz-smoke' test of one libFuzzer target:
#   smoke.sh FUZZ_EXE CORPUS_DIR RUNS LSAN_SUPPRESSIONS
# runs FUZZ_EXE on a scratch copy of CORPUS_DIR (its known-* reproducers left out, see
# corpus/README.md) for the corpus plus RUNS mutated inputs, with a fixed seed, so that the
# same binary runs the same inputs every time. Any crash,
# failed check, leak, timeout or out-of-memory fails the test; the input that did it is kept in
# the build directory (smoke-artifacts/) and its path printed. The saved corpus is never
# written to.
set -eu
exe=$1 corpus=$2 runs=$3 supp=$4
name=$(basename "$exe")
work=$(mktemp -d "${TMPDIR:-/tmp}/$name-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
nseeds=0
for f in "$corpus"/*; do
	case $(basename "$f") in known-*) continue ;; esac
	[ -f "$f" ] || continue
	cp "$f" "$work/corpus/"
	nseeds=$((nseeds + 1))
done
if [ "$nseeds" = 0 ]; then
	echo "smoke: no input in $corpus" >&2
	exit 1
fi
artifacts="$(pwd)/smoke-artifacts/$name/"
mkdir -p "$artifacts"
echo "smoke: $name, $nseeds seed(s) + $runs runs, seed 1"
# -runs counts the seeds' executions too. Every report goes to stderr; on success print the
# last status line and libFuzzer's final statistics.
# Without address randomization (when the kernel lets setarch turn it off), so that the values
# libFuzzer sees compared (some are pointers) and hence the inputs it derives repeat.
norandom=""
if setarch "$(uname -m)" -R true 2>/dev/null; then
	norandom="setarch $(uname -m) -R"
fi
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
LSAN_OPTIONS=suppressions="$supp":print_suppressions=0 \
	$norandom "$exe" -seed=1 -runs=$((nseeds + runs)) -timeout=60 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$artifacts" \
	"$work/corpus" >"$work/log" 2>&1 || status=$?
if [ "$status" != 0 ]; then
	cat "$work/log"
	echo "smoke: $name failed (exit $status); the input is in $artifacts" >&2
	exit 1
fi
grep -E '^#[0-9]+|^stat::|^fuzz: ' "$work/log" | tail -n 12
