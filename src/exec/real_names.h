/* real_names.h — every executor name that exists once per precision: the
 * one list of them. The source writes the plain name (mp_gpt_init); each line
 * below makes it mp_gpt_init_f32 in the 32-bit compile and mp_gpt_init_f64
 * in the 64-bit one (MP_REAL_NAME, real.h). Callers that need both
 * precisions (exec.c, memory.c, backend_cpu.c, tests) write the suffixed
 * names. A symbol from a backtrace: drop _f32 / _f64 and grep the rest.
 *
 * To add a function or type to the precision-variant code: write it with its
 * plain name in a file of exec_real_sources (src/exec/meson.build), declare it
 * in kernels_decl.h, t5_decl.h or an internal header, and add one line here,
 * under its file. Static functions need no line (each compile has its own). */
#ifndef MP_EXEC_REAL_NAMES_H
#define MP_EXEC_REAL_NAMES_H

/* types (kernels_decl.h) */
#define mp_gpt MP_REAL_NAME(mp_gpt)
#define mp_acts MP_REAL_NAME(mp_acts)
#define mp_trainer MP_REAL_NAME(mp_trainer)
#define mp_attn_oss MP_REAL_NAME(mp_attn_oss)

/* attention_sink.c */
#define mp_attn_softmax_oss MP_REAL_NAME(mp_attn_softmax_oss)
#define mp_attn_softmax_oss_backward MP_REAL_NAME(mp_attn_softmax_oss_backward)
#define mp_swiglu_clamped_forward MP_REAL_NAME(mp_swiglu_clamped_forward)
#define mp_swiglu_clamped_backward MP_REAL_NAME(mp_swiglu_clamped_backward)

/* moe_oss.c */
#define mp_moe_oss_bias_grads MP_REAL_NAME(mp_moe_oss_bias_grads)
#define mp_moe_oss_fc1_bias MP_REAL_NAME(mp_moe_oss_fc1_bias)
#define mp_moe_oss_fc2_bias MP_REAL_NAME(mp_moe_oss_fc2_bias)
#define mp_moe_oss_router_bias MP_REAL_NAME(mp_moe_oss_router_bias)
#define mp_moe_oss_router_bias_grad MP_REAL_NAME(mp_moe_oss_router_bias_grad)

/* layers.c */
#define mp_add MP_REAL_NAME(mp_add)
#define mp_attn_softmax MP_REAL_NAME(mp_attn_softmax)
#define mp_attn_softmax_backward MP_REAL_NAME(mp_attn_softmax_backward)
#define mp_bias_add MP_REAL_NAME(mp_bias_add)
#define mp_bias_grad MP_REAL_NAME(mp_bias_grad)
#define mp_ce_backward MP_REAL_NAME(mp_ce_backward)
#define mp_ce_exp_sum MP_REAL_NAME(mp_ce_exp_sum)
#define mp_ce_loss MP_REAL_NAME(mp_ce_loss)
#define mp_ce_max MP_REAL_NAME(mp_ce_max)
#define mp_gather_rows MP_REAL_NAME(mp_gather_rows)
#define mp_gelu_backward MP_REAL_NAME(mp_gelu_backward)
#define mp_gelu_forward MP_REAL_NAME(mp_gelu_forward)
#define mp_gelu_erf_backward MP_REAL_NAME(mp_gelu_erf_backward)
#define mp_gelu_erf_forward MP_REAL_NAME(mp_gelu_erf_forward)
#define mp_geglu_backward MP_REAL_NAME(mp_geglu_backward)
#define mp_geglu_forward MP_REAL_NAME(mp_geglu_forward)
#define mp_mlp_act_backward MP_REAL_NAME(mp_mlp_act_backward)
#define mp_mlp_act_forward MP_REAL_NAME(mp_mlp_act_forward)
#define mp_gelu_kind_forward MP_REAL_NAME(mp_gelu_kind_forward)
#define mp_gelu_kind_backward MP_REAL_NAME(mp_gelu_kind_backward)
#define mp_layernorm_backward MP_REAL_NAME(mp_layernorm_backward)
#define mp_layernorm_forward MP_REAL_NAME(mp_layernorm_forward)
#define mp_q MP_REAL_NAME(mp_q)
#define mp_quantize MP_REAL_NAME(mp_quantize)
#define mp_quantize_rows MP_REAL_NAME(mp_quantize_rows)
#define mp_rmsnorm_backward MP_REAL_NAME(mp_rmsnorm_backward)
#define mp_rmsnorm_forward MP_REAL_NAME(mp_rmsnorm_forward)
#define mp_rope MP_REAL_NAME(mp_rope)
#define mp_scatter_add_rows MP_REAL_NAME(mp_scatter_add_rows)
#define mp_sum_in_order MP_REAL_NAME(mp_sum_in_order)
#define mp_swiglu_backward MP_REAL_NAME(mp_swiglu_backward)
#define mp_swiglu_forward MP_REAL_NAME(mp_swiglu_forward)
#define mp_tanh_backward MP_REAL_NAME(mp_tanh_backward)
#define mp_tanh_forward MP_REAL_NAME(mp_tanh_forward)

/* attention.c */
#define mp_attention_backward MP_REAL_NAME(mp_attention_backward)
#define mp_attention_backward_dv MP_REAL_NAME(mp_attention_backward_dv)
#define mp_attention_backward_kv MP_REAL_NAME(mp_attention_backward_kv)
#define mp_attention_backward_oss MP_REAL_NAME(mp_attention_backward_oss)
#define mp_attention_forward MP_REAL_NAME(mp_attention_forward)
#define mp_attention_forward_dv MP_REAL_NAME(mp_attention_forward_dv)
#define mp_attention_forward_kv MP_REAL_NAME(mp_attention_forward_kv)
#define mp_attention_forward_oss MP_REAL_NAME(mp_attention_forward_oss)

/* model.c */
#define mp_gpt_backward MP_REAL_NAME(mp_gpt_backward)
#define mp_gpt_bytes MP_REAL_NAME(mp_gpt_bytes)
#define mp_gpt_forward MP_REAL_NAME(mp_gpt_forward)
#define mp_gpt_free MP_REAL_NAME(mp_gpt_free)
#define mp_gpt_init MP_REAL_NAME(mp_gpt_init)
#define mp_gpt_stage_input_count MP_REAL_NAME(mp_gpt_stage_input_count)
#define mp_gpt_stage_input_grad MP_REAL_NAME(mp_gpt_stage_input_grad)
#define mp_gpt_stage_output MP_REAL_NAME(mp_gpt_stage_output)
#define mp_gpt_stage_output_count MP_REAL_NAME(mp_gpt_stage_output_count)
#define mp_model_cross_entropy MP_REAL_NAME(mp_model_cross_entropy)
#define mp_model_dlogits MP_REAL_NAME(mp_model_dlogits)
#define mp_model_tp_gather MP_REAL_NAME(mp_model_tp_gather)
#define mp_model_tp_gather_rows MP_REAL_NAME(mp_model_tp_gather_rows)
#define mp_model_tp_reduce MP_REAL_NAME(mp_model_tp_reduce)
#define mp_model_tp_reduce_rows MP_REAL_NAME(mp_model_tp_reduce_rows)

/* block.c */
#define mp_model_block_backward MP_REAL_NAME(mp_model_block_backward)
#define mp_model_block_forward MP_REAL_NAME(mp_model_block_forward)
#define mp_model_norm_backward MP_REAL_NAME(mp_model_norm_backward)
#define mp_model_norm_backward_add MP_REAL_NAME(mp_model_norm_backward_add)
#define mp_model_norm_forward MP_REAL_NAME(mp_model_norm_forward)
#define mp_model_recompute_probs MP_REAL_NAME(mp_model_recompute_probs)
#define mp_model_rebuild MP_REAL_NAME(mp_model_rebuild)
#define mp_model_rebuild_scratch MP_REAL_NAME(mp_model_rebuild_scratch)
#define mp_model_plant MP_REAL_NAME(mp_model_plant)

/* cp_ring.c */
#define mp_model_cp_gather_kv MP_REAL_NAME(mp_model_cp_gather_kv)
#define mp_model_cp_reduce_dkv MP_REAL_NAME(mp_model_cp_reduce_dkv)

/* bert_heads.c */
#define mp_model_bert_head_backward MP_REAL_NAME(mp_model_bert_head_backward)
#define mp_model_nsp_forward MP_REAL_NAME(mp_model_nsp_forward)

/* t5.c */
#define mp_t5_alloc MP_REAL_NAME(mp_t5_alloc)
#define mp_t5_backward MP_REAL_NAME(mp_t5_backward)
#define mp_t5_forward MP_REAL_NAME(mp_t5_forward)
#define mp_t5_free MP_REAL_NAME(mp_t5_free)
#define mp_t5_reduce_grads MP_REAL_NAME(mp_t5_reduce_grads)
#define mp_t5_set_stack_groups MP_REAL_NAME(mp_t5_set_stack_groups)
#define mp_t5_stage_count MP_REAL_NAME(mp_t5_stage_count)
#define mp_t5_stage_input_grad MP_REAL_NAME(mp_t5_stage_input_grad)
#define mp_t5_stage_output MP_REAL_NAME(mp_t5_stage_output)

/* t5_block.c */
#define mp_t5_block_backward MP_REAL_NAME(mp_t5_block_backward)
#define mp_t5_block_forward MP_REAL_NAME(mp_t5_block_forward)
#define mp_t5_recompute_probs MP_REAL_NAME(mp_t5_recompute_probs)

/* t5_layers.c */
#define mp_relu_backward MP_REAL_NAME(mp_relu_backward)
#define mp_relu_forward MP_REAL_NAME(mp_relu_forward)
#define mp_t5_attention_backward MP_REAL_NAME(mp_t5_attention_backward)
#define mp_t5_attention_forward MP_REAL_NAME(mp_t5_attention_forward)
#define mp_t5_rel_bias_add MP_REAL_NAME(mp_t5_rel_bias_add)
#define mp_t5_rel_bias_grad MP_REAL_NAME(mp_t5_rel_bias_grad)

/* optimizer.c */
#define mp_adamw_update MP_REAL_NAME(mp_adamw_update)

/* step.c */
#define mp_trainer_free MP_REAL_NAME(mp_trainer_free)
#define mp_trainer_grads MP_REAL_NAME(mp_trainer_grads)
#define mp_trainer_grads_chunks MP_REAL_NAME(mp_trainer_grads_chunks)
#define mp_trainer_init MP_REAL_NAME(mp_trainer_init)
#define mp_trainer_set_pipeline MP_REAL_NAME(mp_trainer_set_pipeline)
#define mp_trainer_update MP_REAL_NAME(mp_trainer_update)

/* shard.c */
#define mp_shard_gather MP_REAL_NAME(mp_shard_gather)
#define mp_shard_parts_init MP_REAL_NAME(mp_shard_parts_init)
#define mp_shard_reduce MP_REAL_NAME(mp_shard_reduce)
#define mp_shard_update MP_REAL_NAME(mp_shard_update)

/* zero.c */
#define mp_trainer_set_zero MP_REAL_NAME(mp_trainer_set_zero)
#define mp_zero_gather_params MP_REAL_NAME(mp_zero_gather_params)
#define mp_zero_reduce_microbatch MP_REAL_NAME(mp_zero_reduce_microbatch)
#define mp_zero_reduce_replicas MP_REAL_NAME(mp_zero_reduce_replicas)
#define mp_zero_release_params MP_REAL_NAME(mp_zero_release_params)
#define mp_zero_unshard_grad MP_REAL_NAME(mp_zero_unshard_grad)
#define mp_zero_reshard_grad MP_REAL_NAME(mp_zero_reshard_grad)

/* mla.c */
#define mp_mla_backward MP_REAL_NAME(mp_mla_backward)
#define mp_mla_forward MP_REAL_NAME(mp_mla_forward)
#define mp_mla_rebuild_up MP_REAL_NAME(mp_mla_rebuild_up)
#define mp_mla_recompute_probs MP_REAL_NAME(mp_mla_recompute_probs)

/* mtp.c */
#define mp_mtp_add_hidden_grad MP_REAL_NAME(mp_mtp_add_hidden_grad)
#define mp_mtp_backward MP_REAL_NAME(mp_mtp_backward)
#define mp_mtp_forward MP_REAL_NAME(mp_mtp_forward)
#define mp_mtp_reals MP_REAL_NAME(mp_mtp_reals)

/* moe_ops.c */
#define mp_moe_bias_update MP_REAL_NAME(mp_moe_bias_update)
#define mp_moe_capacity MP_REAL_NAME(mp_moe_capacity)
#define mp_moe_combine MP_REAL_NAME(mp_moe_combine)
#define mp_moe_combine_backward MP_REAL_NAME(mp_moe_combine_backward)
#define mp_moe_count MP_REAL_NAME(mp_moe_count)
#define mp_moe_expert_order MP_REAL_NAME(mp_moe_expert_order)
#define mp_moe_gather MP_REAL_NAME(mp_moe_gather)
#define mp_moe_scatter MP_REAL_NAME(mp_moe_scatter)
#define mp_moe_scores MP_REAL_NAME(mp_moe_scores)
#define mp_moe_scores_backward MP_REAL_NAME(mp_moe_scores_backward)
#define mp_moe_send_order MP_REAL_NAME(mp_moe_send_order)
#define mp_moe_topk MP_REAL_NAME(mp_moe_topk)
#define mp_moe_weights_backward MP_REAL_NAME(mp_moe_weights_backward)

/* moe_layer.c */
#define mp_moe_backward MP_REAL_NAME(mp_moe_backward)
#define mp_moe_forward MP_REAL_NAME(mp_moe_forward)
#define mp_moe_rebuild MP_REAL_NAME(mp_moe_rebuild)
#define mp_moe_update_bias MP_REAL_NAME(mp_moe_update_bias)

#endif
