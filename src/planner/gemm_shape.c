/* gemm_shape.c — what a GEMM's shape costs beyond its FLOPs: tile and wave
 * quantisation on the GPU's SMs (docs/cost-model.md §4, "GEMM shape").
 *
 * cuBLAS and CUTLASS split a GEMM's m x n output into CTA tiles; each SM
 * computes one tile at a time over the whole k loop, and the tiles run in
 * waves of as many as there are SMs (NVIDIA, "Matrix Multiplication
 * Background User's Guide", DU-09799-001, §3 "Dimension Quantization
 * Effects"). A partial tile at an edge of the output costs a whole tile
 * (tile quantisation); a last wave with fewer tiles than SMs costs a whole
 * wave (wave quantisation). The GEMM's time is then that of
 * waves x SMs full tiles, and its useful fraction is
 *     m n / (waves x SMs x tile_m x tile_n).
 * cuBLAS's heuristic picks among its tile shapes (the guide's §2.3 lists
 * 256x128 and 128x256 as the most efficient on A100, then 128x128, 256x64 and
 * 64x256, 128x64 and 64x128, 64x64 as the least); the model takes the one
 * whose quantisation and own rate together are best. The profile names the
 * largest tile (gemm_tile.m x gemm_tile.n); the candidates are it, its
 * transpose, and the tiles the guide lists below it, halving either side
 * down to 64. A tile reuses each operand element it loads tile_m tile_n /
 * (tile_m + tile_n) times per k step; tiles of at least half the largest's
 * area (128x128 on A100: CUTLASS's SM80 and SM90 default tensor-op CTA tiles
 * are 128x128 and larger) keep the tensor cores fed, a smaller one runs at
 * its reuse over that of the half-area square tile. What quantisation does
 * not explain (launch, the k loop's prologue and epilogue, small problems)
 * stays in the profile's fitted gemm_efficiency curve. */
#include <math.h>

#include "planner/cost_internal.h"

#define MIN_TILE_SIDE 64.0

bool mp_gemm_shape_on(const mp_hw *hw)
{
    return hw->sm_count >= 1.0 && hw->gemm_tile_m >= MIN_TILE_SIDE &&
           hw->gemm_tile_n >= MIN_TILE_SIDE;
}

double mp_gemm_waves(const mp_hw *hw, double groups, double m, double n, double tile_m,
                     double tile_n)
{
    double tiles = groups * ceil(m / tile_m) * ceil(n / tile_n);
    return ceil(tiles / hw->sm_count);
}

/* rate of a tile_m x tile_n CTA relative to the largest tile's */
static double tile_rate(const mp_hw *hw, double tm, double tn)
{
    double side = sqrt(0.5 * hw->gemm_tile_m * hw->gemm_tile_n); /* the half-area square */
    double full = 0.5 * side;                                     /* its reuse, side^2/(2 side) */
    double reuse = tm * tn / (tm + tn);
    return reuse >= full ? 1.0 : reuse / full;
}

static double quantised(const mp_hw *hw, double groups, double m, double n, double tm, double tn)
{
    double waves = mp_gemm_waves(hw, groups, m, n, tm, tn);
    return tile_rate(hw, tm, tn) * groups * m * n / (waves * hw->sm_count * tm * tn);
}

double mp_gemm_shape_efficiency(const mp_hw *hw, double groups, double m, double n)
{
    if (!mp_gemm_shape_on(hw) || !(groups > 0.0) || !(m > 0.0) || !(n > 0.0))
        return 1.0;
    double best = 0.0;
    /* the largest tile and its transpose, then each side halved in turn */
    for (double tm = hw->gemm_tile_m; tm >= MIN_TILE_SIDE; tm *= 0.5)
        for (double tn = hw->gemm_tile_n; tn >= MIN_TILE_SIDE; tn *= 0.5) {
            double a = quantised(hw, groups, m, n, tm, tn);
            double b = quantised(hw, groups, m, n, tn, tm);
            if (a > best)
                best = a;
            if (b > best)
                best = b;
        }
    return best > 0.0 ? best : 1.0;
}
