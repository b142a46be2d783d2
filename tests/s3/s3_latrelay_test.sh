#!/bin/sh
# bench/latrelay, the benchmarks' latency relay, in front of s3rver: an
# object relayed byte-exact over several parallel connections (pinio's
# and eight curl ranges at once), every request held at least the latency
# asked for by the relay's own clock (a lower bound only, never an upper
# one), a listen backlog of at least 128, a clean exit on SIGTERM with a
# connection still open, and bad arguments refused naming them.
# usage: s3_latrelay_test.sh PINIO SRC_ROOT LATRELAY
[ "${1:-}" = --help ] && { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
RELAY=$3
. "$SRC/tests/s3/s3env.sh"
s3_test latrelay models

RELAY_PID=""
HOLD_PID=""
relay_stop() {
    [ -z "$HOLD_PID" ] || { kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null; HOLD_PID=""; }
    [ -z "$RELAY_PID" ] || { kill "$RELAY_PID" 2>/dev/null; wait "$RELAY_PID" 2>/dev/null; RELAY_PID=""; }
}
s3_on_exit relay_stop

# relay_start NAME ARGS...: the relay in front of s3rver, its log and stats
# in $DIR/NAME.log and .json; RELAY_URL its endpoint.
relay_start() {
    name=$1; shift
    : >"$DIR/$name.port"
    "$RELAY" "$S3_URL" --log "$DIR/$name.log" --stats "$DIR/$name.json" "$@" \
        >"$DIR/$name.port" 2>"$DIR/$name.err" &
    RELAY_PID=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q '^port ' "$DIR/$name.port"; do
        kill -0 "$RELAY_PID" 2>/dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    RELAY_PORT=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$DIR/$name.port")
    [ -n "$RELAY_PORT" ] || { echo "FAIL: latrelay $* did not say its port:"; cat "$DIR/$name.err"; exit 1; }
    RELAY_URL="http://127.0.0.1:$RELAY_PORT"
}

# relay_end NAME: SIGTERM; the relay must exit 0 and write its stats.
relay_end() {
    kill -TERM "$RELAY_PID"
    wait "$RELAY_PID"
    st=$?
    RELAY_PID=""
    [ "$st" -eq 0 ] || { echo "FAIL: latrelay ($1) exit $st on SIGTERM:"; cat "$DIR/$1.err"; fails=$((fails + 1)); }
    [ -s "$DIR/$1.json" ] || { echo "FAIL: latrelay ($1) wrote no stats"; fails=$((fails + 1)); }
}

# stats NAME DESCRIPTION ASSERTION: a Python expression on j, the stats.
stats() {
    /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert $3, j" "$DIR/$1.json" ||
        { echo "FAIL: $2"; fails=$((fails + 1)); }
}

# Refusals, no server needed: each names what is wrong.
check 2 "no upstream" "$RELAY"
has "$DIR/err" "no UPSTREAM" "a missing upstream named"
check 2 "an upstream without a port" "$RELAY" http://127.0.0.1
has "$DIR/err" "http://127.0.0.1" "the upstream without a port named"
check 2 "a latency that is not a number" "$RELAY" "$S3_URL" --latency 20ms
has "$DIR/err" "'20ms'" "the bad latency named"
check 2 "an unknown option" "$RELAY" "$S3_URL" --delay 20
has "$DIR/err" "'--delay'" "the unknown option named"

"$PINIO" gen "$DIR/m.safetensors" --size 48M --tensors 16 --seed 7 >/dev/null || exit 1
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
size=$(stat -c %s "$DIR/m.safetensors")
sum=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)

# No latency: the bytes as they are, 16 connections of pinio's and eight
# curl ranges at once.
relay_start fast
# The queue of connections not yet accepted: ss's Send-Q of a listener.
backlog=$(ss -Hltn "sport = :$RELAY_PORT" | awk '{print $3}')
[ "${backlog:-0}" -ge 128 ] ||
    { echo "FAIL: latrelay listens with a backlog of ${backlog:-?}, not >= 128 (pinio opens 16 connections at once)"; fails=$((fails + 1)); }
check 0 "pinio load through the relay" env AWS_ENDPOINT_URL="$RELAY_URL" \
    "$PINIO" load s3://models/m.safetensors --sha256 "$sum" --quiet
part=$(( (size + 7) / 8 ))
i=0
pids=""
while [ $i -lt 8 ]; do
    lo=$((i * part)); hi=$((lo + part - 1)); [ $hi -lt $size ] || hi=$((size - 1))
    curl -sSf -r "$lo-$hi" -o "$DIR/part$i" "$RELAY_URL/models/m.safetensors" &
    pids="$pids $!"
    i=$((i + 1))
done
for p in $pids; do wait "$p" || { echo "FAIL: a ranged curl GET through the relay: exit $?"; fails=$((fails + 1)); }; done
cat "$DIR"/part0 "$DIR"/part1 "$DIR"/part2 "$DIR"/part3 "$DIR"/part4 "$DIR"/part5 \
    "$DIR"/part6 "$DIR"/part7 >"$DIR/joined"
cmp -s "$DIR/joined" "$DIR/m.safetensors" ||
    { echo "FAIL: eight ranges through the relay, joined, differ from the object"; fails=$((fails + 1)); }
relay_end fast
# curl: one connection per range; pinio at least one more.
stats fast "at least 9 connections relayed" "j['connections'] >= 9"
stats fast "the answers' bytes at least the object twice" "j['down_bytes'] >= 2 * $size"
n=$(grep -c '^req .* bytes=' "$DIR/fast.log")
[ "$n" -ge 8 ] || { echo "FAIL: $n ranged requests in the relay's log, want >= 8:"; cat "$DIR/fast.log"; fails=$((fails + 1)); }

# 100 ms: every request held at least that long from its arrival, by the
# relay's clock; the load still byte-exact; a connection left open when
# SIGTERM comes does not keep the relay from exiting.
relay_start slow --latency 100
check 0 "pinio load through the relay at 100 ms" env AWS_ENDPOINT_URL="$RELAY_URL" \
    "$PINIO" load s3://models/m.safetensors --sha256 "$sum" --quiet
/usr/bin/python3 -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(60)' "$RELAY_PORT" &
HOLD_PID=$!
i=0
while [ $i -lt 100 ] && [ "$(ss -Htn state established "dport = :$RELAY_PORT" | wc -l)" -lt 1 ]; do
    sleep 0.1; i=$((i + 1))
done
relay_end slow
stats slow "pinio's requests counted (a HEAD, the header, the ranges)" "j['requests'] >= 3"
stats slow "every request held >= 100 ms by the relay's clock" "j['min_delay_ms'] >= 100"
# req C N ARRIVED SENT ...: the same from the log, line by line.
awk '$1 == "req" && $5 - $4 < 100 { print "FAIL: held " $5 - $4 " ms: " $0; bad++ }
     $1 == "req" { n++ }
     END { if (!n) print "FAIL: no request in the log"; exit (bad || !n) }' "$DIR/slow.log" ||
    fails=$((fails + 1))

s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
