#!/usr/bin/env python3
"""check_ds_schedule.py MEGAPLAN — the simulator's DeepSpeed pipeline against
DeepSpeed's own schedule.

For the Megatron-DeepSpeed stacks the simulator runs DeepSpeed's pipeline
engine (docs/cost-model.md §5, "Megatron-DeepSpeed", item 4; docs/simulator.md).
This check replays, independently of megaplan's code, the instruction lists of
DeepSpeed's TrainSchedule as microsoft/DeepSpeed e2fdd254e (2021-09-29) through
56c52238 (2022-04) write them in deepspeed/runtime/pipe/schedule.py:

  stage s runs 2(m + p - 1) steps; a step whose parity is the stage's is a
  forward step of micro-batch (step - s) // 2 (valid while 0 <= id < m),
  the other steps backward steps of micro-batch (step + s + 1) // 2 - p;
  a forward step: RecvActivation(this), SendGrad(previous step's), Forward
  a backward step: SendActivation(previous step's), RecvGrad(this), Backward
  (no receive or send to a stage that does not exist, none for an invalid id)

each send and its receive a blocking rendezvous (the transfer starts when both
ranks have reached it and both wait for its end). The op durations are the
simulator's own (its --events output: F, R + B per micro-batch and rank, each
send's transfer), so the two makespans must agree to rounding; and the same
plan under Megatron-LM, whose send and receive of a step move together, must
come out shorter than this order with its own durations. The estimate's
pipeline part (its step less DP and optimizer) must be the replay's too.

On equal stages (every F, every B and every transfer c the same) the replay is
also held to its closed form, for transfers no longer than a pass (c <=
min(F, B)):

  (m + p - 1)(F + B) + n c,   n = 2m (p = 2), 2(p - 1) (m = 1), 4m + 2p - 8 else

and, with free transfers and F != B, to 1F1B's (m + p - 1)(F + B), not the
2(m + p - 1) max(F, B) of steps held in lock-step: a stage meets each
neighbour only at every other step boundary, where the rendezvous is the data
dependency itself (docs/cost-model.md section 5, "Megatron-DeepSpeed", item 4).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

PLAN = """megaplan_plan: 1
model: {model}
hw: dgx-a100
training: {{gpus: {gpus}, seq: 2048, global_batch: {gb}, precision: fp16, stack: {stack}}}
parallel: {{tp: {tp}, sp: false, pp: {pp}, vpp: 1, cp: 1, dp: 1, micro_batch: {mb},
           recompute: full, dist_opt: false, dp_overlap: false, tp_overlap: false,
           schedule: 1f1b}}
"""


def ds_steps(s, p, m):
    """Stage s's instructions, in DeepSpeed's TrainSchedule order."""
    out, prev = [], -1
    for step in range(2 * (m + p - 1)):
        fwd = step % 2 == s % 2
        mb = (step - s) // 2 if fwd else (step + s + 1) // 2 - p
        if fwd:
            if 0 <= mb < m and s > 0:
                out.append(('recv', 'act', mb))
            if 0 <= prev < m and s > 0:
                out.append(('send', 'grad', prev))
            if 0 <= mb < m:
                out.append(('F', mb))
        else:
            if 0 <= prev < m and s < p - 1:
                out.append(('send', 'act', prev))
            if 0 <= mb < m and s < p - 1:
                out.append(('recv', 'grad', mb))
            if 0 <= mb < m:
                out.append(('B', mb))
        prev = mb
    return out


def replay(p, m, fwd, bwd, xfer):
    """Makespan of the instruction lists with blocking rendezvous.
    fwd[s][i], bwd[s][i]: compute of micro-batch i on stage s; xfer[(s, what, i)]:
    the transfer stage s sends ('act' forward to s + 1, 'grad' back to s - 1)."""
    prog = [ds_steps(s, p, m) for s in range(p)]
    pc, t = [0] * p, [0.0] * p
    posted = {}    # (src, what, i, side) -> when that side reached it
    ended = {}     # (src, what, i, side) -> the transfer's end, for a side still blocked
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while pc[s] < len(prog[s]):
                op = prog[s][pc[s]]
                if op[0] in ('F', 'B'):
                    t[s] += (fwd if op[0] == 'F' else bwd)[s][op[1]]
                else:
                    side, what, i = op
                    src = s if side == 'send' else (s - 1 if what == 'act' else s + 1)
                    other = 'recv' if side == 'send' else 'send'
                    key = (src, what, i)
                    if key + (side,) in ended:
                        t[s] = ended.pop(key + (side,))
                    elif key + (other,) in posted:
                        t[s] = max(t[s], posted.pop(key + (other,))) + xfer[key]
                        ended[key + (other,)] = t[s]
                    else:
                        posted.setdefault(key + (side,), t[s])
                        break
                pc[s] += 1
                moved = True
    if any(pc[s] < len(prog[s]) for s in range(p)):
        raise RuntimeError('replay deadlocked at ' + repr(pc))
    return max(t)


def closed_form(p, m, f, b, c):
    """DeepSpeed's TrainSchedule on p equal stages, c <= min(f, b)."""
    n = 2 * m if p == 2 else 2 * (p - 1) if m == 1 else 4 * m + 2 * p - 8
    return (m + p - 1) * (f + b) + n * c


def equal_stages(checks):
    bad = []
    lockstep = 0
    grid = [(p, m) for p in (2, 3, 4, 6, 9, 35) for m in (1, 2, 3, 5, 12, 40)]
    for p, m in grid:
        for f, b in ((1.0, 3.0), (1.0, 2.0), (2.0, 1.0), (1.0, 1.0)):
            for c in (0.0, 0.01, 0.3, min(f, b)):
                mk = replay(p, m, [[f] * m] * p, [[b] * m] * p,
                            {(s, w, i): c for s in range(p) for w in ('act', 'grad')
                             for i in range(m)})
                cf = closed_form(p, m, f, b, c)
                if abs(mk - cf) > 1e-9 * cf:
                    bad.append((p, m, f, b, c, mk, cf))
                if c == 0.0 and f != b and not mk < 2 * (m + p - 1) * max(f, b):
                    lockstep += 1
    report(checks, not bad,
           f'equal stages, {len(grid) * 16} cases: the replay is (m + p - 1)(F + B) + n c '
           f'(first misses: {bad[:3]})')
    report(checks, lockstep == 0,
           'equal stages, free transfers, F != B: shorter than lock-step steps '
           f'2(m + p - 1) max(F, B) ({lockstep} not)')
    # past c = min(F, B) the form no longer holds (what it is for is c << F)
    big = replay(3, 3, [[1.0] * 3] * 3, [[3.0] * 3] * 3,
                 {(s, w, i): 1.5 for s in range(3) for w in ('act', 'grad') for i in range(3)})
    report(checks, big > closed_form(3, 3, 1.0, 3.0, 1.5),
           f'p 3 m 3 F 1 B 3 c 1.5 > min(F, B): longer than the form ({big} against '
           f'{closed_form(3, 3, 1.0, 3.0, 1.5)})')


def report(checks, cond, what):
    (checks.ok if cond else checks.bad)(what)


def simulate(megaplan, tmp, **kw):
    path = os.path.join(tmp, 'plan.yaml')
    with open(path, 'w') as f:
        f.write(PLAN.format(**kw))
    r = subprocess.run([megaplan, 'simulate', path, '--format', 'json', '--events'],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError('megaplan simulate failed: ' + r.stderr.strip())
    return json.loads(r.stdout)


def durations(d):
    """Per stage and micro-batch F and R + B, and each send's transfer, from
    the simulation's events (names 'F i.chunk', 'send-fwd i.chunk' ...)."""
    p, m = d['parallel']['pp'], d['parallel']['microbatches']
    fwd = [[0.0] * m for _ in range(p)]
    bwd = [[0.0] * m for _ in range(p)]
    xfer = {}
    for e in d['simulation']['events']:
        name, _, idx = e['name'].partition(' ')
        i = int(idx.split('.')[0]) if idx else -1
        dt = e['end_s'] - e['start_s']
        r = e['rank']
        if e['stream'] == 'compute' and name == 'F':
            fwd[r][i] += dt
        elif e['stream'] == 'compute' and name in ('R', 'B'):
            bwd[r][i] += dt
        elif e['stream'] == 'pp-send':
            xfer[(r, 'act' if name == 'send-fwd' else 'grad', i)] = dt
    return p, m, fwd, bwd, xfer


def main():
    megaplan, = testlib.args('check_ds_schedule.py', 'MEGAPLAN', 1)
    checks = testlib.Checks('check_ds_schedule.py')
    # gpt3-1.3b t 8 (partitioned transfers), p 4, 32 micro-batches: the last
    # stage heavier by its head; gpt3-350m t 1, p 6, 9 micro-batches: warm-up
    # and drain a large part of the step
    cases = [dict(model='gpt3-1.3b', gpus=32, gb=64, tp=8, pp=4, mb=2),
             dict(model='gpt3-350m', gpus=6, gb=9, tp=1, pp=6, mb=1)]
    equal_stages(checks)
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            what = f"{c['model']} t {c['tp']} p {c['pp']} m {c['gb'] // c['mb']}"
            ds = simulate(megaplan, tmp, stack='megatron-deepspeed-2021', **c)
            p, m, fwd, bwd, xfer = durations(ds)
            sim = ds['simulation']['pipeline_makespan_s']
            mk = replay(p, m, fwd, bwd, xfer)
            report(checks, abs(mk - sim) <= 1e-9 * sim,
                   f'{what}: DeepSpeed TrainSchedule replayed {mk:.9f} s = '
                   f'simulated {sim:.9f} s')
            free = replay(p, m, fwd, bwd, {k: 0.0 for k in xfer})
            report(checks, mk > free,
                   f'{what}: the transfers lengthen it ({mk:.6f} s against {free:.6f} s free)')
            # the estimate's closed form (ds_pipe.c mp_ds_pipe_makespan_ends):
            # its pipeline part, step less DP and optimizer, is the replay's
            # to 1 % (exact on equal stages; these small models' first and
            # last stages carry a large embedding and head: -0.2 and -0.6 %;
            # four transfers on every slot, the form before, +3.7 and +4.8 %)
            t = ds['time_s']
            est = t['step'] - t['dp_comm'] - t['optimizer']
            report(checks, abs(est - mk) <= 1e-2 * mk,
                   f'{what}: estimate pipeline {est:.6f} s = replayed {mk:.6f} s '
                   f'({est / mk - 1:+.2e})')
            ml = simulate(megaplan, tmp, stack='megatron-lm', **c)
            mp, mm, mf, mbw, mx = durations(ml)
            mls = ml['simulation']['pipeline_makespan_s']
            mlr = replay(mp, mm, mf, mbw, mx)
            report(checks, mls < mlr,
                   f'{what}: Megatron-LM simulated {mls:.6f} s, shorter than its ops in '
                   f"DeepSpeed's order ({mlr:.6f} s)")
    checks.finish()


if __name__ == '__main__':
    main()
