/* cudagraph.c — what CUDA graphs save the host (docs/cost-model.md, "CUDA
 * graphs").
 *
 * Eager PyTorch dispatches every kernel from the host; when a pass has more
 * kernels than its GPU time can cover, the host's dispatch sets the pace
 * (mp_host_bound). Transformer Engine's make_graphed_callables, which
 * Megatron-Core uses for --cuda-graph-impl transformer_engine, captures the
 * parts of each layer that --cuda-graph-scope names once and replays each as
 * one graph launch, forward and backward (megatron/training/arguments.py):
 * attn = TransformerLayer._forward_attention; mlp = _forward_mlp of a dense
 * layer; moe = _forward_mlp of an MoE layer; moe_router = _forward_mlp up
 * to the router, with the shared experts when they are not overlapped with
 * the expert-parallel communication; moe_preprocess = MoELayer.preprocess,
 * captured with the router. The cost model counts no launch of its own for
 * the dispatcher's preprocessing (the token counts per expert), so
 * moe_preprocess saves nothing here. */
#include "planner/cost_internal.h"

static double saved(double launches)
{
    return launches > 1.0 ? launches - 1.0 : 0.0;
}

double mp_cuda_graph_saved_launches(const mp_config *c, const mp_layer_launches *l, bool moe_block)
{
    uint32_t s = c->parallel.cuda_graph_scope;
    double n = 0.0;
    if (s & (1u << MP_CGS_ATTN))
        n += saved(l->attn);
    if (!moe_block && (s & (1u << MP_CGS_MLP)))
        n += saved(l->mlp);
    if (moe_block && (s & (1u << MP_CGS_MOE)))
        n += saved(l->moe);
    else if (moe_block && (s & (1u << MP_CGS_MOE_ROUTER)))
        n += saved(l->router);
    return n;
}
