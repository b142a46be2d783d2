"""Checks one `pinio bench --mpi --json` result (cli_bench_mpi.sh).

usage: bench_mpi_check.py JSON N RANK_BYTES [LAT_PREFIX]

The job's figures are recomputed from its own per-rank fields, never from
a clock: total bytes and requests are the ranks' sums exactly; elapsed_s
is the last end minus the first start (the first start is 0); the
bandwidth is bytes over it; the stonewall times bracket it; the ranks'
summed bandwidths are never below it. With LAT_PREFIX, the job's
percentiles must equal the ones of the ranks' histograms (PREFIX.R, one
"HIGH_NS COUNT" line per bucket) merged here, as the C code merges them:
the sample of rank ceil(p/100 x total), its bucket's high value, capped by
the job's max.
"""
import json
import math
import sys


def close(a, b, rel=2e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def pct(counts, total, mx, p):
    x = p / 100.0 * total
    rank = 1 if x <= 1.0 else total if x >= total else int(x)
    if rank < x and rank < total:
        rank += 1
    seen = 0
    for hi in sorted(counts):
        seen += counts[hi]
        if seen >= rank:
            return min(hi, mx)
    return mx


def main():
    path, n, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lat_prefix = sys.argv[4] if len(sys.argv) > 4 else None
    j = json.loads(open(path).read().strip().splitlines()[-1])
    m, ranks = j["mpi"], j["ranks"]
    assert m["rank_count"] == n == len(ranks), (m, len(ranks))
    assert [r["rank"] for r in ranks] == list(range(n)), ranks
    assert m["host_count"] == len(j["hosts"]) >= 1, j["hosts"]
    # combined bytes and requests: the ranks' sums, exactly
    assert all(r["bytes"] == each for r in ranks), [r["bytes"] for r in ranks]
    assert j["bytes"] == sum(r["bytes"] for r in ranks) == n * each, j["bytes"]
    assert j["ios"] == sum(r["ios"] for r in ranks), j["ios"]
    assert sum(h["bytes"] for h in j["hosts"]) == j["bytes"], j["hosts"]
    # aggregate bandwidth = total bytes / (last end - first start)
    first = min(r["start_s"] for r in ranks)
    last = max(r["end_s"] for r in ranks)
    assert first == 0, first
    assert close(j["elapsed_s"], last - first), (j["elapsed_s"], last, first)
    assert j["elapsed_s"] > 0, j["elapsed_s"]
    assert close(j["bw_mb_per_s"], j["bytes"] / j["elapsed_s"] / 1e6), j["bw_mb_per_s"]
    assert close(j["iops"], j["ios"] / j["elapsed_s"]), j["iops"]
    # stonewall: the first finisher's time and the last's bracket the job's
    assert close(m["first_done_s"], min(r["end_s"] for r in ranks)), m
    assert close(m["last_done_s"], j["elapsed_s"]), m
    assert m["first_done_s"] <= m["last_done_s"], m
    for r in ranks:
        assert 0 <= r["start_s"] <= r["end_s"] <= m["last_done_s"] * (1 + 2e-6), r
        own = r["end_s"] - r["start_s"]
        assert own > 0 and close(r["bw_mb_per_s"], r["bytes"] / own / 1e6, 1e-4), r
    # what summing the ranks' outputs gives: never below the job's, and
    # above the job's figure until the first finisher too
    summed = sum(r["bw_mb_per_s"] for r in ranks)
    assert close(m["sum_rank_bw_mb_per_s"], summed), (m, summed)
    assert m["sum_rank_bw_mb_per_s"] >= j["bw_mb_per_s"] * (1 - 1e-5), m
    assert m["sum_rank_bw_mb_per_s"] >= m["first_done_bw_mb_per_s"] * (1 - 1e-5), m
    # latencies over every rank's requests
    lat = j["lat_ns"]
    assert lat["count"] == sum(r["lat_ns"]["count"] for r in ranks) == j["ios"], lat
    assert lat["max"] == max(r["lat_ns"]["max"] for r in ranks), lat
    assert lat["min"] == min(r["lat_ns"]["min"] for r in ranks), lat
    if lat_prefix:
        counts = {}
        for q in range(n):
            for line in open("%s.%d" % (lat_prefix, q)):
                hi, c = map(int, line.split())
                counts[hi] = counts.get(hi, 0) + c
        total = sum(counts.values())
        assert total == lat["count"], (total, lat["count"])
        for key, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99_9", 99.9)):
            want = pct(counts, total, lat["max"], p)
            assert lat[key] == want, (key, lat[key], want)
        for key, got in lat["percentiles"].items():  # --percentile-list's
            p = float(key[1:].replace("_", "."))
            want = pct(counts, total, lat["max"], p)
            assert got == want, (key, got, want)
        # the mean pooled from the ranks' own
        mean = sum(r["lat_ns"]["mean"] * r["lat_ns"]["count"] for r in ranks) / total
        assert close(lat["mean"], mean, 1e-6), (lat["mean"], mean)
    print("ok: %d ranks, %d bytes in %.6f s (%.1f MB/s); first done %.6f s" %
          (n, j["bytes"], j["elapsed_s"], j["bw_mb_per_s"], m["first_done_s"]))


if __name__ == "__main__":
    main()
