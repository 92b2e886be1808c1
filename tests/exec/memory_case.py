#!/usr/bin/env python3
"""memory_case.py MEGAPLAN — exec's memory estimate against the memory a run takes.

Runs a few plans, from tiny ones (where the process itself, Open MPI and
OpenBLAS, is most of it) to ones of ~200 MiB a rank (where the model, its
activations and the fp64 reference are), and checks for each that the
estimate of the most loaded rank bounds the largest peak resident size a
rank measured (getrusage), and by no more than 2x. The estimate decides
whether a run starts at all (docs/exec.md, "Memory"); before it counted the
reference's activations and the collectives' buffers as nothing, and a run
that it let start was killed by the kernel. Skipped (77) under sanitizers,
whose shadow memory a plain run does not have."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

meg = sys.argv[1]
if b'libasan' in subprocess.run(['ldd', meg], capture_output=True).stdout:
    testlib.skip('memory_case.py', 'built with ASan: resident sizes are not comparable')

def plan(layers, hidden, heads, ffn, vocab, seq, tp, pp, dp, gb, dist_opt, sp=False, zero=0):
    return f"""megaplan_plan: 1
model: {{name: mem, arch: gpt, layers: {layers}, hidden: {hidden}, heads: {heads},
        kv_heads: {heads}, head_dim: {hidden // heads}, ffn_hidden: {ffn}, vocab: {vocab},
        seq: {seq}, activation: gelu, norm: layernorm, position: learned,
        tied_embeddings: true}}
hw: dgx-a100
training: {{gpus: {tp * pp * dp}, seq: {seq}, global_batch: {gb}, precision: fp32, tokens: 0}}
parallel: {{tp: {tp}, sp: {str(sp).lower()}, pp: {pp}, vpp: 1, cp: 1, dp: {dp}, micro_batch: 1,
           recompute: none, dist_opt: {str(dist_opt).lower()}, zero: {zero}, dp_overlap: false,
           tp_overlap: false, schedule: 1f1b}}
"""

def moe_plan(dp, ep, dist_opt, zero=0):
    # 8 experts of 1024 over ep ranks: the experts' state sharded over
    # expert-DP = dp / ep, the rest over dp (shard.c)
    return plan(2, 256, 8, 1024, 4096, 128, 1, 1, dp, dp, dist_opt, zero=zero).replace(
        'tied_embeddings: true}', 'tied_embeddings: true, moe: {experts: 8, top_k: 2, '
        'expert_ffn: 1024, first_dense: 1}}').replace('dist_opt:', f'ep: {ep}, dist_opt:')

cases = {
    # name: (plan, extra exec args)
    'tiny-1-rank': (plan(2, 32, 4, 128, 64, 16, 1, 1, 1, 1, False), []),
    'tiny-tp2-pp2-dp2-distopt': (plan(2, 32, 4, 128, 64, 16, 2, 2, 2, 4, True), []),
    'h256-dp2-distopt': (plan(2, 256, 8, 1024, 4096, 128, 1, 1, 2, 2, True), []),
    # ZeRO-3: the shard lives in the stage's gather buffer (zero.c), so it takes
    # what ZeRO-1 takes; the estimate must say so, not the planner's saving
    'h256-dp2-zero3': (plan(2, 256, 8, 1024, 4096, 128, 1, 1, 2, 2, True, zero=3), []),
    'h256-tp2-sp-pp2': (plan(2, 256, 8, 1024, 4096, 128, 2, 2, 1, 2, False, sp=True), []),
    'h128-tp2-exact': (plan(2, 128, 4, 512, 256, 128, 2, 1, 1, 1, False), ['--exact']),
    # experts with the distributed optimizer and ZeRO-3: two parts, two shards
    'moe-h256-ep2-dp4-distopt': (moe_plan(4, 2, True), []),
    'moe-h256-ep2-dp4-zero3': (moe_plan(4, 2, True, zero=3), []),
}
# MALLOC_PERTURB_ fills every malloc'ed block, so that all of it is resident:
# the estimate must bound what is allocated, not only what a run touches
env = dict(testlib.MPI_ENV, MALLOC_PERTURB_='165')
checks = testlib.Checks('memory_case.py')
estimates = {}
with tempfile.TemporaryDirectory() as tmp:
    for name, (text, extra) in cases.items():
        path = os.path.join(tmp, name + '.yaml')
        with open(path, 'w') as f:
            f.write(text)
        ranks = eval(text.split('gpus: ')[1].split(',')[0])
        r = subprocess.run([meg, 'exec', '--np', str(ranks), path, '--steps', '2',
                            '--format', 'json'] + extra,
                           capture_output=True, text=True, env=env, timeout=240)
        line = [l for l in r.stdout.splitlines() if l.startswith('{')]
        if r.returncode != 0 or not line:
            checks.bad(f'{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}')
            continue
        j = json.loads(line[-1])
        est, peak = j['memory_estimated_bytes'], j['memory_peak_bytes']
        desc = (f'{name}: {ranks} ranks, estimated {est / 2**20:.1f} MiB, measured peak '
                f'{peak / 2**20:.1f} MiB, ratio {est / peak:.2f}')
        if peak <= est <= 2 * peak:
            checks.ok(desc)
        else:
            checks.bad(desc)
        estimates[name] = est
# exec's ZeRO-3 gathers the whole stage into the buffer that holds the shard:
# no saving over ZeRO-1 but NaN poison's piece (docs/exec.md, "ZeRO-2 and ZeRO-3")
if 'h256-dp2-zero3' in estimates and 'h256-dp2-distopt' in estimates:
    extra = estimates['h256-dp2-zero3'] - estimates['h256-dp2-distopt']
    desc = f'zero3 against zero1: {extra:.0f} bytes more'
    if 0 < extra < 64 * 1024:
        checks.ok(desc)
    else:
        checks.bad(desc)
checks.finish()
