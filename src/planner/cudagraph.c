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
 * moe_preprocess saves nothing here.
 *
 * make_graphed_callables captures each callable's backward as a graph of
 * its own (torch.autograd.grad over the part's outputs inside
 * torch.cuda.graph(bwd_graph); Graphed.backward replays it:
 * transformer_engine/pytorch/graph.py), so a graphed part's backward, as
 * many kernels as the cost model counts for it (compute.c), is one launch
 * too. The counts come from compute.c, which times the block with them:
 * the parts and the eager pass cannot disagree. */
#include "planner/cost_internal.h"

/* one graph launch instead of a part's n kernels */
static double graphed(double n)
{
    return n > 1.0 ? 1.0 : n;
}

double mp_block_launches(const mp_config *c, const mp_layer_launches *l, bool bwd)
{
    uint32_t s = c->parallel.cuda_graph_scope;
    double attn = bwd ? l->attn.bwd : l->attn.fwd, mlp = bwd ? l->mlp.bwd : l->mlp.fwd;
    double router = bwd ? l->router.bwd : l->router.fwd, moe = bwd ? l->moe.bwd : l->moe.fwd;
    double rest = bwd ? l->rest.bwd : l->rest.fwd;
    if (s & (1u << MP_CGS_ATTN))
        attn = graphed(attn);
    if (s & (1u << MP_CGS_MLP))
        mlp = graphed(mlp);
    if (s & (1u << MP_CGS_MOE))
        moe = graphed(moe);
    else if (s & (1u << MP_CGS_MOE_ROUTER))
        moe = moe - router + graphed(router);
    return attn + mlp + moe + rest;
}
