#!/bin/sh
# mpi_case.sh — one run of `megaplan exec` on a generated tiny plan, checked.
#   mpi_case.sh MEGAPLAN TEMPLATE EXPECT NP TP SP DP DISTOPT [KEY=VALUE...] [-- exec args...]
# EXPECT: ok (exit 0, JSON line ok:true), mismatch (exit 1, names tensor and
# rank), input (exit 2), killed (non-zero exit within the time limit, a
# message saying a rank died), stalled (a rank stopped: non-zero exit within
# 30 s, a rank's line naming the operation that waited too long). KEY=VALUE: PP, MB (micro-
# batch), M (micro-batches per DP rank), TIED, SCHED, LAUNCH=np (use `megaplan exec --np`) or
# LAUNCH=direct (one process, no launcher: MPI's singleton start),
# WANT=regex, WANT2=regex (must appear in the output), TRACE=1 (--trace; the measured
# trace must hold F and B events of every micro-batch on every rank),
# SEED=n (--seed n), LAYERS=n (the model's layers; default 2), STAGES=list
# (the plan's stages as YAML, e.g. '[[0, 2], [2, 4]]'), VPP=n, CP=n, HW=profile,
# KV=n (key/value heads of templates that ask; default 2), RC=none|selective|full
# (the plan's recompute), LRC=list (its layer_recompute, one per layer item),
# PREC=bf16|fp16 (the plan's precision; default fp32); templates with experts: EP=n, ETP=n (expert
# parallelism; default 1, and etp 0: = tp), CF=x (capacity factor; default 0, dropless), ROUTER=softmax|sigmoid,
# SHARED=n (shared experts; default 0); templates with latent attention: QLORA=n (the query
# latent's rank; default 16, 0: none); ZERO=2|3 (the plan's zero; with DISTOPT true),
# HSDP=true (the plan's hsdp), HWFILE=file (its `hw:` mapping replaces the plan's profile name),
# LAYOUT=string (the plan's parallel.pipeline_layout, Megatron's layout grammar),
# RCM=list (with RC=selective: its recompute_modules, comma-separated); templates with a
# window: WINDOW=n (default 5; 0: no window, full attention in every block); templates with
# rotary positions: YARN=1 (GPT-OSS's YaRN angles: base 150000, factor 32 over 4096
# positions, betas 32 and 1, unrounded ramp bounds; YARN=ds: DeepSeek-V3's, base 10000,
# factor 40 over 4096 positions, betas 32 and 1, rounded bounds, mscale and mscale_all_dim 1);
# QKNORM=1 (attn.qk_norm: Qwen3's RMSNorm on each query and key head); NORMEPS=x (the model's
# norm_eps; default: the template's architecture's); ACT=name (the plan's model.activation in
# place of the template's: gelu_erf, geglu, ...); HEADDIM=n (the model's head_dim, its heads
# then n wide whatever the hidden size: Qwen3's and Gemma's heads x head_dim != hidden);
# HIDDEN=n (the template's hidden size, its head_dim kept: a hidden size no multiple of heads).
set -u
megaplan=$1 template=$2 expect=$3 np=$4 tp=$5 sp=$6 dp=$7 distopt=$8
shift 8
pp=1 mb=1 m=2 tied=true sched=1f1b launch=mpirun want= trace= seed= layers=2 stages= vpp=1 cp=1 hw=dgx-a100 kv=2 rc= lrc= prec= want2= zero= hsdp= hwfile= layout=
ep=1 etp=0 cf=0 router=softmax shared=0 qlora=16 par= rcm=
experts=4 topk=2 groups=0 gtopk=0 rscale=0 brate=0 mtp=0 window=5 yarn= qknorm= normeps= act=
headdim= hidden=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case $1 in
    PP=*) pp=${1#PP=} ;; MB=*) mb=${1#MB=} ;; M=*) m=${1#M=} ;;
    TIED=*) tied=${1#TIED=} ;; SCHED=*) sched=${1#SCHED=} ;;
    LAUNCH=*) launch=${1#LAUNCH=} ;; WANT=*) want=${1#WANT=} ;; WANT2=*) want2=${1#WANT2=} ;; TRACE=*) trace=${1#TRACE=} ;;
    SEED=*) seed=${1#SEED=} ;; LAYERS=*) layers=${1#LAYERS=} ;; STAGES=*) stages=${1#STAGES=} ;;
    VPP=*) vpp=${1#VPP=} ;; CP=*) cp=${1#CP=} ;; HW=*) hw=${1#HW=} ;; KV=*) kv=${1#KV=} ;;
    RC=*) rc=${1#RC=} ;; LRC=*) lrc=${1#LRC=} ;; PREC=*) prec=${1#PREC=} ;;
    ZERO=*) zero=${1#ZERO=} ;; HSDP=*) hsdp=${1#HSDP=} ;; HWFILE=*) hwfile=${1#HWFILE=} ;;
    EP=*) ep=${1#EP=} ;; ETP=*) etp=${1#ETP=} ;; CF=*) cf=${1#CF=} ;; ROUTER=*) router=${1#ROUTER=} ;; SHARED=*) shared=${1#SHARED=} ;;
    QLORA=*) qlora=${1#QLORA=} ;; LAYOUT=*) layout=${1#LAYOUT=} ;; PAR=*) par=${1#PAR=} ;;
    EXPERTS=*) experts=${1#EXPERTS=} ;; TOPK=*) topk=${1#TOPK=} ;; GROUPS=*) groups=${1#GROUPS=} ;;
    GTOPK=*) gtopk=${1#GTOPK=} ;; RSCALE=*) rscale=${1#RSCALE=} ;; BRATE=*) brate=${1#BRATE=} ;;
    MTP=*) mtp=${1#MTP=} ;; RCM=*) rcm=${1#RCM=} ;; WINDOW=*) window=${1#WINDOW=} ;;
    YARN=*) yarn=${1#YARN=} ;; QKNORM=*) qknorm=${1#QKNORM=} ;; NORMEPS=*) normeps=${1#NORMEPS=} ;;
    ACT=*) act=${1#ACT=} ;; HEADDIM=*) headdim=${1#HEADDIM=} ;; HIDDEN=*) hidden=${1#HIDDEN=} ;;
    *) echo "mpi_case.sh: unknown $1" >&2; exit 99 ;;
    esac
    shift
done
[ $# -gt 0 ] && shift
. "$(dirname "$0")/../lib.sh"
nowin=; [ "$window" = 0 ] && nowin='s/window: @WINDOW@, window_skip_freq: [0-9]*, //'
gpus=$((tp * dp * pp * cp))
sed -e "s/@TP@/$tp/; s/@SP@/$sp/; s/@DP@/$dp/; s/@PP@/$pp/; s/@DISTOPT@/$distopt/" \
    -e "s/@GPUS@/$gpus/; s/@GB@/$((mb * dp * m))/; s/@MB@/$mb/; s/@TIED@/$tied/" \
    -e "s/@SCHED@/$sched/; s/@LAYERS@/$layers/; s/@VPP@/$vpp/; s/@CP@/$cp/; s/@HW@/$hw/; s/@KV@/$kv/" \
    -e "s/@EP@/$ep/; s/@ETP@/$etp/; s/@CF@/$cf/; s/@ROUTER@/$router/; s/@SHARED@/$shared/; s/@QLORA@/$qlora/" \
    -e "s/@EXPERTS@/$experts/; s/@TOPK@/$topk/; s/@GROUPS@/$groups/; s/@GTOPK@/$gtopk/" \
    -e "s/@RSCALE@/$rscale/; s/@BRATE@/$brate/; s/@MTP@/$mtp/" \
    -e "${nowin:-s/^//}; s/@WINDOW@/$window/" "$template" > "$T/plan.yaml" || exit 99
if [ -n "$stages" ]; then echo "stages: $stages" >> "$T/plan.yaml"; fi
if [ -n "$yarn" ]; then
    fields='rope_yarn: true, rope_theta: 150000, yarn_factor: 32, yarn_original_seq: 4096, yarn_beta_fast: 32, yarn_beta_slow: 1, yarn_bounds: unrounded'
    if [ "$yarn" = ds ]; then
        fields='rope_yarn: true, rope_theta: 10000, yarn_factor: 40, yarn_original_seq: 4096, yarn_beta_fast: 32, yarn_beta_slow: 1, yarn_mscale: 1, yarn_mscale_all_dim: 1'
    fi
    if grep -q '^  attn: {' "$T/plan.yaml"; then
        sed -i "s/^  attn: {/  attn: {$fields, /" "$T/plan.yaml"
    else
        sed -i "s/^  position: rope\$/&\n  attn: {$fields}/" "$T/plan.yaml"
    fi
fi
if [ -n "$qknorm" ]; then
    if grep -q '^  attn: {' "$T/plan.yaml"; then
        sed -i "s/^  attn: {/  attn: {qk_norm: true, /" "$T/plan.yaml"
    else
        sed -i "s/^  position: rope\$/&\n  attn: {qk_norm: true}/" "$T/plan.yaml"
    fi
fi
if [ -n "$normeps" ]; then sed -i "s/^  arch: .*/&\n  norm_eps: $normeps/" "$T/plan.yaml"; fi
if [ -n "$rc" ]; then sed -i "s/recompute: none/recompute: $rc/" "$T/plan.yaml"; fi
if [ -n "$rcm" ]; then sed -i "s/recompute: $rc,/recompute: $rc, recompute_modules: \"$rcm\",/" "$T/plan.yaml"; fi
if [ -n "$hidden" ]; then sed -i "s/^  hidden: .*/  hidden: $hidden/" "$T/plan.yaml"; fi
if [ -n "$headdim" ]; then sed -i "s/^  heads: .*/&\n  head_dim: $headdim/" "$T/plan.yaml"; fi
if [ -n "$act" ]; then sed -i "s/^  activation: [a-z_]*\$/  activation: $act/" "$T/plan.yaml"; fi
if [ -n "$prec" ]; then sed -i "s/precision: fp32/precision: $prec/" "$T/plan.yaml"; fi
if [ -n "$zero" ]; then sed -i "s/dist_opt: $distopt,/dist_opt: $distopt, zero: $zero,/" "$T/plan.yaml"; fi
if [ -n "$hsdp" ]; then sed -i "s/dist_opt: $distopt,/dist_opt: $distopt, hsdp: $hsdp,/" "$T/plan.yaml"; fi
if [ -n "$layout" ]; then sed -i "s/dist_opt: $distopt,/dist_opt: $distopt, pipeline_layout: \"$layout\",/" "$T/plan.yaml"; fi
if [ -n "$par" ]; then sed -i "s/dist_opt: $distopt,/dist_opt: $distopt, $par,/" "$T/plan.yaml"; fi
if [ -n "$hwfile" ]; then sed -i -e "/^hw: /r $hwfile" -e "/^hw: /d" "$T/plan.yaml"; fi
if [ -n "$lrc" ]; then echo "layer_recompute: $lrc" >> "$T/plan.yaml"; fi
if [ -n "$trace" ]; then set -- "$@" --trace "$T/trace.json"; fi
if [ -n "$seed" ]; then set -- "$@" --seed "$seed"; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
start=$(date +%s)
if [ "$launch" = np ]; then
    timeout 60 "$megaplan" exec --np "$np" "$T/plan.yaml" --format json "$@" >"$T/json" 2>"$T/err"
elif [ "$launch" = direct ]; then
    timeout 60 "$megaplan" exec "$T/plan.yaml" --format json "$@" >"$T/json" 2>"$T/err"
else
    timeout 60 mpirun --oversubscribe -np "$np" "$megaplan" exec "$T/plan.yaml" \
        --format json "$@" >"$T/json" 2>"$T/err"
fi
rc=$?
# --format json: the JSON alone on stdout, the report on stderr
cat "$T/err" "$T/json" >"$T/out"
secs=$(( $(date +%s) - start ))
cat "$T/out"
echo "mpi_case.sh: exit $rc after ${secs}s"
if [ -n "$want" ] && ! grep -Eq -- "$want" "$T/out"; then fail "output lacks /$want/"; fi
if [ -n "$want2" ] && ! grep -Eq -- "$want2" "$T/out"; then fail "output lacks /$want2/"; fi
if [ -n "$trace" ]; then
    python3 - "$T/trace.json" "$np" "$m" <<'PY' || fail "measured trace incomplete"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
np_, m = int(sys.argv[2]), int(sys.argv[3])
names = {(e["pid"], e["name"]) for e in ev if e.get("ph") == "X"}
# "F mb.chunk": any chunk (dualpipe's second half of the micro-batches runs in chunk 1)
ops = {(p, n.rsplit(".", 1)[0]) for p, n in names}
for r in range(np_):
    for mb in range(m):
        for k in "FB":
            assert (r, "%s %d" % (k, mb)) in ops, (r, k, mb)
    assert (r, "optimizer") in names, r
PY
fi
case $expect in
ok)
    [ $rc -eq 0 ] || fail "expected success"
    grep -q '^{"ok": true, ' "$T/json" || fail "no JSON line with ok: true on stdout"
    [ "$(wc -l <"$T/json")" -eq 1 ] || fail "stdout holds more than the JSON line"
    ;;
mismatch)
    [ $rc -eq 1 ] || fail "expected exit 1 (mismatch)"
    grep -Eq 'mismatch: tensor [^ ]+ differs on rank [0-9]+' "$T/out" ||
        fail "the mismatch does not name tensor and rank"
    grep -q '^{"ok": false, ' "$T/json" || fail "no JSON line with ok: false on stdout"
    [ "$(wc -l <"$T/json")" -eq 1 ] || fail "stdout holds more than the JSON line"
    ;;
input)
    [ $rc -eq 2 ] || fail "expected exit 2 (bad input)"
    ;;
killed)
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "expected a non-zero exit before the timeout"
    [ $secs -le 20 ] || fail "took ${secs}s to notice the dead rank"
    grep -Eq 'exited on signal 9|rank died|killed' "$T/out" || fail "no message about the dead rank"
    ;;
stalled)
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "expected a non-zero exit before the timeout"
    [ $secs -le 30 ] || fail "took ${secs}s to give up on the stopped rank"
    grep -Eq 'rank [0-9]+: [a-z -]+ (over|from rank [0-9]+ of) the [a-z x]+ group \([0-9]+ ranks\) waited [0-9.]+ s, longer than the timeout' "$T/out" ||
        fail "no line naming the rank and the operation that waited"
    ;;
*) fail "unknown expectation $expect" ;;
esac
echo "mpi_case.sh: PASS"
