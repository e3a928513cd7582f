#!/bin/sh
# SPDX-License-Identifier: MIT
# Every saved fuzz input means the same to a gcc and a clang build:
#   tests/fuzz/check-order.sh BUILD_GCC BUILD_CLANG
# builds trace_<name> (the corpus replay with -DFZ_TRACE, tests/fuzz/meson.build) in both
# build directories, replays each target's corpus with both, and compares what each input
# decoded to and what the library answered, step by step (refmodel.h: decoders read the input
# in an order C defines). A difference, or a target traced in one build only, fails.
set -eu
cd "$(dirname "$0")/../.."
a=$1 b=$2
meson compile -C "$a" fuzz-trace >/dev/null
meson compile -C "$b" fuzz-trace >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/check-order.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0
for ta in "$a"/tests/fuzz/trace_*; do
	[ -f "$ta" ] || continue
	name=${ta##*/trace_}
	tb="$b/tests/fuzz/trace_$name"
	if [ ! -x "$tb" ]; then
		echo "check-order: $tb missing" >&2
		exit 1
	fi
	"$ta" "tests/fuzz/corpus/$name" >/dev/null 2>"$work/$name.a" || true
	ASAN_OPTIONS=detect_leaks=0 "$tb" "tests/fuzz/corpus/$name" >/dev/null 2>"$work/$name.b" || true
	if ! cmp -s "$work/$name.a" "$work/$name.b"; then
		echo "check-order: corpus/$name replays differently in $a and $b:" >&2
		diff "$work/$name.a" "$work/$name.b" | head -n 40 >&2
		exit 1
	fi
	echo "check-order: corpus/$name: $(grep -c '^== ' "$work/$name.a") input(s) replay alike"
	n=$((n + 1))
done
if [ "$n" = 0 ]; then
	echo "check-order: no trace_* target in $a" >&2
	exit 1
fi
