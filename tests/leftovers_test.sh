#!/usr/bin/env bash
# scripts/lib/leftovers (scripts/test's leftover check) counts the files of
# its own run alone: what another run or program left in /var/tmp, /dev/shm
# or /tmp (pinio-other-*, or a tag this one is a prefix of) is not counted;
# a file or folder with the run's tag is, in each of the three places; a tag
# that is not letters and digits is refused. usage: leftovers_test.sh SRCDIR
set -u
left=$1/scripts/lib/leftovers
# A tag of this test's own: other tests of the same run have their files
# open meanwhile, and they are not this answer's.
run=${PINIO_TEST_RUN:-p$$}t$$
planted=()
trap 'rm -rf "${planted[@]}"' EXIT
fail=0
FAIL() { echo "FAIL: $*"; fail=1; }
plant() { # plant [-d] TEMPLATE: mktemp, remembered for removal
    local p
    p=$(mktemp "$@") || { echo "FAIL: mktemp $*"; exit 1; }
    planted+=("$p")
    echo "$p"
}

got=$("$left" "$run") || FAIL "exit $? on a clean run"
[ -z "$got" ] || FAIL "leftovers before anything was planted: $got"

plant /var/tmp/pinio-other-XXXXXX >/dev/null
plant /dev/shm/pinio-other-XXXXXX >/dev/null
plant -d "/var/tmp/pinio-${run}0-longer-XXXXXX" >/dev/null
plant "/tmp/pinio-x${run}-inner-XXXXXX" >/dev/null
got=$("$left" "$run") || FAIL "exit $? with foreign files only"
[ -z "$got" ] || FAIL "foreign files counted: $got"

want=$( { plant "/var/tmp/pinio-$run-planted-XXXXXX"
          plant -d "/dev/shm/pinio-$run-planted-XXXXXX"
          plant "/tmp/pinio-$run-planted-XXXXXX"; } )
# plant ran in a subshell there: remember what it made here too.
while read -r p; do planted+=("$p"); done <<<"$want"
want=$(LC_ALL=C sort <<<"$want")
got=$("$left" "$run") || FAIL "exit $? with planted files"
[ "$got" = "$want" ] || FAIL "planted files: got '$got', want '$want'"

"$left" 'a*' >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || FAIL "a tag with '*' exit $rc, want 2"
"$left" '' >/dev/null 2>&1 && FAIL "an empty tag accepted"
exit $fail
