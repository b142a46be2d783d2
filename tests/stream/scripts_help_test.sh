#!/bin/sh
# Every helper script in scripts/ and bench/ (an executable with a #! line)
# answers --help with a usage text that names it, exit 0, nothing on stderr,
# and does nothing else (a script that ignored --help would start building,
# installing or benchmarking: the timeout and the checks catch it). Found by
# listing the folders, so a new script is held to it too. scripts/test is
# left out until it answers --help: without it, it would run the whole suite.
# Usage: scripts_help_test.sh SOURCE_ROOT
set -u
SRC=$1
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-scripthelp-XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"
cd "$SRC" || exit 1
n=0
for s in scripts/* bench/*; do
    [ -f "$s" ] && [ -x "$s" ] && head -c 2 "$s" | grep -q '^#!' || continue
    [ "$s" = scripts/test ] && continue
    n=$((n + 1))
    check 0 "$s --help" timeout -k 5 60 "$s" --help
    has "$DIR/out" "$s" "$s --help names the script"
    [ -s "$DIR/err" ] && { echo "FAIL: $s --help wrote to stderr:"; cat "$DIR/err"; fails=$((fails + 1)); }
done
[ $n -ge 14 ] || { echo "FAIL: only $n scripts found in $SRC/scripts and $SRC/bench"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "scripts --help: all $n checks passed"
exit $((fails > 0))
