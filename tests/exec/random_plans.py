#!/usr/bin/env python3
"""random_plans.py MEGAPLAN PLANS_DIR SEED N — exec on N random tiny plans.

Each plan draws every setting the executor runs at once: model (GPT,
LLaMA-style with 2 or 4 key/value heads and 0 to 2 multi-token-prediction
modules, BERT or T5), tp, sp, cp, pp, vpp, dp, the
distributed optimizer, the schedule, recomputation, tied embeddings,
micro-batch size and count (within 8 ranks), and is run for two steps in
exact mode (bitwise) or fp32 tolerance mode against the reference. The named
cases of tests/exec/meson.build pick combinations by hand; this reaches the
ones nobody thought of, reproducibly (the seed), and prints any that fail."""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

meg, plans, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
templates = {m: open(os.path.join(plans, f)).read()
             for m, f in (('gpt', 'tiny.yaml.in'), ('llama', 'tiny-llama.yaml.in'),
                          ('bert', 'tiny-bert.yaml.in'), ('t5', 'tiny-t5.yaml.in'))}
env = testlib.MPI_ENV
tmp = os.environ.get('TMPDIR', '/tmp')
checks = testlib.Checks('random_plans.py')
for t in range(n):
    model = rng.choice(['gpt', 'llama', 'bert', 't5'])
    while True:
        tp, cp, pp, dp = (rng.choice([1, 2]) for _ in range(4))
        if model in ('bert', 't5'):
            cp = 1  # context parallelism is for decoders (the configuration check's rule)
        if tp * cp * pp * dp <= 8:
            break
    sp = tp > 1 and rng.random() < 0.5
    vpp = 2 if pp == 2 and rng.random() < 0.4 and model != 't5' else 1  # T5: as Megatron
    sched = 'interleaved-1f1b' if vpp > 1 else rng.choice(['1f1b', 'gpipe', 'zb-h1'])
    kv = rng.choice([2, 4])
    layers = pp * vpp * rng.choice([1, 2])
    mb = rng.choice([1, 2])
    m = pp * rng.choice([1, 2]) if vpp > 1 else rng.choice([1, 2, 3, 4])
    rc = rng.choice(['none', 'selective', 'full'])
    tied = rng.choice(['true', 'false'])
    distopt = 'true' if dp > 1 and rng.random() < 0.5 else 'false'
    exact = rng.random() < 0.5
    gpus = tp * cp * pp * dp
    # LLaMA-style plans carry 0, 1 or 2 multi-token-prediction modules by the
    # plan's number (not with CP, which exec refuses for them), drawing nothing,
    # so that the plans drawn above stay those of the seed
    mtp = t % 3 if model == 'llama' and cp == 1 else 0
    text = templates[model]
    fields = {'TP': tp, 'SP': str(sp).lower(), 'DP': dp, 'PP': pp, 'DISTOPT': distopt,
              'GPUS': gpus, 'GB': mb * dp * m, 'MB': mb, 'TIED': tied, 'SCHED': sched,
              'LAYERS': layers, 'VPP': vpp, 'CP': cp, 'KV': kv, 'MTP': mtp,
              'HW': 'dgx-h100' if cp > 1 else 'dgx-a100'}  # CP wants fused attention
    for k, v in fields.items():
        text = text.replace('@%s@' % k, str(v))
    text = text.replace('recompute: none', 'recompute: ' + rc)
    path = os.path.join(tmp, 'megaplan-random-plan-%d-%d.yaml' % (os.getpid(), t))
    with open(path, 'w') as f:
        f.write(text)
    args = ['timeout', '90', 'mpirun', '--oversubscribe', '-np', str(gpus), meg, 'exec', path,
            '--steps', '2'] + (['--exact'] if exact else [])  # fp32: the model's default --tol
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    os.unlink(path)
    desc = ('%s tp=%d sp=%d cp=%d pp=%d vpp=%d dp=%d dist_opt=%s %s recompute=%s tied=%s '
            'kv=%d layers=%d mb=%d m=%d mtp=%d %s') % (model, tp, sp, cp, pp, vpp, dp, distopt,
                                                      sched, rc, tied, kv, layers, mb, m, mtp,
                                                      'exact' if exact else 'fp32')
    if r.returncode == 0 and 'OK:' in r.stdout:
        checks.ok(desc)
    else:
        checks.bad(desc + ' (exit %d)\n%s' % (r.returncode, (r.stdout + r.stderr)[-1500:]))
checks.finish('seed %d' % seed)
