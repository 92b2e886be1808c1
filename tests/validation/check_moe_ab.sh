#!/bin/sh
# usage: check_moe_ab.sh MEGAPLAN_VALIDATE DATA_DIR
# tests/data/moe/megatron_bridge_ep_overlap_ab.csv is its own set, `moe-ab`,
# of role fit: Megatron-Bridge's two published A/B pairs of the EP all-to-all
# overlap, each row's step the page's steady-state mean as printed (41.25 and
# 31.31 s, NCCL all-to-all; 24.7138 and 20.9920 s, HybridEP), not a step
# derived from a throughput (the file gives none). The overlap rows are
# predicted faster than their pair's other row (the overlap hides some of the
# all-to-all), and the held-out moe set keeps its rows (59) without them.
set -e
validate=$1 data=$2
# (the exit status speaks of acceptance thresholds, not of these rows)
rows=$("$validate" "$data" --rows-tsv --only moe-ab || true)
[ -n "$rows" ] || { echo "no moe-ab rows"; exit 1; }
echo "$rows" | awk -F'\t' '
    BEGIN { bad = 0 }
    $1 != "moe-ab" || $2 != "fit" || $3 != "dgx-h100" { print "bad row: " $0; bad = 1 }
    { m[NR] = $4; p[NR] = $5 }
    END {
        if (NR != 4) { print NR " rows, not 4"; exit 1 }
        split("41.25 31.31 24.7138 20.992", want, " ")
        for (i = 1; i <= 4; i++)
            if ((m[i] - want[i]) ^ 2 > 1e-12) { print "row " i " measured " m[i] ", not " want[i]; bad = 1 }
        if (!(p[2] < p[1]) || !(p[4] < p[3])) { print "an overlap row is not predicted faster"; bad = 1 }
        exit bad
    }'
n=$("$validate" "$data" --rows-tsv --only moe | awk -F'\t' '$1 == "moe" && $2 == "held-out"' | wc -l)
[ "$n" -eq 59 ] || { echo "the held-out moe set has $n rows, not 59"; exit 1; }
