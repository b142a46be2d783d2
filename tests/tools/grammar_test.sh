#!/bin/sh
# One command-line grammar: an option's bad value gets the same one-line
# message (and exit 2) from load, load --mpi and stage; options one shape
# of load does not take are refused by name; an index plus another file is
# an error on every load path, never a file dropped; --cache cold on tmpfs
# says there is nothing to drop; the progress line goes to a terminal only.
# usage: grammar_test.sh PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-grammar-XXXXXX") || exit 1
SHM=
trap 'rm -rf "$DIR" $SHM' EXIT
fails=0
. "$(dirname "$0")/../common/cli.sh"
# LeakSanitizer reports Open MPI's allocations at MPI_Finalize (see scripts/test)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS
M=$DIR/m.safetensors
"$PINIO" gen "$M" --size 256K --tensors 4 -q || { echo "FAIL: gen"; exit 1; }
"$PINIO" gen "$DIR/sh" --size 128K --tensors 4 --shards 2 -q || { echo "FAIL: gen sh"; exit 1; }
mpi=0
"$PINIO" load --mpi replicate --help >/dev/null 2>&1 && mpi=1

# same OPT VALUE WANT: load, load --mpi and (for --cache/--direct) stage
# print the same message for the same bad value.
same() {
    opt=$1; val=$2; msg="pinio load: $opt wants $3, not '$val'; see 'pinio load --help'"
    check 2 "load $opt $val" "$PINIO" load "$M" "$opt" "$val"
    [ "$(cat "$DIR/err")" = "$msg" ] || { echo "FAIL: load $opt $val: '$(cat "$DIR/err")', want '$msg'"; fails=$((fails + 1)); }
    if [ $mpi = 1 ]; then
        check 2 "load --mpi $opt $val" "$PINIO" load --mpi replicate "$M" "$opt" "$val"
        [ "$(cat "$DIR/err")" = "$msg" ] || { echo "FAIL: load --mpi $opt $val: '$(cat "$DIR/err")', want '$msg'"; fails=$((fails + 1)); }
    fi
    case $opt in --cache|--direct)
        check 2 "stage $opt $val" "$PINIO" stage "$M" "$DIR/st" "$opt" "$val"
        swant=$(echo "$msg" | sed 's/pinio load/pinio stage/g')
        [ "$(cat "$DIR/err")" = "$swant" ] || { echo "FAIL: stage $opt $val: '$(cat "$DIR/err")', want '$swant'"; fails=$((fails + 1)); }
    esac
}
same --bs 3 "a power of two from 4K to 1G (e.g. 1M)"
same --bs 2G "a power of two from 4K to 1G (e.g. 1M)"
same --qd 0 "1..4096"
same --qd 4097 "1..4096"
same --cache warm "auto, cold or hot"
same --direct 2 "auto, on or off"
same --backend uring "auto, fixed, direct, buffered or pread"
check 2 "--node bad" "$PINIO" load "$M" --node -1
has "$DIR/err" "pinio load: --node wants a node number, auto or any, not '-1'" "--node's grammar"
check 2 "--exchange without --mpi" "$PINIO" load "$M" --exchange bcast
has "$DIR/err" "pinio load: --exchange goes with --mpi" "an --mpi option alone"
if [ $mpi = 1 ]; then
    check 2 "--node with --mpi" "$PINIO" load --mpi replicate "$M" --node 0
    has "$DIR/err" "pinio load: --node is not supported with --mpi" "refused by name"
    check 2 "--device with --mpi" "$PINIO" load --mpi shard "$M" --device host
    has "$DIR/err" "pinio load: --device with --mpi goes with --mpi tp" "refused by name"
    check 2 "--staging with --mpi shard" "$PINIO" load --mpi shard "$M" --staging 1Mx4
    has "$DIR/err" "pinio load: --staging is not supported with --mpi" "refused by name"
    check 2 "--staging with --mpi tp, no --device" "$PINIO" load --mpi tp --split '*=0' "$M" --staging 1Mx4
    has "$DIR/err" "pinio load: --staging goes with --device" "refused by name"
fi
[ -e "$DIR/st" ] && { echo "FAIL: a usage error of stage created DST"; fails=$((fails + 1)); }

# An index plus another file: an error naming both, on every load path.
IX=$DIR/sh/model.safetensors.index.json
for shape in "" "--device host" "--mpi replicate"; do
    [ "$shape" = "--mpi replicate" ] && [ $mpi = 0 ] && continue
    # shellcheck disable=SC2086
    check 1 "load $shape index + file" "$PINIO" load $shape "$IX" "$M"
    has "$DIR/err" "m.safetensors.*given together with the index .*model.safetensors.index.json" "load $shape: index + file"
    # shellcheck disable=SC2086
    check 1 "load $shape file + folder of an index" "$PINIO" load $shape "$M" "$DIR/sh"
done
check 0 "info on an index" "$PINIO" info "$IX"
has "$DIR/out" "index:    .*4 tensors in 2 shards" "info reads the index"
has "$DIR/out" "model-00002-of-00002.safetensors" "and its shards' headers"

# --cache cold on tmpfs: nothing to drop, and the summary says so.
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
    SHM=/dev/shm/pinio-${PINIO_TEST_RUN:-p$$}-grammar-$$.safetensors
    cp "$M" "$SHM"
    check 0 "load --cache cold on tmpfs" "$PINIO" load --cache cold "$SHM"
    has "$DIR/out" "no cache to drop" "tmpfs: nothing to drop"
    if grep -q "cache dropped" "$DIR/out"; then
        echo "FAIL: --cache cold on tmpfs claims it dropped the cache"; cat "$DIR/out"; fails=$((fails + 1))
    fi
fi

# Progress: never on a pipe; on a terminal drawn with \r, within 79 columns,
# and erased at the end.
check 0 "load, stderr a file" "$PINIO" load "$M" --cache cold
if grep -q "$(printf '\r')" "$DIR/err"; then
    echo "FAIL: progress written to a file"; fails=$((fails + 1))
fi
if command -v script >/dev/null 2>&1; then
    "$PINIO" gen "$DIR/big.safetensors" --size 64M --tensors 8 -q
    script -qec "'$PINIO' load --cache cold --bs 64K --qd 1 '$DIR/big.safetensors' >/dev/null" "$DIR/tty" >/dev/null 2>&1
    /usr/bin/python3 - "$DIR/tty" <<'PY' || fails=$((fails + 1))
import re, sys
t = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
draws = [d for d in t.split("\r") if d.startswith("load ")]  # not script's own lines
if not any(re.match(r"load \[[=> ]+\] +\d+%  [\d.]+ / [\d.]+ [kMG]?B  [\d.]+ GB/s  ETA ", d) for d in draws):
    sys.exit(f"FAIL: no progress line on the terminal: {t[:400]!r}")
if any(len(d.rstrip("\n")) > 79 for d in draws):
    sys.exit(f"FAIL: a progress line wider than 79 columns: {draws!r}")
if not re.search(r"\r {20,79}\r", t):
    sys.exit(f"FAIL: the progress line was not erased: {t[-200:]!r}")
PY
fi

[ $fails -eq 0 ] && echo "all grammar checks passed"
exit $((fails != 0))
