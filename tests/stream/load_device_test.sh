#!/bin/sh
# pinio load --device end to end: cuda:N and hip:N through the test drivers
# (PINIO_CUDA_LIB, set by meson), by PCI bus id, the host sink with a
# custom --staging, --json parses with storage and H2D figures; without a
# driver one clear line and exit 1; --verify hashes on every device (a
# byte flipped in flight fails --sha256); usage errors exit 2; --help explains;
# pinio doctor lists the test driver's GPUs, or says why it finds none.
# Usage: load_device_test.sh PATH_TO_PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-loaddev-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"

CK=$DIR/m.safetensors
check 0 "gen" "$PINIO" gen "$CK" --size 4M --tensors 12 --quiet
check 0 "cuda:0" "$PINIO" load --device cuda:0 --staging 256Kx4 "$CK"
has "$DIR/out" "H2D" "the summary reports H2D"
has "$DIR/out" "streamed  12 tensors" "every tensor streamed"
check 0 "by PCI bus id, --json" "$PINIO" load --device cuda:0000:65:00.0 --json "$CK"
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "cuda" and d["tensor_count"] == 12 and d["bytes"] > 0, d
assert d["h2d_gb_per_s"] > 0 and d["io_gb_per_s"] > 0 and d["h2d_copy_count"] >= 12, d
assert d["pci_bus_id"] == "0000:65:00.0", d' "$DIR/out" ||
        { echo "FAIL: load --device --json"; cat "$DIR/out"; fails=$((fails + 1)); }
fi
check 0 "hip:0 (HIP test driver)" "$PINIO" load --device hip:0 --staging 256Kx2 "$CK"
has "$DIR/out" "device    hip:0" "the HIP device in the summary"
check 1 "no HIP runtime" env PINIO_HIP_LIB="$DIR/none/libamdhip64.so" "$PINIO" load --device hip:0 "$CK"
has "$DIR/err" "^pinio load: no HIP driver: " "one clear line for HIP"
check 0 "host" "$PINIO" load --device host --staging 64Kx2 --filter model.layers.0 "$CK"
has "$DIR/out" "handed to the host sink" "host summary"

check 1 "no driver" env PINIO_CUDA_LIB="$DIR/none/libcuda.so.1" "$PINIO" load --device cuda:0 "$CK"
has "$DIR/err" "^pinio load: no CUDA driver: " "one clear line"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: more than one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
check 1 "no such device" "$PINIO" load --device cuda:7 "$CK"
has "$DIR/err" "no device cuda:7" "names the device"
check 1 "injected no device" env FAKE_CUDA_FAIL=nodevice "$PINIO" load --device cuda:0 "$CK"
has "$DIR/err" "CUDA_ERROR_NO_DEVICE" "the driver's answer"

# doctor exits 1 on a degraded machine (that is the verdict, not a failure here).
env FAKE_CUDA_DEVICES=2 "$PINIO" doctor --json "$DIR" >"$DIR/out" 2>"$DIR/err"
[ $? -le 1 ] || { echo "FAIL: doctor lists the GPUs: exit"; cat "$DIR/err"; fails=$((fails + 1)); }
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["gpus"]["cuda"]
assert d["available"] is True and d["devices"][1]["pci_bus_id"] == "0000:66:00.0", d
assert d["devices"][0]["memory_bytes"] == 80 << 30 and len(d["devices"]) == 2, d' "$DIR/out" ||
        { echo "FAIL: doctor --json GPUs"; cat "$DIR/out"; fails=$((fails + 1)); }
fi
env PINIO_CUDA_LIB="$DIR/none/libcuda.so.1" "$PINIO" doctor "$DIR" >"$DIR/out" 2>"$DIR/err"
[ $? -le 1 ] || { echo "FAIL: doctor without a driver: exit"; cat "$DIR/err"; fails=$((fails + 1)); }
has "$DIR/out" "^cuda  *no: no CUDA driver: " "doctor says why it finds no GPU"

check 2 "bad --device" "$PINIO" load --device gpu0 "$CK"
check 2 "bad --staging" "$PINIO" load --device host --staging 100Kx4 "$CK"
check 2 "--staging without --device" "$PINIO" load --staging 1Mx4 "$CK"
check 2 "cuda:local without --mpi" "$PINIO" load --device cuda:local "$CK"
has "$DIR/err" "cuda:local goes with --mpi tp" "cuda:local names what it goes with"
# --verify with every device: the SHA-256 of the file, hashed in the
# staging slots; a byte flipped in flight fails the expected digest.
SUM=$(sha256sum "$CK" | cut -d' ' -f1)
for dev in host cuda:0 hip:0; do
    check 0 "$dev --verify" "$PINIO" load --device $dev --verify --staging 64Kx2 "$CK"
    has "$DIR/out" "^sha256    $SUM  $CK" "$dev --verify prints the file's SHA-256"
    check 1 "$dev: a byte flipped in flight" env PINIO_FAULTS=corrupt@3 "$PINIO" load \
        --device $dev --sha256 "$SUM" --cache cold --staging 64Kx2 "$CK"
    has "$DIR/err" "sha256 mismatch" "$dev: the error says the digest differs"
done
check 0 "--verify --json" "$PINIO" load --device cuda:0 --verify --json --filter model.layers.0 "$CK"
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] and {x["path"]: x["sha256"] for x in d["digests"]}[sys.argv[2]] == sys.argv[3], d
assert d["verify_reread_bytes"] > 0 and d["verify_landed_bytes"] > 0, d' "$DIR/out" "$CK" "$SUM" ||
        { echo "FAIL: load --device --verify --json"; cat "$DIR/out"; fails=$((fails + 1)); }
fi
check 0 "--help" "$PINIO" load --help
has "$DIR/out" "PINIO_CUDA_LIB" "help names the driver variable"

[ $fails -eq 0 ] && echo "load_device: all checks passed"
exit $((fails > 0))
