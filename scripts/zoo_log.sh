# Sourced by the benchmark scripts: reading a zoo run's log.

# The median of a zoo log's "Rate=N samples/sec" windows after the first (the
# first holds the warm-up), read from stdin; fails when there is none.
median_rate() {
  sed -n 's/.*, Rate=\([0-9.]*\) samples.*/\1/p' | tail -n +2 | sort -g |
    awk '{ r[NR] = $1 } END { if (NR == 0) exit 1; print r[int((NR + 1) / 2)] }'
}
