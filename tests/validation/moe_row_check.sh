# moe_row_check.sh — sourced by the check_moe_*.sh tests: a held-out MoE row's
# prediction against `megaplan estimate` with one setting on and off.
# Needs $validate, $megaplan and $data set by the caller.

# moe_row LO HI: the prediction of the moe row whose measured step lies in (LO, HI)
moe_row() {
    "$validate" "$data" --rows-tsv --only moe |
        awk -F'\t' -v lo="$1" -v hi="$2" '$4 > lo && $4 < hi { print $5 }'
}

# step_of ARGS...: the step time `megaplan estimate ARGS --format json` prints
step_of() {
    "$megaplan" estimate "$@" --format json |
        awk -F: '/"step":/ { gsub(/[ ,\t]/, "", $2); print $2; exit }'
}

# row_is ROW WANT OTHER WHAT TOL: ROW is WANT (the estimate with the row's
# setting) and not OTHER (without it), within TOL relative; WHAT names them
row_is() {
    awk -v r="$1" -v want="$2" -v other="$3" -v what="$4" -v tol="$5" 'BEGIN {
        if ((r - want) ^ 2 > (tol * want) ^ 2) { print "row " r " is not the " what " estimate " want; exit 1 }
        if ((r - other) ^ 2 <= (tol * other) ^ 2) { print "row " r " equals the estimate without " what ", " other; exit 1 }
    }'
}

# row_of LO HI: moe_row, failing (under set -e) when no row's measured step is in (LO, HI)
row_of() {
    r=$(moe_row "$1" "$2")
    [ -n "$r" ] || { echo "no moe row measured between $1 and $2 s" >&2; exit 1; }
    echo "$r"
}
