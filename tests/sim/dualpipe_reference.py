#!/usr/bin/env python3
"""DeepSeek's DualPipeV and DualPipe schedules, op by op, as their reference
code runs them (github.com/deepseek-ai/DualPipe, dualpipe/dualpipev.py and
dualpipe/dualpipe.py, `step` and the helpers it calls): a transcription of
their control flow only -- no tensors. Writes the fixture that
tests/sim/test_schedule.c (test_dualpipe_reference) holds the generator's
lists to:

    python3 tests/sim/dualpipe_reference.py > tests/sim/data/dualpipe_reference.txt

(the sim_dualpipe_reference test checks, with --check FILE, that the fixture
is still what this script writes)

Transfers: the reference appends each receive and send to a list
(comm.append_irecv / append_isend) and posts the list at the next
_commit_and_wait_comm, which waits for all of it; that commit is where each
transfer is written here, in the list's order. dualpipev.py's last rank hands
chunk 0's output to its own chunk 1 (and chunk 1's input gradient to chunk 0)
inside the compute, without a message: nothing is written for it.

Each line: schedule p m rank, then the rank's ops: F, B, W (a backward that
is not deferred is B then its W), sf / rf (send / receive an activation),
sb / rb (a gradient), each with micro-batch.chunk in megaplan's labels
(dualpipev: chunk = phase; dualpipe: chunk = direction, micro-batches
m/2.. in direction 1)."""

import sys


class Rank:
    def __init__(self, dual, p, m, rank):
        self.dual, self.p, self.m, self.rank = dual, p, m, rank
        self.first, self.last = rank == 0, rank == p - 1
        self.second = dual and rank >= p // 2
        self.middle = dual and rank in (p // 2 - 1, p // 2)
        self.ops, self.queue, self.wq = [], [], []
        z = lambda: [0, 0]
        self.f, self.b = z(), z()
        self.recv_f, self.recv_b, self.send_f, self.send_b = z(), z(), z(), z()

    def label(self, kind, phase, i):
        if self.dual:  # phase ^= is_in_second_half: the direction
            d = phase ^ self.second
            return "%s%d.%d" % (kind, i + d * (self.m // 2), d)
        return "%s%d.%d" % (kind, i, phase)

    # which stage ends a transfer skips (dualpipe.py applies the xor first)
    def _dir(self, phase):
        return phase ^ self.second if self.dual else phase

    def is_first_stage(self, phase):
        ph = self._dir(phase)
        return (self.first and ph == 0) or (self.last and ph == 1)

    def is_last_stage(self, phase):
        ph = self._dir(phase)
        return (self.first and ph == 1) or (self.last and ph == 0)

    # _recv_forward, _send_forward, _recv_backward, _send_backward: append to
    # the list unless the stage is the pipeline's end that has no peer
    def transfer(self, tag, counts, phase, end):
        if end(phase):
            return
        ph = self._dir(phase)
        self.queue.append(self.label(tag, phase, counts[ph]))
        counts[ph] += 1

    def recv_forward(self, phase):
        self.transfer("rf", self.recv_f, phase, self.is_first_stage)

    def send_forward(self, phase):
        self.transfer("sf", self.send_f, phase, self.is_last_stage)

    def recv_backward(self, phase):
        self.transfer("rb", self.recv_b, phase, self.is_last_stage)

    def send_backward(self, phase):
        self.transfer("sb", self.send_b, phase, self.is_first_stage)

    def commit(self):
        sends = [i for i, x in enumerate(self.queue) if x[0] == "s"]
        recvs = [i for i, x in enumerate(self.queue) if x[0] == "r"]
        # every commit of both files posts its sends before its receives
        assert not sends or not recvs or max(sends) < min(recvs), self.queue
        self.ops += self.queue
        self.queue = []

    def f_compute(self, phase):
        ph = self._dir(phase)
        self.ops.append(self.label("F", phase, self.f[ph]))
        self.f[ph] += 1

    def b_compute(self, phase, zb=False):
        ph = self._dir(phase)
        i = self.b[ph]
        self.b[ph] += 1
        self.ops.append(self.label("B", phase, i))
        if zb:  # WeightGradStore: kept for a later pop, FIFO
            self.wq.append(self.label("W", phase, i))
        else:
            self.ops.append(self.label("W", phase, i))

    def forward_chunk(self, phase, recv=True, send=True):
        if recv:
            self.recv_forward(phase)
        self.commit()
        self.f_compute(phase)
        if send:
            self.send_forward(phase)

    def backward_chunk(self, phase, zb=False, recv=True, send=True):
        if recv:
            self.recv_backward(phase)
        self.commit()
        self.b_compute(phase, zb)
        if send:
            self.send_backward(phase)

    def forward_backward_chunk(self, phase0, phase1, recv0=True):
        if recv0:
            self.recv_forward(phase0)
        self.recv_backward(phase1)
        self.commit()
        self.f_compute(phase0)  # _forward_backward_compute_chunk: F, then B
        self.b_compute(phase1)
        self.send_forward(phase0)
        self.send_backward(phase1)

    def weight_chunk(self):
        self.commit()
        self.ops.append(self.wq.pop(0))

    def step(self):
        p, m = self.p, self.m
        if self.dual:
            n, rank, chunks = p // 2, min(self.rank, p - 1 - self.rank), m // 2
            turn = self.middle
        else:
            n, rank, chunks, turn = p, self.rank, m, self.last
        for _ in range((n - rank - 1) * 2):  # 1: nF0
            self.forward_chunk(0)
        step_2 = rank + 1  # 2: nF0F1
        self.recv_forward(0)
        for i in range(step_2):
            if self.dual:
                self.forward_chunk(0, recv=False, send=self.middle)
                self.recv_forward(0)
                self.forward_chunk(1, send=(not self.middle) or (i < step_2 - 1))
                if not self.middle:
                    self.send_forward(0)
            else:
                self.forward_chunk(0, recv=False, send=False)
                self.recv_forward(0)
                self.forward_chunk(1, send=(not self.last) or (i < step_2 - 1))
                self.send_forward(0)
        for _ in range(n - rank - 1):  # 3: nB1W1F1
            self.backward_chunk(1, zb=True)
            self.recv_forward(1)
            self.weight_chunk()
            self.forward_chunk(1, recv=False)
        for i in range(chunks - n * 2 + rank + 1):  # 4: nF0B1F1B0
            if i == 0:
                if turn:
                    self.forward_chunk(0, recv=False, send=False)
                    self.send_forward(1)
                    self.backward_chunk(1, send=False)
                    self.send_forward(0)
                    self.send_backward(1)
                else:
                    self.forward_backward_chunk(0, 1, recv0=False)
            else:
                self.forward_backward_chunk(0, 1)
            self.forward_backward_chunk(1, 0)
        for _ in range(n - rank - 1):  # 5: nB1F1B0
            self.backward_chunk(1)
            self.forward_backward_chunk(1, 0)
        step_6, zb = rank + 1, False  # 6: nB1B0
        for i in range(step_6):
            if i == step_6 // 2 and rank % 2 == 1:
                zb = True
            self.backward_chunk(1, zb=zb)
            if i == step_6 // 2 and rank % 2 == 0:
                zb = True
            self.backward_chunk(0, zb=zb)
        for _ in range(n - rank - 1):  # 7: nWB0
            self.weight_chunk()
            self.backward_chunk(0, zb=True)
        for _ in range(rank + 1):  # 8: nW
            self.weight_chunk()
        assert not self.wq
        self.commit()
        return self.ops


# (p, m): every p the tests reach, m from the least the reference takes
# (m >= 2p; dualpipe: even p, even m) to past the steady state
CASES = {
    "dualpipev": [(1, 2), (1, 3), (2, 4), (2, 5), (2, 9), (3, 6), (3, 7), (4, 8), (4, 9),
                  (4, 13), (5, 10), (5, 12), (6, 12), (7, 15), (8, 16), (8, 21)],
    "dualpipe": [(2, 4), (2, 6), (4, 8), (4, 10), (4, 14), (6, 12), (6, 16), (8, 16),
                 (8, 22)],
}


def fixture():
    lines = ["# generated by tests/sim/dualpipe_reference.py from deepseek-ai/DualPipe\n"
             "# (dualpipe/dualpipev.py, dualpipe/dualpipe.py, commit 3da1bbe, MIT licence): "
             "schedule p m rank ops...\n"]
    for sched, cases in CASES.items():
        for p, m in cases:
            for r in range(p):
                ops = Rank(sched == "dualpipe", p, m, r).step()
                lines.append("%s %d %d %d %s\n" % (sched, p, m, r, " ".join(ops)))
    return "".join(lines)


def main():
    # --check FILE: whether FILE is what this script writes (the sim_dualpipe_reference test)
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            if f.read() != fixture():
                sys.exit("%s differs from tests/sim/dualpipe_reference.py's output" % sys.argv[2])
        return
    sys.stdout.write(fixture())


if __name__ == "__main__":
    main()
