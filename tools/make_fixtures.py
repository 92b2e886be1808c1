#!/usr/bin/env python3
"""make_fixtures.py — reference values for megaplan's executor, from PyTorch.

Each fixture is one training step of a tiny model computed by the model code
below, written from the architectures' definitions (GPT-2, LLaMA, Megatron's
pre-LN BERT, T5 1.0, DeepSeek-V3's latent attention, mixture of experts and
multi-token prediction as Megatron-Core runs it)
and not from megaplan's C: the weights, the data, the
logits, the loss, every gradient and every weight after one AdamW step. The
C side (src/exec/fixture.c, `megaplan exec --test-fixture`) loads the weights
and the data into exec's model, runs the step under any partition and
compares every tensor with these (docs/exec.md, "PyTorch fixtures").

    python3 tools/make_fixtures.py [OUTDIR [NAME...]]  # default tests/data/fixtures, all

Needs PyTorch (CPU is enough; see tests/data/fixtures/README.md for the
versions that made the committed files). Deterministic: a fixed seed, fp32,
single-threaded.

File format (little-endian): b"MPFX0001", u32 tensor count, then per tensor
u16 name length, name (ASCII), u8 dtype (0 float32, 1 int32), u8 ndim,
u32 dims[ndim], the data row-major. Names: "config" (int32, CONFIG_FIELDS, then
MLA_MOE_FIELDS for a model with latent attention, experts or MTP modules,
ROUTE_FIELDS for one with DeepSeek-V3's routing or MTP modules, MTP_FIELDS for
one with MTP modules, OSS_FIELDS for GPT-OSS's blocks, ROPE_FIELDS for a model
with its own rotary angles, and DSYARN_FIELDS, after all of those, for DeepSeek's
YaRN),
"adam" (float32: lr, beta1, beta2, eps, weight decay), "tokens"/"targets"
(int32 [sequences, seq]; T5 also "dec_tokens"), "logits" [sequences, seq, V],
"loss" [1], and "param:N", "grad:N", "after:N" for each of megaplan's tensors N
in megaplan's layout (y = x W: W is [in, out]; QKV columns [Q | K | V] by
head; SwiGLU's fc1 [gate | up]; embeddings and the LM head [V, h]; latent
attention's kv_down [c_kv | k_rope], kv_up by head [k_nope | v], q_up by head
[q_nope | q_rope]; an MoE block's experts stacked by rows, each fc1 [gate | up];
an MTP module's eh_proj [2h, h] on [embedding | hidden], its block's tensors
named as a block's under mtp.layers.k.).
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

CONFIG_FIELDS = ["arch", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
                 "sequences", "tied", "rmsnorm", "swiglu", "rope", "no_bias",
                 "enc_layers", "dec_seq"]
MLA_MOE_FIELDS = ["q_lora", "kv_lora", "rope_dim", "nope_dim", "v_dim", "experts", "top_k",
                  "expert_ffn", "first_dense", "shared_ffn", "router_sigmoid"]
# DeepSeek-V3's routing, written after MLA_MOE_FIELDS by the models that have it
ROUTE_FIELDS = ["route_groups", "route_group_top_k", "route_scale_milli"]
# the multi-token-prediction modules, written after ROUTE_FIELDS by the models
# that have them (mtp_loss_scale times 1000)
MTP_FIELDS = ["mtp_layers", "mtp_scale_milli"]
# GPT-OSS's parts, written after MTP_FIELDS by the models that have them:
# window (0: none), full attention every n-th block, sinks, the clamped
# SwiGLU's limit times 1000, the experts' and router's biases
OSS_FIELDS = ["window", "window_skip_freq", "sinks", "glu_limit_milli", "expert_bias"]
# The rotary angles, written after OSS_FIELDS by the models that set them: the
# base, YaRN's factor times 1000 (0: no YaRN), its original context, its betas
# times 1000 and whether its ramp bounds are unrounded (HF's truncate false)
ROPE_FIELDS = ["rope_theta", "yarn_factor_milli", "yarn_original_seq", "yarn_beta_fast_milli",
               "yarn_beta_slow_milli", "yarn_unrounded"]
# DeepSeek's YaRN variant, after ROPE_FIELDS: rope_scaling's mscale and
# mscale_all_dim times 1000 (0: absent)
DSYARN_FIELDS = ["yarn_mscale_milli", "yarn_mscale_all_dim_milli"]
# Qwen3's attention, after DSYARN_FIELDS: a head width of its own (0: hidden /
# heads), and the RMSNorm of each query and key head before the rotation
HEAD_FIELDS = ["own_head_dim", "qk_norm"]
ARCH = {"gpt": 0, "llama": 1, "bert": 2, "t5": 3}
ADAM = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-4, wd=0.1)


# ---------------------------------------------------------------- the models

def layernorm(x, w, b, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def get_mscale(factor, mscale=1.0):
    """YaRN's 0.1 mscale ln(factor) + 1 (HF's get_mscale; 1 for factor <= 1)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def softmax_mscale(cfg):
    """DeepSeek's factor on the softmax scale (HF's DeepseekV3Attention:
    get_mscale(factor, mscale_all_dim) squared when mscale_all_dim is given)."""
    mscale_all_dim = cfg.get("yarn_mscale_all_dim_milli", 0) / 1000.0
    if not (cfg.get("yarn_factor_milli") and mscale_all_dim):
        return 1.0
    return get_mscale(cfg["yarn_factor_milli"] / 1000.0, mscale_all_dim) ** 2


def yarn_parameters(cfg, dim):
    """YaRN's inverse frequencies and attention factor, as HF transformers'
    _compute_yarn_parameters (modeling_rope_utils.py) computes them, in its
    float32: the pairs whose frequency makes fewer than beta_slow turns over
    the original context are interpolated (divided by factor), those with more
    than beta_fast extrapolated (kept), a linear ramp between; the attention
    factor 0.1 ln(factor) + 1 (get_mscale), or with DeepSeek's mscale and
    mscale_all_dim both given get_mscale(factor, mscale) / get_mscale(factor,
    mscale_all_dim)."""
    base, factor = float(cfg["rope_theta"] or 10000), cfg["yarn_factor_milli"] / 1000.0
    orig = cfg["yarn_original_seq"]
    beta_fast = cfg["yarn_beta_fast_milli"] / 1000.0
    beta_slow = cfg["yarn_beta_slow_milli"] / 1000.0
    truncate = not cfg.get("yarn_unrounded")
    mscale = cfg.get("yarn_mscale_milli", 0) / 1000.0
    mscale_all_dim = cfg.get("yarn_mscale_all_dim_milli", 0) / 1000.0
    if mscale and mscale_all_dim:
        attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    else:
        attention_factor = get_mscale(factor)

    def correction_dim(rotations):
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, attention_factor


def check_yarn_against_hf(cfg, dim):
    """Where transformers is installed, its own _compute_yarn_parameters must
    give yarn_parameters' numbers (the fixture is made from HF's formula)."""
    try:
        from transformers import PretrainedConfig
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except ImportError:
        return False
    theta = float(cfg["rope_theta"] or 10000)
    hf = PretrainedConfig(hidden_size=cfg["hidden"], num_attention_heads=cfg["heads"],
                          head_dim=dim, max_position_embeddings=131072, rope_theta=theta)
    hf.rope_parameters = {"rope_type": "yarn", "rope_theta": theta,
                          "factor": cfg["yarn_factor_milli"] / 1000.0,
                          "original_max_position_embeddings": cfg["yarn_original_seq"],
                          "beta_fast": cfg["yarn_beta_fast_milli"] / 1000.0,
                          "beta_slow": cfg["yarn_beta_slow_milli"] / 1000.0,
                          "truncate": not cfg.get("yarn_unrounded")}
    if cfg.get("yarn_mscale_all_dim_milli"):  # DeepSeek's keys
        hf.rope_parameters["mscale"] = cfg.get("yarn_mscale_milli", 0) / 1000.0
        hf.rope_parameters["mscale_all_dim"] = cfg["yarn_mscale_all_dim_milli"] / 1000.0
    inv_hf, factor_hf = ROPE_INIT_FUNCTIONS["yarn"](hf, "cpu")
    inv, factor = yarn_parameters(cfg, dim)
    assert torch.equal(inv_hf.to(torch.float32), inv), (inv_hf, inv)
    assert abs(factor_hf - factor) < 1e-12, (factor_hf, factor)
    return True


def rope(x, pos, base=10000.0, yarn=None):
    """Rotary embedding, rotate-half layout (LLaMA): x [B, heads, S, hd].
    yarn: the model's config when its angles are YaRN's; then, as HF's
    GptOssRotaryEmbedding: float32 frequencies times the positions, cos and
    sin times the attention factor, the halves turned as _apply_rotary_emb."""
    hd = x.shape[-1]
    if yarn is not None:
        inv, attention_factor = yarn_parameters(yarn, hd)
        ang = pos.to(torch.float32)[:, None] * inv[None, :]    # [S, hd/2]
        cos = (ang.cos() * attention_factor).to(x.dtype)
        sin = (ang.sin() * attention_factor).to(x.dtype)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]         # [S, hd/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def attention(q, k, v, causal, bias=None, scale=True, scale_mul=1.0):
    """q [B, a, Sq, hd], k/v [B, g, Sk, hd]; query head i reads kv head i // (a/g).
    scale_mul: a factor on 1/sqrt(hd) (DeepSeek's YaRN), taken as HF's
    DeepseekV3Attention takes its scaling: one number hd^-0.5 * mscale^2."""
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, 1)
    v = v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2)
    if scale and scale_mul != 1.0:
        s = s * (q.shape[-1] ** -0.5 * scale_mul)
    elif scale:
        s = s / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    if causal:
        Sq, Sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


def heads(x, n):
    B, S, _ = x.shape
    return x.view(B, S, n, -1).transpose(1, 2)


def merge(x):
    B, a, S, hd = x.shape
    return x.transpose(1, 2).reshape(B, S, a * hd)


def mla_attention(cfg, L, y, pos, norm_eps=1e-5):
    """DeepSeek-V2/V3's multi-head latent attention (DeepSeek-V2 paper §2.1):
    queries through a low-rank latent (RMSNorm between the projections) or
    straight from y; keys and values from one latent c_kv (RMSNorm, then an
    up-projection giving each head [k_nope | v]); a rotary key k_rope
    projected from y beside c_kv and shared by every head; each query head's
    last rope_dim columns turned too; scores scaled by 1/sqrt(nope + rope).
    With DeepSeek's YaRN (yarn_factor_milli) the rope columns turn by YaRN's
    angles over rope_dim (HF's DeepseekV3RotaryEmbedding: yarn_parameters, cos
    and sin times its attention factor) and the scale is multiplied by
    softmax_mscale (HF's DeepseekV3Attention)."""
    a, dn, dr = cfg["heads"], cfg["nope_dim"], cfg["rope_dim"]
    yarn = cfg if cfg.get("yarn_factor_milli") else None
    if cfg["q_lora"]:
        q = rmsnorm(y @ L("q_down_w"), L("q_norm_w"), norm_eps) @ L("q_up_w")
    else:
        q = y @ L("q_w")
    q = heads(q, a)                                              # [B, a, S, dn+dr]
    q = torch.cat([q[..., :dn], rope(q[..., dn:], pos, yarn=yarn)], -1)
    ckv = y @ L("kv_down_w")                                     # [B, S, rkv+dr]
    c, kr = ckv[..., :cfg["kv_lora"]], ckv[..., cfg["kv_lora"]:]
    kv = heads(rmsnorm(c, L("kv_norm_w"), norm_eps) @ L("kv_up_w"), a)  # [B, a, S, dn+dv]
    kr = rope(kr[:, None], pos, yarn=yarn).expand(-1, a, -1, -1)  # [B, a, S, dr]
    k = torch.cat([kv[..., :dn], kr], -1)
    return merge(attention(q, k, kv[..., dn:], causal=True,
                           scale_mul=softmax_mscale(cfg)))       # [B, S, a*dv]


def oss_attention(q, k, v, window, sinks):
    """GPT-OSS's attention as HF transformers' modeling_gpt_oss runs it
    (eager_attention_forward): scores times 1/sqrt(hd) plus the causal mask,
    banded to the `window` keys ending at the query (the sliding-window
    mask keeps key j for query t when t - window < j) in windowed blocks;
    each head's sink logit appended as one more column, the row's maximum
    taken out, softmax, the sink's column dropped: it joins the denominator
    and takes no value. q [B, a, S, hd], k/v [B, g, S, hd]."""
    a, g = q.shape[1], k.shape[1]
    k = k.repeat_interleave(a // g, 1)
    v = v.repeat_interleave(a // g, 1)
    S = q.shape[2]
    t = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    keep = j <= t
    if window:
        keep = keep & (t - j < window)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~keep, float("-inf"))
    sink = sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, S, 1)
    logits = torch.cat([scores, sink], -1)
    logits = logits - logits.max(-1, keepdim=True).values
    probs = logits.softmax(-1)[..., :-1]
    return probs @ v


def oss_window(cfg, layer):
    """Block `layer`'s window: 0 in every window_skip_freq-th block (HF's
    layer_types alternating sliding_attention and full_attention)."""
    f = cfg.get("window_skip_freq", 0)
    if not cfg.get("window") or (f and (layer + 1) % f == 0):
        return 0
    return cfg["window"]


def oss_experts(cfg, L, x):
    """GPT-OSS's MoE FFN as HF's GptOssTopKRouter and GptOssExperts define
    it: router logits with their bias, the top_k logits softmaxed (the
    others weigh 0), each chosen expert's gate|up projection with its bias,
    gate clamped above at limit, up to [-limit, limit], (up + 1) * gate *
    sigmoid(1.702 gate), the down projection with its bias."""
    limit = cfg["glu_limit_milli"] / 1000.0
    logits = x @ L("router_w") + L("router_b")
    top, idx = logits.topk(cfg["top_k"], -1)
    wts = top.softmax(-1)
    out = torch.zeros_like(x)
    for e in range(cfg["experts"]):
        we = (wts * (idx == e)).sum(-1, keepdim=True)
        gate = (x @ L("exp%d_gate_w" % e) + L("exp%d_gate_b" % e)).clamp(max=limit)
        up = (x @ L("exp%d_up_w" % e) + L("exp%d_up_b" % e)).clamp(min=-limit, max=limit)
        glu = gate * torch.sigmoid(1.702 * gate)
        out = out + we * (((up + 1) * glu) @ L("exp%d_down_w" % e) + L("exp%d_down_b" % e))
    return out


def route(cfg, scores, bias):
    """DeepSeek-V3's choice, as HF transformers' DeepseekV3TopkRouter makes it
    (get_topk_indices): the scores plus the expert bias e_score_correction_bias
    for the choice only; with n_group groups each group ranked by the sum of
    its two best biased scores, the topk_group best groups kept (the others'
    scores set to 0), then the top_k of what is left. Returns the indices."""
    sel = scores if bias is None else scores + bias
    G = cfg.get("route_groups", 0)
    if G:
        T, E = sel.shape
        gs = sel.view(T, G, E // G).topk(2, dim=-1)[0].sum(-1)           # [T, G]
        gidx = gs.topk(cfg["route_group_top_k"], dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
        smask = gmask.unsqueeze(-1).expand(T, G, E // G).reshape(T, E)
        plain = sel.topk(cfg["top_k"], -1)[1]
        idx = sel.masked_fill(~smask.bool(), 0.0).topk(cfg["top_k"], -1)[1]
        # HF masks the other groups with 0, Megatron with -inf: the same choice
        # here (they differ only where a kept biased score is below zero)
        meg = sel.masked_fill(~smask.bool(), float("-inf")).topk(cfg["top_k"], -1)[1]
        assert bool((meg.sort(-1)[0] == idx.sort(-1)[0]).all())
        ROUTE_STATS["group_changed"] += int((plain.sort(-1)[0] != idx.sort(-1)[0]).any(-1).sum())
    else:
        idx = sel.topk(cfg["top_k"], -1)[1]
    if bias is not None:
        plain = scores.topk(cfg["top_k"], -1)[1]
        ROUTE_STATS["bias_changed"] += int((plain.sort(-1)[0] != idx.sort(-1)[0]).any(-1).sum())
    return idx


ROUTE_STATS = {"group_changed": 0, "bias_changed": 0}


def moe_ffn(cfg, L, y, layer=None):
    """A DeepSeek-style MoE FFN: router scores (sigmoid per expert, or softmax
    over them), the top_k best per token (route(): group-limited and with the
    expert bias when the model has them), their scores renormalised to sum
    to one (times routed_scaling_factor), the weighted sum of the chosen experts' SwiGLU outputs (no
    capacity limit) plus the shared experts' SwiGLU as one MLP."""
    B, S, h = y.shape
    x = y.reshape(B * S, h)
    if cfg.get("glu_limit_milli"):
        return oss_experts(cfg, L, x).reshape(B, S, h)
    logits = x @ L("router_w")
    scores = logits.sigmoid() if cfg["router_sigmoid"] else logits.softmax(-1)
    idx = route(cfg, scores, cfg.get("route_bias", {}).get(layer))
    top = scores.gather(1, idx)
    wts = top / top.sum(-1, keepdim=True)
    if cfg.get("route_scale_milli"):
        wts = wts * (cfg["route_scale_milli"] / 1000.0)
    out = torch.zeros_like(x)
    for e in range(cfg["experts"]):
        chosen = (idx == e)                                      # [T, k]
        we = (wts * chosen).sum(-1, keepdim=True)                # 0 where not chosen
        ye = F.silu(x @ L("exp%d_gate_w" % e)) * (x @ L("exp%d_up_w" % e)) @ L("exp%d_down_w" % e)
        out = out + we * ye
    if cfg["shared_ffn"]:
        out = out + (F.silu(x @ L("shr_gate_w")) * (x @ L("shr_up_w"))) @ L("shr_down_w")
    return out.reshape(B, S, h)


def block(cfg, L, x, pos, moe, layer=None):
    """One pre-norm block: attention (latent attention where the model has
    it), then the MLP or the mixture of experts; L names its tensors."""
    a, g = cfg["heads"], cfg["kv_heads"]
    norm = (lambda x, w, b: rmsnorm(x, w, 1e-5)) if cfg["rmsnorm"] else layernorm
    lin = lambda x, w, b: x @ w + (b if b is not None else 0)  # noqa: E731
    y = norm(x, L("ln1_w"), L("ln1_b"))
    if cfg.get("kv_lora"):
        att = mla_attention(cfg, L, y, pos)
    else:
        q, k, v = (heads(lin(y, L(n + "_w"), L(n + "_b")), c)
                   for n, c in (("q", a), ("k", g), ("v", g)))
        if cfg.get("qk_norm"):  # Qwen3Attention: q_norm / k_norm over each head, then RoPE
            q, k = rmsnorm(q, L("q_norm_w"), 1e-5), rmsnorm(k, L("k_norm_w"), 1e-5)
        if cfg["rope"]:
            base = float(cfg.get("rope_theta", 10000.0))
            yarn = cfg if cfg.get("yarn_factor_milli") else None
            q, k = rope(q, pos, base, yarn), rope(k, pos, base, yarn)
        if cfg.get("sinks"):
            att = merge(oss_attention(q, k, v, oss_window(cfg, layer), L("sinks")))
        else:
            att = merge(attention(q, k, v, causal=cfg["arch"] != "bert"))
    x = x + lin(att, L("o_w"), L("o_b"))
    y = norm(x, L("ln2_w"), L("ln2_b"))
    if moe:
        return x + moe_ffn(cfg, L, y, layer)
    if cfg["swiglu"]:
        m = F.silu(y @ L("gate_w")) * (y @ L("up_w"))
    else:
        m = F.gelu(lin(y, L("fc1_w"), L("fc1_b")), approximate="tanh")
    return x + lin(m, L("fc2_w"), L("fc2_b"))


def decoder_only(cfg, P, tokens):
    """GPT-2 / LLaMA / pre-LN BERT trunk: returns the final norm's output [B, S, h]."""
    B, S = tokens.shape
    norm = (lambda x, w, b: rmsnorm(x, w, 1e-5)) if cfg["rmsnorm"] else layernorm
    pos = torch.arange(S)
    x = P["wte"][tokens]
    if not cfg["rope"]:
        x = x + P["wpe"][pos]
    if cfg["arch"] == "bert":  # the second half of the sequence is segment B
        x = x + P["tte"][(pos >= S // 2).long()]
    for i in range(cfg["layers"]):
        L = lambda n: P.get("l%d.%s" % (i, n))  # noqa: E731
        x = block(cfg, L, x, pos, is_moe(cfg, i), i)
    return norm(x, P["lnf_w"], P.get("lnf_b"))


def roll_left(t):
    """Megatron's roll_tensor (multi_token_prediction.py, without CP): the
    sequence moved one position left, the vacated last position zeroed."""
    t = torch.roll(t, -1, dims=-1)
    t[..., -1] = 0
    return t


def mtp_loss(cfg, P, tokens, targets, hidden):
    """DeepSeek-V3's multi-token prediction (arXiv 2412.19437 section 2.2) as
    Megatron-Core's MultiTokenPredictionBlock and process_mtp_loss compute it:
    module k sees the tokens and the loss mask rolled left k+1 times, the
    embedding of its tokens (the shared one) RMS-normed, the previous hidden
    states (the main model's after its final norm, then module k-1's output)
    normed, torch.cat((embedding, hidden), -1) projected [2h -> h], one block
    of the model's last block's type, its own final norm (its output is the
    next module's hidden states), the shared head; its loss the masked
    cross-entropy over the mask's tokens, and the modules' losses averaged and
    times mtp_loss_scale (Megatron: mtp_loss_scaling_factor / mtp_num_layers)."""
    D = cfg["mtp_layers"]
    scale = cfg["mtp_scale_milli"] / 1000.0
    norm = (lambda x, w, b: rmsnorm(x, w, 1e-5)) if cfg["rmsnorm"] else layernorm
    head = P["wte"] if cfg["tied"] else P["head"]
    pos = torch.arange(tokens.shape[1])
    tok, tgt, mask = tokens, targets, torch.ones(tokens.shape)
    h, total = hidden, 0
    last = cfg["layers"] - 1
    for k in range(D):
        tok, tgt, mask = roll_left(tok), roll_left(tgt), roll_left(mask)
        M = lambda n: P.get("m%d.%s" % (k, n))  # noqa: E731
        e = P["wte"][tok]
        x = torch.cat([norm(e, M("enorm_w"), M("enorm_b")), norm(h, M("hnorm_w"), M("hnorm_b"))],
                      -1) @ M("eh_w")
        x = block(cfg, M, x, pos, is_moe(cfg, last), cfg["layers"] + k)
        h = norm(x, M("fnorm_w"), M("fnorm_b"))
        logits = h @ head.T
        n = tok.numel()
        ce = F.cross_entropy(logits.reshape(n, -1), tgt.reshape(n), reduction="none")
        total = total + scale / D * (ce * mask.reshape(n)).sum() / mask.sum()
    return total


def is_moe(cfg, i):
    return cfg.get("experts", 0) > 0 and i >= cfg["first_dense"]


def loss_gpt(cfg, P, tokens, targets):
    x = decoder_only(cfg, P, tokens)
    logits = x @ (P["wte"] if cfg["tied"] else P["head"]).T
    n = tokens.numel()
    loss = F.cross_entropy(logits.reshape(n, -1), targets.reshape(n), reduction="sum") / n
    if cfg.get("mtp_layers"):  # added to the main loss, as its gradient is in Megatron
        loss = loss + mtp_loss(cfg, P, tokens, targets, x)
    return logits, loss


def loss_bert(cfg, P, tokens, targets):
    """Megatron's BERT heads: masked LM (dense, GeLU, LayerNorm, the tied
    embedding plus a bias) on the tokens with a target, and the pooler (dense,
    tanh of position 0) with a two-way head whose label is the first token's
    parity. Both losses are summed and divided by all tokens of the batch."""
    x = decoder_only(cfg, P, tokens)
    t = layernorm(F.gelu(x @ P["mlm_w"] + P["mlm_b"], approximate="tanh"),
                  P["mlm_ln_w"], P["mlm_ln_b"])
    logits = t @ (P["wte"] if cfg["tied"] else P["head"]).T + P["lm_bias"]
    n = tokens.numel()
    mlm = F.cross_entropy(logits.reshape(n, -1), targets.reshape(n), ignore_index=-1,
                          reduction="sum")
    pooled = torch.tanh(x[:, 0] @ P["pool_w"] + P["pool_b"])
    nsp = F.cross_entropy(pooled @ P["nsp_w"] + P["nsp_b"], tokens[:, 0] % 2, reduction="sum")
    return logits, (mlm + nsp) / n


def t5_bucket(rel, bidirectional, buckets=32, max_distance=128):
    """T5's relative position bucket of key - query (Raffel et al. 2020, as in
    the released code): half the buckets exact, the rest logarithmic."""
    ret = torch.zeros_like(rel)
    n = -rel
    if bidirectional:
        buckets //= 2
        ret += (n < 0).long() * buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    exact = buckets // 2
    large = exact + (torch.log(n.float().clamp(min=1) / exact)
                     / math.log(max_distance / exact) * (buckets - exact)).long()
    large = large.clamp(max=buckets - 1)
    return ret + torch.where(n < exact, n, large)


def t5_bias(table, Sq, Sk, bidirectional):
    rel = torch.arange(Sk)[None, :] - torch.arange(Sq)[:, None]
    return table[t5_bucket(rel, bidirectional)].permute(2, 0, 1)[None]  # [1, a, Sq, Sk]


def loss_t5(cfg, P, tokens, dec_tokens, targets):
    """T5 as Megatron-LM builds it with megaplan's T5 preset (T5 1.0's parts):
    pre-norm RMSNorm (scale only, eps 1e-5 as the other models), ReLU MLP, no
    biases, dot-product attention scaled by 1/sqrt(head dim) (Megatron's; the
    released T5 folds the scale into its initialisation) with a relative
    position bias per stack (32 buckets, max distance 128, T5's bucketing)
    added to the scaled scores of every self-attention, the decoder's
    cross-attention over the encoder's final output, the embedding (shared by
    both stacks) as the output layer when tied."""
    a = cfg["heads"]
    norm = lambda x, w: rmsnorm(x, w, 1e-5)  # noqa: E731
    x = P["wte"][tokens]
    eb = t5_bias(P["enc_rel"], tokens.shape[1], tokens.shape[1], True)
    for i in range(cfg["enc_layers"]):
        L = lambda n: P["e%d.%s" % (i, n)]  # noqa: E731
        y = norm(x, L("ln1_w"))
        q, k, v = (heads(y @ L(n + "_w"), a) for n in "qkv")
        x = x + merge(attention(q, k, v, False, eb)) @ L("o_w")
        y = norm(x, L("ln2_w"))
        x = x + F.relu(y @ L("fc1_w")) @ L("fc2_w")
    enc = norm(x, P["enc_lnf_w"])
    x = P["wte"][dec_tokens]
    Sd = dec_tokens.shape[1]
    db = t5_bias(P["dec_rel"], Sd, Sd, False)
    for i in range(cfg["layers"] - cfg["enc_layers"]):
        L = lambda n: P["d%d.%s" % (i, n)]  # noqa: E731
        y = norm(x, L("ln1_w"))
        q, k, v = (heads(y @ L(n + "_w"), a) for n in "qkv")
        x = x + merge(attention(q, k, v, True, db)) @ L("o_w")
        y = norm(x, L("lnx_w"))
        q = heads(y @ L("xq_w"), a)
        k, v = heads(enc @ L("xk_w"), a), heads(enc @ L("xv_w"), a)
        x = x + merge(attention(q, k, v, False, None)) @ L("xo_w")
        y = norm(x, L("ln2_w"))
        x = x + F.relu(y @ L("fc1_w")) @ L("fc2_w")
    x = norm(x, P["lnf_w"])
    logits = x @ (P["wte"] if cfg["tied"] else P["head"]).T
    n = dec_tokens.numel()
    return logits, F.cross_entropy(logits.reshape(n, -1), targets.reshape(n),
                                   reduction="sum") / n


# ------------------------------------------------- megaplan's tensor names

def megaplan_tensors(cfg, P):
    """(megaplan name, function of the PyTorch parameters giving that tensor
    in megaplan's layout): the packing of Q|K|V and gate|up, the [1, n] rows
    of vectors."""
    row = lambda k: (lambda: P[k][None, :])  # noqa: E731
    mat = lambda k: (lambda: P[k])  # noqa: E731
    cat = lambda *ks: (lambda: torch.cat([P[k] for k in ks], -1))  # noqa: E731
    catrow = lambda *ks: (lambda: torch.cat([P[k] for k in ks], -1)[None, :])  # noqa: E731
    out = []
    if cfg["arch"] == "t5":
        out.append(("embedding.wte", mat("wte")))
        out.append(("encoder.rel_bias", mat("enc_rel")))
        out.append(("decoder.rel_bias", mat("dec_rel")))
        for i in range(cfg["layers"]):
            dec = i >= cfg["enc_layers"]
            j = i - cfg["enc_layers"] if dec else i
            k = ("d%d." if dec else "e%d.") % j
            nm = ("decoder" if dec else "encoder") + ".layers.%d." % j
            out += [(nm + "ln1.weight", row(k + "ln1_w")),
                    (nm + "qkv.weight", cat(k + "q_w", k + "k_w", k + "v_w")),
                    (nm + "proj.weight", mat(k + "o_w"))]
            if dec:
                out += [(nm + "lnx.weight", row(k + "lnx_w")),
                        (nm + "xq.weight", mat(k + "xq_w")),
                        (nm + "xkv.weight", cat(k + "xk_w", k + "xv_w")),
                        (nm + "xo.weight", mat(k + "xo_w"))]
            out += [(nm + "ln2.weight", row(k + "ln2_w")),
                    (nm + "fc1.weight", mat(k + "fc1_w")),
                    (nm + "fc2.weight", mat(k + "fc2_w"))]
            if i == cfg["enc_layers"] - 1:
                out.append(("encoder.final_ln.weight", row("enc_lnf_w")))
        out.append(("final_ln.weight", row("lnf_w")))
        return out
    def block_tensors(k, nm, moe):
        out = []
        out.append((nm + "ln1.weight", row(k + "ln1_w")))
        if not cfg["rmsnorm"]:
            out.append((nm + "ln1.bias", row(k + "ln1_b")))
        if cfg.get("kv_lora"):
            if cfg["q_lora"]:
                out += [(nm + "q_down.weight", mat(k + "q_down_w")),
                        (nm + "q_norm.weight", row(k + "q_norm_w")),
                        (nm + "q_up.weight", mat(k + "q_up_w"))]
            else:
                out.append((nm + "q.weight", mat(k + "q_w")))
            out += [(nm + "kv_down.weight", mat(k + "kv_down_w")),
                    (nm + "kv_norm.weight", row(k + "kv_norm_w")),
                    (nm + "kv_up.weight", mat(k + "kv_up_w"))]
        else:
            out.append((nm + "qkv.weight", cat(k + "q_w", k + "k_w", k + "v_w")))
            if bias:
                out.append((nm + "qkv.bias", catrow(k + "q_b", k + "k_b", k + "v_b")))
            if cfg.get("qk_norm"):
                out += [(nm + "q_norm.weight", row(k + "q_norm_w")),
                        (nm + "k_norm.weight", row(k + "k_norm_w"))]
            if cfg.get("sinks"):
                out.append((nm + "sinks", row(k + "sinks")))
        out.append((nm + "proj.weight", mat(k + "o_w")))
        if bias:
            out.append((nm + "proj.bias", row(k + "o_b")))
        out.append((nm + "ln2.weight", row(k + "ln2_w")))
        if not cfg["rmsnorm"]:
            out.append((nm + "ln2.bias", row(k + "ln2_b")))
        if moe:
            E = range(cfg["experts"])
            out += [(nm + "router.weight", mat(k + "router_w")),
                    (nm + "experts.fc1.weight", (lambda k=k, E=E: torch.cat(
                        [torch.cat([P[k + "exp%d_gate_w" % e], P[k + "exp%d_up_w" % e]], -1)
                         for e in E], 0))),
                    (nm + "experts.fc2.weight", (lambda k=k, E=E: torch.cat(
                        [P[k + "exp%d_down_w" % e] for e in E], 0)))]
            if cfg["shared_ffn"]:
                out += [(nm + "shared.fc1.weight", cat(k + "shr_gate_w", k + "shr_up_w")),
                        (nm + "shared.fc2.weight", mat(k + "shr_down_w"))]
            if cfg.get("expert_bias"):  # GPT-OSS: stacked by expert, fc1's [gate | up]
                out += [(nm + "router.bias", row(k + "router_b")),
                        (nm + "experts.fc1.bias", (lambda k=k, E=E: torch.stack(
                            [torch.cat([P[k + "exp%d_gate_b" % e], P[k + "exp%d_up_b" % e]])
                             for e in E]))),
                        (nm + "experts.fc2.bias", (lambda k=k, E=E: torch.stack(
                            [P[k + "exp%d_down_b" % e] for e in E])))]
            return out
        if cfg["swiglu"]:
            out.append((nm + "fc1.weight", cat(k + "gate_w", k + "up_w")))
        else:
            out.append((nm + "fc1.weight", mat(k + "fc1_w")))
            if bias:
                out.append((nm + "fc1.bias", row(k + "fc1_b")))
        out.append((nm + "fc2.weight", mat(k + "fc2_w")))
        if bias:
            out.append((nm + "fc2.bias", row(k + "fc2_b")))
        return out

    out.append(("embedding.wte", mat("wte")))
    if not cfg["rope"]:
        out.append(("embedding.wpe", mat("wpe")))
    if cfg["arch"] == "bert":
        out.append(("embedding.tokentype", mat("tte")))
    bias = not cfg["no_bias"]
    for i in range(cfg["layers"]):
        out += block_tensors("l%d." % i, "layers.%d." % i, is_moe(cfg, i))
    out.append(("final_ln.weight", row("lnf_w")))
    if not cfg["rmsnorm"]:
        out.append(("final_ln.bias", row("lnf_b")))
    if cfg["arch"] == "bert":
        out += [("mlm.dense.weight", mat("mlm_w")), ("mlm.dense.bias", row("mlm_b")),
                ("mlm.ln.weight", row("mlm_ln_w")), ("mlm.ln.bias", row("mlm_ln_b")),
                ("lm_head.bias", row("lm_bias")), ("pooler.weight", mat("pool_w")),
                ("pooler.bias", row("pool_b")), ("nsp.weight", mat("nsp_w")),
                ("nsp.bias", row("nsp_b"))]
    if not cfg["tied"]:
        out.append(("lm_head.weight", mat("head")))
    for j in range(cfg.get("mtp_layers", 0)):  # the MTP modules (src/exec/mtp.c's names)
        k, nm = "m%d." % j, "mtp.layers.%d." % j
        for n in ("enorm", "hnorm"):
            out.append((nm + n + ".weight", row(k + n + "_w")))
            if not cfg["rmsnorm"]:
                out.append((nm + n + ".bias", row(k + n + "_b")))
        out.append((nm + "eh_proj.weight", mat(k + "eh_w")))
        out += block_tensors(k, nm, is_moe(cfg, cfg["layers"] - 1))
        out.append((nm + "final_ln.weight", row(k + "fnorm_w")))
        if not cfg["rmsnorm"]:
            out.append((nm + "final_ln.bias", row(k + "fnorm_b")))
    return out


# ---------------------------------------------------------------- weights

def init_params(cfg, gen):
    """Random weights large enough that every nonlinearity works off its
    linear part (GeLU's cubic term, softmax, the norms), so that an error in
    any of them shows."""
    h, a, g, f, V = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["vocab"]
    hd = h // a if cfg["arch"] != "t5" else cfg["head_dim"]
    hd = cfg.get("own_head_dim") or hd  # Qwen3: heads x head_dim need not be hidden
    P = {}

    def w(name, *shape, std=0.25):
        P[name] = torch.randn(*shape, generator=gen) * std

    def gamma(name, n):
        P[name] = 1 + 0.2 * torch.randn(n, generator=gen)

    def init_block(k, moe):
        bias = not cfg["no_bias"]
        gamma(k + "ln1_w", h)
        gamma(k + "ln2_w", h)
        if not cfg["rmsnorm"]:
            w(k + "ln1_b", h, std=0.1)
            w(k + "ln2_b", h, std=0.1)
        if cfg.get("kv_lora"):
            dqk, dv = cfg["nope_dim"] + cfg["rope_dim"], cfg["v_dim"]
            rq, rkv = cfg["q_lora"], cfg["kv_lora"]
            if rq:
                w(k + "q_down_w", h, rq, std=0.3)
                gamma(k + "q_norm_w", rq)
                w(k + "q_up_w", rq, a * dqk, std=0.3)
            else:
                w(k + "q_w", h, a * dqk, std=0.3)
            w(k + "kv_down_w", h, rkv + cfg["rope_dim"], std=0.3)
            gamma(k + "kv_norm_w", rkv)
            w(k + "kv_up_w", rkv, a * (cfg["nope_dim"] + dv), std=0.3)
            w(k + "o_w", a * dv, h)
        else:
            for n, c in (("q", a), ("k", g), ("v", g)):
                w(k + n + "_w", h, c * hd, std=0.3)
                if bias:
                    w(k + n + "_b", c * hd, std=0.1)
            if cfg.get("qk_norm"):
                gamma(k + "q_norm_w", hd)
                gamma(k + "k_norm_w", hd)
            w(k + "o_w", a * hd, h)
            if cfg.get("sinks"):
                w(k + "sinks", a, std=1.0)
        if bias:
            w(k + "o_b", h, std=0.1)
        if moe:
            w(k + "router_w", h, cfg["experts"], std=0.5)
            fe, fs = cfg["expert_ffn"], cfg["shared_ffn"]
            for e in range(cfg["experts"]):
                w(k + "exp%d_gate_w" % e, h, fe, std=0.3)
                w(k + "exp%d_up_w" % e, h, fe, std=0.3)
                w(k + "exp%d_down_w" % e, fe, h, std=0.15)
            if fs:
                w(k + "shr_gate_w", h, fs, std=0.3)
                w(k + "shr_up_w", h, fs, std=0.3)
                w(k + "shr_down_w", fs, h, std=0.15)
            if cfg.get("expert_bias"):
                w(k + "router_b", cfg["experts"], std=0.1)
                for e in range(cfg["experts"]):
                    w(k + "exp%d_gate_b" % e, fe, std=0.1)
                    w(k + "exp%d_up_b" % e, fe, std=0.1)
                    w(k + "exp%d_down_b" % e, h, std=0.1)
            return
        if cfg["swiglu"]:
            w(k + "gate_w", h, f, std=0.3)
            w(k + "up_w", h, f, std=0.3)
        else:
            w(k + "fc1_w", h, f, std=0.3)
            if bias:
                w(k + "fc1_b", f, std=0.1)
        w(k + "fc2_w", f, h, std=0.15)
        if bias:
            w(k + "fc2_b", h, std=0.1)

    w("wte", V, h, std=0.5)
    if cfg["arch"] == "t5":
        w("enc_rel", 32, a, std=0.5)
        w("dec_rel", 32, a, std=0.5)
        for i in range(cfg["layers"]):
            dec = i >= cfg["enc_layers"]
            k = ("d%d." % (i - cfg["enc_layers"])) if dec else "e%d." % i
            gamma(k + "ln1_w", h)
            for n in "qkv":
                w(k + n + "_w", h, a * hd, std=0.3)
            w(k + "o_w", a * hd, h)
            if dec:
                gamma(k + "lnx_w", h)
                for n in ("xq", "xk", "xv"):
                    w(k + n + "_w", h, a * hd, std=0.3)
                w(k + "xo_w", a * hd, h)
            gamma(k + "ln2_w", h)
            w(k + "fc1_w", h, f)
            w(k + "fc2_w", f, h, std=0.15)
        gamma("enc_lnf_w", h)
        gamma("lnf_w", h)
    else:
        bias = not cfg["no_bias"]
        if not cfg["rope"]:
            w("wpe", cfg["seq"], h, std=0.5)
        if cfg["arch"] == "bert":
            w("tte", 2, h, std=0.5)
        for i in range(cfg["layers"]):
            init_block("l%d." % i, is_moe(cfg, i))
        gamma("lnf_w", h)
        if not cfg["rmsnorm"]:
            w("lnf_b", h, std=0.1)
        if cfg["arch"] == "bert":
            w("mlm_w", h, h)
            w("mlm_b", h, std=0.1)
            gamma("mlm_ln_w", h)
            w("mlm_ln_b", h, std=0.1)
            w("lm_bias", V, std=0.1)
            w("pool_w", h, h)
            w("pool_b", h, std=0.1)
            w("nsp_w", h, 2, std=0.5)
            w("nsp_b", 2, std=0.1)
    if not cfg["tied"]:
        w("head", V, h, std=0.3)
    for j in range(cfg.get("mtp_layers", 0)):  # the MTP modules, drawn after all the rest
        k = "m%d." % j
        for n in ("enorm", "hnorm"):
            gamma(k + n + "_w", h)
            if not cfg["rmsnorm"]:
                w(k + n + "_b", h, std=0.1)
        w(k + "eh_w", 2 * h, h, std=0.3)
        init_block(k, is_moe(cfg, cfg["layers"] - 1))
        gamma(k + "fnorm_w", h)
        if not cfg["rmsnorm"]:
            w(k + "fnorm_b", h, std=0.1)
    return {k: v.contiguous().requires_grad_(True) for k, v in P.items()}


# ---------------------------------------------------------------- one step

def make_data(cfg, gen):
    n, S, V = cfg["sequences"], cfg["seq"], cfg["vocab"]
    tokens = torch.randint(0, V, (n, S), generator=gen)
    data = {"tokens": tokens}
    if cfg["arch"] == "t5":
        Sd = cfg["dec_seq"]
        targets = torch.randint(0, V, (n, Sd), generator=gen)
        # teacher forcing: the decoder reads the targets shifted right, token 0 first
        data["dec_tokens"] = torch.cat([torch.zeros(n, 1, dtype=torch.long), targets[:, :-1]], 1)
        data["targets"] = targets
    else:
        targets = torch.randint(0, V, (n, S), generator=gen)
        if cfg["arch"] == "bert":  # about 15% of the tokens are predicted
            keep = torch.rand(n, S, generator=gen) < 0.15
            keep[:, 1] = True  # at least one per sequence
            targets = torch.where(keep, targets, torch.full_like(targets, -1))
        data["targets"] = targets
    return data


def run_step(cfg, P, data):
    if cfg["arch"] == "t5":
        logits, loss = loss_t5(cfg, P, data["tokens"], data["dec_tokens"], data["targets"])
    elif cfg["arch"] == "bert":
        logits, loss = loss_bert(cfg, P, data["tokens"], data["targets"])
    else:
        logits, loss = loss_gpt(cfg, P, data["tokens"], data["targets"])
    loss.backward()
    # AdamW, decoupled weight decay on matrices and embeddings only
    decay = [p for p in P.values() if p.dim() >= 2]
    rest = [p for p in P.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAM["wd"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]),
                            eps=ADAM["eps"], foreach=False)
    opt.step()
    return logits.detach(), loss.detach()


# ---------------------------------------------------------------- writing

def write_fixture(path, entries):
    with open(path, "wb") as fp:
        fp.write(b"MPFX0001")
        fp.write(struct.pack("<I", len(entries)))
        for name, t in entries:
            t = t.detach().contiguous()
            dt = 1 if t.dtype in (torch.int32, torch.int64) else 0
            t = t.to(torch.int32 if dt else torch.float32)
            nb = name.encode("ascii")
            fp.write(struct.pack("<H", len(nb)) + nb)
            fp.write(struct.pack("<BB", dt, t.dim()))
            fp.write(struct.pack("<%dI" % t.dim(), *t.shape))
            fp.write(t.numpy().astype("<i4" if dt else "<f4").tobytes())


def make(cfg, seed):
    gen = torch.Generator().manual_seed(seed)
    P = init_params(cfg, gen)
    data = make_data(cfg, gen)
    if cfg.get("bias_std"):  # an expert bias already away from its zero start
        cfg["route_bias"] = {i: cfg["bias_std"] * torch.randn(cfg["experts"], generator=gen)
                             for i in range(cfg["layers"]) if is_moe(cfg, i)}
    ROUTE_STATS.update(group_changed=0, bias_changed=0)
    names = megaplan_tensors(cfg, P)
    with torch.no_grad():
        before = [(n, f().clone()) for n, f in names]
    logits, loss = run_step(cfg, P, data)
    # gradients in megaplan's layout: the same packing applied to the .grad
    G = {k: v.grad for k, v in P.items()}
    grads = megaplan_tensors(cfg, G)
    with torch.no_grad():
        after = [(n, f().clone()) for n, f in names]
    fields = CONFIG_FIELDS[1:]
    if cfg.get("kv_lora") or cfg.get("experts") or cfg.get("mtp_layers"):
        # dense models' files keep the base fields
        fields = fields + MLA_MOE_FIELDS
    if cfg.get("route_groups") or cfg.get("route_scale_milli") or cfg.get("mtp_layers"):
        fields = fields + ROUTE_FIELDS
    if cfg.get("mtp_layers") or cfg.get("sinks"):
        if not (cfg.get("route_groups") or cfg.get("route_scale_milli") or cfg.get("mtp_layers")):
            fields = fields + ROUTE_FIELDS
        fields = fields + MTP_FIELDS
    if cfg.get("sinks"):
        fields = fields + OSS_FIELDS
    if cfg.get("own_head_dim") or cfg.get("qk_norm"):  # Qwen3's heads: every group before
        fields = (CONFIG_FIELDS[1:] + MLA_MOE_FIELDS + ROUTE_FIELDS + MTP_FIELDS + OSS_FIELDS
                  + ROPE_FIELDS + DSYARN_FIELDS + HEAD_FIELDS)
    elif cfg.get("yarn_mscale_all_dim_milli"):  # DeepSeek's YaRN: every group before it
        fields = (CONFIG_FIELDS[1:] + MLA_MOE_FIELDS + ROUTE_FIELDS + MTP_FIELDS + OSS_FIELDS
                  + ROPE_FIELDS + DSYARN_FIELDS)
    elif cfg.get("rope_theta"):  # after the GPT-OSS fields (the one model that has them)
        assert cfg.get("sinks"), "ROPE_FIELDS follow OSS_FIELDS in the file"
        fields = fields + ROPE_FIELDS
    conf = torch.tensor([ARCH[cfg["arch"]]] + [int(cfg.get(k, 0)) for k in fields],
                        dtype=torch.int32)
    adam = torch.tensor([ADAM[k] for k in ("lr", "beta1", "beta2", "eps", "wd")])
    entries = [("config", conf), ("adam", adam)]
    entries += [(k, v) for k, v in data.items()]
    entries += [("logits", logits), ("loss", loss.reshape(1))]
    entries += [("param:" + n, t) for n, t in before]
    entries += [("grad:" + n, f()) for n, f in grads]
    entries += [("after:" + n, t) for n, t in after]
    entries += [("route_bias:layers.%d" % i, b) for i, b in sorted(cfg.get("route_bias", {}).items())]
    return entries


def base(arch, **kw):
    cfg = dict(arch=arch, layers=2, hidden=32, heads=4, kv_heads=4, ffn=128, vocab=64, seq=16,
               sequences=4, tied=1, rmsnorm=0, swiglu=0, rope=0, no_bias=0, enc_layers=0,
               dec_seq=0)
    cfg.update(kw)
    return cfg


# The models of tests/exec/plans/tiny*.yaml.in (tiny-t5.yaml.in for T5).
MODELS = {
    "gpt": base("gpt"),
    "llama": base("llama", kv_heads=2, ffn=96, tied=0, rmsnorm=1, swiglu=1, rope=1, no_bias=1),
    "bert": base("bert"),
    "t5": base("t5", layers=4, enc_layers=2, dec_seq=8, ffn=64, rmsnorm=1, no_bias=1,
               head_dim=8),
    # tiny-mla.yaml.in (QLORA=16) and tiny-deepseek.yaml.in (its MoE blocks too)
    "mla": base("llama", ffn=64, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=1, q_lora=16,
                kv_lora=12, rope_dim=4, nope_dim=8, v_dim=6),
    "deepseek": base("llama", ffn=64, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=1,
                     q_lora=16, kv_lora=12, rope_dim=4, nope_dim=8, v_dim=6, experts=4,
                     top_k=2, expert_ffn=32, first_dense=1, shared_ffn=32, router_sigmoid=1),
    # tiny-deepseek.yaml.in with DeepSeek-V3's routing (EXPERTS=16 TOPK=4 GROUPS=4
    # GTOPK=2 RSCALE=2.5): 16 experts in 4 groups, 2 groups a token, top-4 (a
    # group ranked by its top 4/2 = 2, as HF's fixed two), weights times 2.5,
    # an expert bias of std 0.1; made so that the groups and the bias each
    # change some tokens' choice (checked when it is written)
    "dsgroups": base("llama", ffn=64, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=1,
                     q_lora=16, kv_lora=12, rope_dim=4, nope_dim=8, v_dim=6, experts=16,
                     top_k=4, expert_ffn=32, first_dense=1, shared_ffn=32, router_sigmoid=1,
                     route_groups=4, route_group_top_k=2, route_scale_milli=2500,
                     bias_std=0.1),
    # tiny-llama.yaml.in with MTP=2 (two multi-token-prediction modules,
    # Megatron's default loss scale 0.1) and tiny-deepseek.yaml.in with MTP=1
    # (the module's block an MoE block with latent attention, as the last block)
    "mtp": base("llama", kv_heads=2, ffn=96, tied=0, rmsnorm=1, swiglu=1, rope=1, no_bias=1,
                mtp_layers=2, mtp_scale_milli=100),
    "dsmtp": base("llama", ffn=64, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=1,
                  q_lora=16, kv_lora=12, rope_dim=4, nope_dim=8, v_dim=6, experts=4,
                  top_k=2, expert_ffn=32, first_dense=1, shared_ffn=32, router_sigmoid=1,
                  mtp_layers=1, mtp_scale_milli=100),
    # (last: each model's seed is 20260 + its place here)
    # tiny-oss.yaml.in: GPT-OSS's blocks as HF transformers' modeling_gpt_oss
    # defines them (biases in Q, K, V and the output projection, a sink per
    # head, block 0 windowed to 5 keys, block 1 full; 4 experts, top-2 of the
    # router's biased logits softmaxed, biases in each expert, the clamped
    # SwiGLU with limit 0.5), plain rotary angles (yarn below adds YaRN's)
    "oss": base("llama", kv_heads=2, ffn=32, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=0,
                experts=4, top_k=2, expert_ffn=32, first_dense=0, shared_ffn=0,
                router_sigmoid=0, window=5, window_skip_freq=2, sinks=1, glu_limit_milli=500,
                expert_bias=1),
    # tiny-oss.yaml.in with YARN=1: the same blocks with GPT-OSS's rotary
    # angles as released (config.json's rope_theta 150000 and rope_scaling:
    # YaRN with factor 32 over the original 4096 positions, betas 32 and 1,
    # truncate false), as HF's _compute_yarn_parameters and
    # GptOssRotaryEmbedding compute them
    "yarn": base("llama", kv_heads=2, ffn=32, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=0,
                 experts=4, top_k=2, expert_ffn=32, first_dense=0, shared_ffn=0,
                 router_sigmoid=0, window=5, window_skip_freq=2, sinks=1, glu_limit_milli=500,
                 expert_bias=1, rope_theta=150000, yarn_factor_milli=32000,
                 yarn_original_seq=4096, yarn_beta_fast_milli=32000, yarn_beta_slow_milli=1000,
                 yarn_unrounded=1),
    # tiny-mla.yaml.in with YARN=ds: mla's model with DeepSeek-V3's rotary angles
    # as its config.json gives them (rope_theta 10000, written 0; rope_scaling:
    # YaRN with factor 40 over 4096 positions, betas 32 and 1, truncate's default,
    # mscale and mscale_all_dim 1): the 4 rope columns' frequencies as
    # _compute_yarn_parameters, cos and sin times g(1)/g(1) = 1, the softmax scale
    # times get_mscale(40, 1)^2 as DeepseekV3Attention
    "dsyarn": base("llama", ffn=64, tied=1, rmsnorm=1, swiglu=1, rope=1, no_bias=1, q_lora=16,
                   kv_lora=12, rope_dim=4, nope_dim=8, v_dim=6, rope_theta=0,
                   yarn_factor_milli=40000, yarn_original_seq=4096, yarn_beta_fast_milli=32000,
                   yarn_beta_slow_milli=1000, yarn_unrounded=0, yarn_mscale_milli=1000,
                   yarn_mscale_all_dim_milli=1000),
    # tiny-llama.yaml.in with HEADDIM=12 QKNORM=1: Qwen3's attention as HF
    # transformers' Qwen3Attention defines it: 4 query heads on 2 key/value
    # heads of 12 columns each, so Q is 48 wide and K, V 24 on a hidden size
    # of 32 (the output projection [48, 32]), q_norm and k_norm (RMSNorms of
    # 12 with their own scales) on every head before the rotation, scores
    # scaled by 1/sqrt(12)
    "qwen": base("llama", kv_heads=2, ffn=96, tied=0, rmsnorm=1, swiglu=1, rope=1, no_bias=1,
                 own_head_dim=12, qk_norm=1),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    only = sys.argv[2:]
    for i, (name, cfg) in enumerate(MODELS.items()):
        if only and name not in only:
            continue
        if cfg.get("yarn_factor_milli"):
            hd = cfg.get("rope_dim") or cfg["hidden"] // cfg["heads"]
            print("%s: YaRN's frequencies %s HF transformers' own" % (
                name, "equal" if check_yarn_against_hf(cfg, hd) else
                "not checked against (transformers not installed)"))
        entries = make(cfg, 20260 + i)
        if cfg.get("route_groups"):  # the fixture would pass without the groups or the bias
            assert ROUTE_STATS["group_changed"] > 0 and ROUTE_STATS["bias_changed"] > 0, ROUTE_STATS
            print("%s: the groups change %d tokens' choice, the bias %d" % (
                name, ROUTE_STATS["group_changed"], ROUTE_STATS["bias_changed"]))
        path = os.path.join(out, name + ".bin")
        write_fixture(path, entries)
        loss = dict(entries)["loss"].item()
        print("%s: %d tensors, loss %.6f, %d bytes" % (path, len(entries), loss,
                                                        os.path.getsize(path)))


if __name__ == "__main__":
    main()
