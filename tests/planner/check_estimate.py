#!/usr/bin/env python3
"""check_estimate.py MEGAPLAN — `megaplan estimate` end to end: the table, the
docs/formats.md JSON object, YAML, refusals with exit 2, a configuration that does
not fit (still estimated, fits false and by how much), the defaults it states."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

exe = sys.argv[1]
checks = testlib.Checks('check_estimate.py')
check = checks.check


def run(*args):
    p = subprocess.run([exe, 'estimate', *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


base = ['--model', '175B', '--gpus', '1024', '--tp', '8', '--pp', '8']

rc, out, err = run(*base)
check(rc == 0, 'table: exit 0 (%d: %s)' % (rc, err))
for word in ('compute', 'pipeline bubble', 'DP communication', 'step', 'peak', 'capacity',
             'MFU', 'HFU', 'tokens/s', 'defaults', 'micro_batch=1'):
    check(word in out, 'table mentions %r' % word)

rc, out, err = run(*base, '--sp', '--recompute', 'selective', '--dist-opt', '--format', 'json')
check(rc == 0, 'json: exit 0')
o = json.loads(out)
for key in ('model', 'hw', 'gpus', 'parallel', 'memory_gib', 'time_s', 'throughput', 'fits'):
    check(key in o, 'json has %s' % key)
t = o['time_s']
parts = sum(t[k] for k in ('compute', 'recompute', 'tp_comm', 'cp_comm', 'pp_comm', 'dp_comm',
                           'bubble', 'optimizer'))
check(abs(parts / t['step'] - 1) < 1e-4, 'time parts add up to step (%g vs %g)' % (parts, t['step']))
check(o['parallel']['microbatches'] == 96 and o['parallel']['dp'] == 16, 'microbatches, dp')
check(o['fits'] is True and 'over_gib' not in o, 'fits')
check(0.3 < o['throughput']['mfu'] < 0.65, 'plausible MFU %g' % o['throughput']['mfu'])
check(any(d.startswith('micro_batch') for d in o.get('defaults', [])), 'defaults listed')

rc, out, err = run('--model', '175B', '--gpus', '64', '--tp', '8', '--pp', '8', '--format', 'json')
o = json.loads(out)
check(rc == 0 and o['fits'] is False and o['over_gib'] > 0, 'does not fit: still estimated')

rc, out, err = run(*base, '--format', 'yaml')
check(rc == 0 and 'time_s:' in out and 'memory_gib:' in out, 'yaml')

# --format megatron is the planner's one flag writer (search uses it too):
# pasteable lines, and the note that Megatron-LM has no ZB-H1 flag
rc, out, err = run(*base, '--format', 'megatron')
check(rc == 0 and '--tensor-model-parallel-size' in out and '--num-layers' in out,
      'megatron flags')
rc, out, err = run('--model', '175B', '--gpus', '1024', '--tp', '8', '--pp', '8', '--sp',
                   '--recompute', 'selective', '--dist-opt', '--schedule', 'zb-h1',
                   '--format', 'megatron')
notes = [line for line in out.splitlines() if line.startswith('#')]
check(rc == 0 and any(n.startswith('# schedule zb-h1') for n in notes)
      and out.startswith('#'), 'megatron: zb-h1 noted: %r' % out[:80])

for bad, field in ((['--model', '175B', '--gpus', '1000', '--tp', '8', '--pp', '8'], '--gpus'),
                   (base + ['--vpp', '5'], '--vpp'),
                   (base + ['--bogus'], '--bogus'),
                   (base + ['--recompute', 'sometimes'], '--recompute')):
    rc, out, err = run(*bad)
    check(rc == 2, '%s: exit 2 (got %d)' % (' '.join(bad), rc))
    check(err.startswith('megaplan estimate: ') and field in err and err.count('\n') == 1,
          '%s: one line naming %s: %r' % (' '.join(bad), field, err))
    check(out == '', 'nothing on stdout when refused')

# MoE: the flex dispatcher and the EP all-to-all overlap from the command line, in the
# JSON and the Megatron flags; each makes the step shorter than the all-to-all inline
moe = ['--model', 'deepseek-v3', '--hw', 'dgx-h100', '--gpus', '1024', '--pp', '8',
       '--ep', '64', '--etp', '1', '--global-batch', '1024', '--dist-opt']
steps = {}
for extra in ([], ['--dispatcher', 'flex'], ['--dispatcher', 'flex', '--shared-expert-overlap', 'on']):
    rc, out, err = run(*moe, *extra, '--format', 'json')
    check(rc == 0, 'moe %s: exit 0 (%s)' % (extra, err))
    o = json.loads(out) if rc == 0 else {'time_s': {'step': 0}, 'parallel': {}}
    steps[' '.join(extra)] = o['time_s']['step']
    if extra:
        check(o['parallel'].get('dispatcher') == 'flex', 'moe json: dispatcher flex')
check(steps['--dispatcher flex'] < steps[''], 'flex beats the all-to-all across nodes: %s' % steps)
check(steps['--dispatcher flex --shared-expert-overlap on'] < steps['--dispatcher flex'],
      'the shared-expert overlap hides some of the dispatch: %s' % steps)
over = moe[:]  # pp 1: Megatron's overlap needs no virtual pipeline there
over[over.index('--pp') + 1] = '1'
rc, out, err = run(*over, '--moe-a2a-overlap', 'on', '--format', 'megatron')
check(rc == 0 and '--overlap-moe-expert-parallel-comm' in out and '--delay-wgrad-compute' in out,
      'megatron: the EP overlap flags (%s)' % err)
rc, out, err = run(*over, '--moe-a2a-overlap', 'on', '--format', 'json')
check(rc == 0 and json.loads(out)['parallel'].get('moe_a2a_overlap') is True,
      'json: moe_a2a_overlap (%s)' % err)
rc, out, err = run(*moe, '--cuda-graph-scope', 'attn,moe_router,moe_preprocess', '--format',
                   'megatron')
check(rc == 0 and '--cuda-graph-impl transformer_engine' in out and
      '--cuda-graph-scope attn moe_router moe_preprocess' in out,
      'megatron: the CUDA-graph flags (%s)' % err)
rc, out, err = run(*moe, '--cuda-graph-scope', 'attn,moe_router', '--format', 'json')
check(rc == 0 and json.loads(out)['parallel'].get('cuda_graph_scope') == ['attn', 'moe_router'],
      'json: cuda_graph_scope (%s)' % err)

# --p2p-overlap: an interleaved run hides its pipeline transfers (the PP line
# shrinks, the step with it); the table and the JSON say it is on; 1F1B ignores it
inter = ['--model', 'llama3-70b', '--gpus', '64', '--hw', 'dgx-h100', '--seq', '8192',
         '--global-batch', '128', '--tp', '4', '--sp', '--pp', '8', '--vpp', '5', '--dist-opt',
         '--format', 'json']
times = {}
for flag in ('off', 'on'):
    rc, out, err = run(*inter, '--p2p-overlap', flag)
    check(rc == 0, 'json with --p2p-overlap %s: exit 0 (%s)' % (flag, err))
    times[flag] = json.loads(out)['time_s'] if rc == 0 else {'pp_comm': 0, 'step': 0}
    check((json.loads(out)['parallel'].get('p2p_overlap') is True) == (flag == 'on'),
          'json: p2p_overlap written only when on')
check(times['on']['pp_comm'] < 0.5 * times['off']['pp_comm'] and
      times['on']['step'] < times['off']['step'],
      'the overlap hides the pipeline transfers: %s' % times)
rc, out, err = run(*inter[:-2], '--p2p-overlap', 'on')
check(rc == 0 and 'p2p_overlap=on' in out, 'table: p2p_overlap=on (%s)' % err)
# Megatron-LM overlaps interleaved p2p unless told not to: the export says which was estimated
mflags = {f: run(*inter[:-2], '--p2p-overlap', f, '--format', 'megatron')[1] for f in ('off', 'on')}
check('--no-overlap-p2p-communication' in mflags['off'] and
      '--no-overlap-p2p-communication' not in mflags['on'],
      'megatron: --no-overlap-p2p-communication exactly when the estimate was synchronous')
flat = [a for a in inter if a not in ('--vpp', '5')]
steps = [json.loads(run(*flat, '--p2p-overlap', f)[1])['time_s']['step'] for f in ('off', 'on')]
check(steps[0] == steps[1], '1F1B: --p2p-overlap changes nothing (%s)' % steps)

# --te-cross-entropy: the loss's passes shrink (compute falls), the flags and the JSON say so
small = ['--model', 'llama3-8b', '--gpus', '8', '--hw', 'dgx-h100', '--seq', '8192',
         '--global-batch', '64', '--precision', 'fp8', '--dist-opt']
comp = {}
for flag in ('off', 'on'):
    rc, out, err = run(*small, '--te-cross-entropy', flag, '--format', 'json')
    check(rc == 0, 'json with --te-cross-entropy %s: exit 0 (%s)' % (flag, err))
    doc = json.loads(out) if rc == 0 else {}
    comp[flag] = doc.get('time_s', {}).get('compute', 0)
check(0 < comp['on'] < comp['off'], 'the fused cross entropy is cheaper: %s' % comp)
rc, out, err = run(*small, '--te-cross-entropy', 'on', '--format', 'megatron')
check(rc == 0 and '--cross-entropy-loss-fusion' in out and '--cross-entropy-fusion-impl te' in out,
      'megatron: the fused cross entropy flags (%s)' % err)
# --native-cross-entropy: Megatron-Core's native fused loss, between the two
rc, out, err = run(*small, '--native-cross-entropy', 'on', '--format', 'json')
check(rc == 0, 'json with --native-cross-entropy on: exit 0 (%s)' % err)
nat = json.loads(out).get('time_s', {}).get('compute', 0) if rc == 0 else 0
check(comp['on'] < nat < comp['off'], 'the native fused loss between TE and unfused: %s %s' % (nat, comp))
rc, out, err = run(*small, '--native-cross-entropy', 'on', '--format', 'megatron')
check(rc == 0 and '--cross-entropy-loss-fusion' in out and
      '--cross-entropy-fusion-impl native' in out and 'impl te' not in out,
      'megatron: the native fused cross entropy flags (%s)' % err)
rc, out, err = run(*small, '--native-cross-entropy', 'on', '--te-cross-entropy', 'on')
check(rc == 2 and '--native-cross-entropy' in err and 'not both' in err and err.count('\n') == 1,
      'both fused losses: one line, exit 2 (%d %s)' % (rc, err))

# --nccl-ub: Megatron FSDP's gathers and reductions hold fewer SMs, the step shortens
fsdp = ['--model', 'llama3-8b', '--gpus', '8', '--hw', 'dgx-h100', '--seq', '8192',
        '--global-batch', '64', '--precision', 'fp8', '--zero', '3', '--format', 'json']
st = [json.loads(run(*fsdp, '--nccl-ub', f)[1])['time_s']['step'] for f in ('off', 'on')]
check(st[1] < st[0], 'nccl_ub: the FSDP step shortens (%s)' % st)

checks.finish()
