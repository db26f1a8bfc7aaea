"""The keys a recipe may set, by recipe kind and by the dataclass that declares them (generated; do not edit).

Written by ``python -m training.recipe_keys_generate`` from the installed dataclasses (the project's argument
classes, TRL's ``GRPOConfig`` / ``SFTConfig`` / ``ModelConfig`` and transformers' ``TrainingArguments``) so that
`spatial-train` reads them without importing TRL; ``tests/training/test_recipe_keys.py`` keeps it equal to them.
Each field has its ``help`` text and, when the dataclass gives a literal one, its ``default``.
"""

from typing import Any

# fmt: off
RECIPE_KEYS: dict[str, tuple[dict[str, Any], ...]] = {'grpo': ({'class': 'SpatialGRPOArguments',
           'module': 'training.config',
           'fields': ({'key': 'data_root', 'help': 'Storage root of the Parquet caches.', 'default': None},
                      {'key': 'dataset_table',
                       'help': 'Training table name.',
                       'default': 'spatialcore_train'},
                      {'key': 'prompt_format',
                       'help': 'spatialcore, spatialthinker or dge (follows the table by default).',
                       'default': None},
                      {'key': 'dataset_split', 'help': 'Split to train on.', 'default': 'train'},
                      {'key': 'max_train_samples', 'help': 'Use only the first N rows.', 'default': None},
                      {'key': 'include_task_types',
                       'help': 'Train only on these task types.',
                       'default': None},
                      {'key': 'allow_mixed_origins',
                       'help': 'Accept a table mixing sample-world and real rows (origin column).',
                       'default': False},
                      {'key': 'model_family', 'help': 'Box convention family (auto).', 'default': None},
                      {'key': 'reward_funcs',
                       'help': 'Reward names (registry or dotted path).',
                       'default': ['spatialcore_reward']},
                      {'key': 'reward_curriculum',
                       'help': 'SpatialCORE curriculum phase ends, e.g. 0.1 0.3.',
                       'default': None},
                      {'key': 'box_entropy_source',
                       'help': 'auto, generation, logprob_pass, selective_pass or none.',
                       'default': 'auto'},
                      {'key': 'task_scheduler',
                       'help': 'Task-adaptive sampling by task type.',
                       'default': False},
                      {'key': 'task_type_column',
                       'help': 'Column with the task type.',
                       'default': 'task_type'},
                      {'key': 'scheduler_floor', 'help': 'Minimum task weight.', 'default': 0.05},
                      {'key': 'scheduler_prior', 'help': 'Prior accuracy of a task type.', 'default': 0.35},
                      {'key': 'scheduler_prior_weight',
                       'help': 'Samples the prior is worth.',
                       'default': 2.0},
                      {'key': 'report_wandb_if_installed',
                       'help': 'Report to W&B when installed.',
                       'default': True})},
          {'class': 'GRPOConfig',
           'module': 'trl.trainer.grpo_config',
           'fields': ({'key': 'learning_rate',
                       'help': 'The initial learning rate for AdamW.',
                       'default': 1e-06},
                      {'key': 'remove_unused_columns',
                       'help': "Whether to only keep the column 'prompt' in the dataset. If you use a custom "
                               "reward function that requires any column other than 'prompts' and "
                               "'completions', you should keep this to `False`.",
                       'default': False},
                      {'key': 'model_init_kwargs',
                       'help': 'Keyword arguments for `transformers.AutoModelForCausalLM.from_pretrained`, '
                               'used when the `model` argument of the `GRPOTrainer` is provided as a string. '
                               'The `revision` value is also used when loading processing classes.',
                       'default': None},
                      {'key': 'trust_remote_code',
                       'help': 'Whether to allow loading models and tokenizers that ship custom Python code '
                               'from the Hub. Forwarded to `AutoModelForCausalLM.from_pretrained` and '
                               '`AutoProcessor.from_pretrained`. Also applied to reward-model and '
                               'reward-tokenizer loads.',
                       'default': False},
                      {'key': 'router_aux_loss_coef',
                       'help': 'Coefficient of the load-balancing auxiliary loss for Mixture-of-Experts '
                               '(MoE) models, added to the training loss with this weight. When not set, the '
                               'value declared by the model config is used. Set to `0.0` to disable it. '
                               'Fails when used with a non-MoE model.',
                       'default': None},
                      {'key': 'disable_dropout',
                       'help': 'Whether to disable dropout in the model. This is useful for training with a '
                               'reference model, as it prevents the model from generating different logprobs '
                               'for the same input.',
                       'default': False},
                      {'key': 'cast_lm_head_to_fp32',
                       'help': 'Whether to cast the language modeling head of the policy and reference '
                               'models to float32. As recommended by the '
                               '[ScaleRL](https://huggingface.co/papers/2510.13786) recipe. This flag is '
                               'only supported when the model has untied word embedding and language '
                               'modeling head layers i.e. `tie_word_embeddings` in the model config is '
                               'False.',
                       'default': False},
                      {'key': 'num_generations',
                       'help': 'Number of generations to sample. The effective batch size (num_processes * '
                               'per_device_batch_size * gradient_accumulation_steps) must be evenly '
                               'divisible by this value.',
                       'default': 8},
                      {'key': 'num_generations_eval',
                       'help': 'Number of generations to sample during evaluation. This allows using fewer '
                               'generations during evaluation to save computation. If `None`, uses the value '
                               'of `num_generations`.',
                       'default': None},
                      {'key': 'max_completion_length',
                       'help': 'Maximum length of the generated completion.',
                       'default': 512},
                      {'key': 'ds3_gather_for_generation',
                       'help': 'This setting applies to DeepSpeed ZeRO-3. If enabled, the policy model '
                               'weights are gathered for generation, improving generation speed. However, '
                               'disabling this option allows training models that exceed the VRAM capacity '
                               'of a single GPU, albeit at the cost of slower generation. Disabling this '
                               'option is not compatible with vLLM generation.',
                       'default': True},
                      {'key': 'shuffle_dataset',
                       'help': 'Whether to shuffle the training dataset.',
                       'default': True},
                      {'key': 'pad_to_multiple_of',
                       'help': 'If set, the prompts ids and completions ids will be padded to a multiple of '
                               "this value. `'auto'` pads to a multiple of 128 on Neuron (AWS Trainium), "
                               'which compiles once per input shape, and does not pad elsewhere.',
                       'default': 'auto'},
                      {'key': 'generation_batch_size',
                       'help': 'Batch size to use for generation. If `None`, it defaults to the effective '
                               'training batch size: `per_device_train_batch_size * num_processes * '
                               'steps_per_generation`.',
                       'default': None},
                      {'key': 'steps_per_generation',
                       'help': 'Number of steps per generation. If `None`, it defaults to '
                               '`gradient_accumulation_steps`.',
                       'default': None},
                      {'key': 'temperature',
                       'help': 'Temperature for sampling. The higher the temperature, the more random the '
                               'completions.',
                       'default': 1.0},
                      {'key': 'top_p',
                       'help': 'Float that controls the cumulative probability of the top tokens to '
                               'consider. Must be in (0, 1]. Set to 1.0 to consider all tokens.',
                       'default': 1.0},
                      {'key': 'top_k',
                       'help': 'Number of highest probability vocabulary tokens to keep for top-k-filtering. '
                               'If `0`, top-k-filtering is disabled and all tokens are considered.',
                       'default': 0},
                      {'key': 'min_p',
                       'help': 'Minimum token probability, which will be scaled by the probability of the '
                               'most likely token. It must be a value between 0.0 and 1.0. Typical values '
                               'are in the 0.01-0.2 range.',
                       'default': None},
                      {'key': 'generation_kwargs',
                       'help': 'Additional keyword arguments to pass to `GenerationConfig` (if using '
                               'transformers) or `SamplingParams` (if using vLLM) when sampling completions. '
                               'This can be used to further customize the generation behavior, such as '
                               'setting `suppress_tokens`, `num_beams`, etc. If it contains keys that '
                               'conflict with the other generation parameters (like `min_p`, `top_p`, etc.), '
                               'they will override them.',
                       'default': None},
                      {'key': 'chat_template_kwargs',
                       'help': 'Additional keyword arguments to pass to the `apply_chat_template` function '
                               'when generating completions.',
                       'default': None},
                      {'key': 'repetition_penalty',
                       'help': 'Float that penalizes new tokens based on whether they appear in the prompt '
                               'and the generated text so far. Values > 1.0 encourage the model to use new '
                               'tokens, while values < 1.0 encourage the model to repeat tokens.',
                       'default': 1.0},
                      {'key': 'cache_implementation',
                       'help': 'Implementation of the cache method for faster generation when use_vllm is '
                               'set to False.',
                       'default': None},
                      {'key': 'use_vllm',
                       'help': 'Whether to use vLLM for generating completions. If set to `True`, the '
                               'trainer will use vLLM for generation instead of the default '
                               'model.generate(). Requires `vllm` to be installed.',
                       'default': False},
                      {'key': 'vllm_mode',
                       'help': 'Mode to use for vLLM integration when `use_vllm` is set to `True`. Must be '
                               "one of `'server'` or `'colocate'`. `'server'`: The trainer will send "
                               'generation requests to a separate vLLM server. Make sure a vLLM server is '
                               "running (start with `vllm serve`). `'colocate'`: vLLM will run in the same "
                               'process and share the training GPUs. This avoids the need for a separate '
                               'server but may cause resource contention with training.',
                       'default': 'colocate'},
                      {'key': 'vllm_model_impl',
                       'help': 'Model implementation to use for vLLM. Must be one of `transformers` or '
                               '`vllm`. `transformers`: Use the `transformers` backend for model '
                               'implementation. `vllm`: Use the `vllm` library for model implementation.',
                       'default': 'vllm'},
                      {'key': 'vllm_enable_sleep_mode',
                       'help': 'Enable vLLM sleep mode to offload weights/cache during the optimizer step. '
                               'Keeps GPU memory usage low, but waking the engine adds host–device transfer '
                               'latency.',
                       'default': False},
                      {'key': 'vllm_structured_outputs_regex',
                       'help': 'Regex for vLLM structured outputs. If `None` (default), structured outputs '
                               'is disabled.',
                       'default': None},
                      {'key': 'vllm_server_base_url',
                       'help': "Base URL for the vLLM server (e.g., 'http://localhost:8000'). If provided, "
                               '`vllm_server_host` and `vllm_server_port` are ignored.',
                       'default': None},
                      {'key': 'vllm_server_host',
                       'help': 'Host of the vLLM server to connect to. Ignored if vllm_server_base_url is '
                               'provided.',
                       'default': '0.0.0.0'},
                      {'key': 'vllm_server_port',
                       'help': 'Port of the vLLM server to connect to. Ignored if vllm_server_base_url is '
                               'provided.',
                       'default': 8000},
                      {'key': 'vllm_server_timeout',
                       'help': 'Total timeout duration in seconds to wait for the vLLM server to be up. If '
                               'the server is not up after the timeout, a `ConnectionError` is raised.',
                       'default': 240.0},
                      {'key': 'vllm_group_port',
                       'help': 'Port number for the weight update group. This is used to communicate with '
                               'the vLLM server. Unless the port is occupied, there is no need to change it.',
                       'default': 51216},
                      {'key': 'vllm_gpu_memory_utilization',
                       'help': 'Control the GPU memory utilization for vLLM. This setting only applies when '
                               "`vllm_mode` is set to `'colocate'`. If you are using `vllm_mode='server'`, "
                               'this parameter must be passed separately when launching the vLLM server via '
                               'the `--vllm_gpu_memory_utilization` flag.',
                       'default': 0.3},
                      {'key': 'vllm_max_model_length',
                       'help': 'Context window for vLLM. Set it to at least the maximum prompt length in the '
                               'dataset plus `max_completion_length`; if omitted, it is inferred from the '
                               'model config.',
                       'default': None},
                      {'key': 'vllm_tensor_parallel_size',
                       'help': 'Control the tensor parallel size for vLLM. This setting only applies when '
                               "`vllm_mode` is set to `'colocate'`. If you are using `vllm_mode='server'`, "
                               'this parameter must be passed separately when launching the vLLM server via '
                               'the `--vllm_tensor_parallel_size` flag.',
                       'default': 1},
                      {'key': 'beta',
                       'help': 'KL coefficient. If `0.0` (default), the reference model is not loaded, '
                               'reducing memory usage and improving training speed. [DeepSeek-R1 '
                               'incentivizes reasoning in LLMs through reinforcement '
                               'learning](https://huggingface.co/papers/2501.12948) use a value of `0.001`.',
                       'default': 0.0},
                      {'key': 'num_iterations',
                       'help': 'Number of iterations per batch (denoted as μ in the algorithm).',
                       'default': 1},
                      {'key': 'epsilon', 'help': 'Epsilon value for clipping.', 'default': 0.2},
                      {'key': 'delta',
                       'help': 'Enables the upper clipping bound in two-sided GRPO loss when set to a float. '
                               'If `None` (default), standard GRPO clipping is used. Recommended to be '
                               'greater than `1 + ε` when enabled. This method is introduced in the '
                               '[INTELLECT-2 tech report](https://huggingface.co/papers/2505.07291).',
                       'default': None},
                      {'key': 'epsilon_high',
                       'help': 'Upper-bound epsilon value for clipping. If not specified, it defaults to the '
                               'same value as the lower-bound specified in argument `epsilon`. Paper DAPO '
                               "recommends `0.28`. When used with `loss_type='cispo'`, this corresponds to "
                               'the ε_max param specified in the [ScaleRL '
                               'paper](https://huggingface.co/papers/2510.13786) and the recommended value '
                               'is `5.0`.',
                       'default': None},
                      {'key': 'sapo_temperature_neg',
                       'help': 'Temperature for tokens with non-positive advantage scores used in the `sapo` '
                               'loss function. This parameter is introduced in the [Soft Adaptive Policy '
                               'Optimization paper](https://huggingface.co/papers/2511.20347).',
                       'default': 1.05},
                      {'key': 'sapo_temperature_pos',
                       'help': 'Temperature for tokens with positive advantage scores used in the `sapo` '
                               'loss function. This parameter is introduced in the [Soft Adaptive Policy '
                               'Optimization paper](https://huggingface.co/papers/2511.20347).',
                       'default': 1.0},
                      {'key': 'vespo_k_pos',
                       'help': 'k parameter for positive advantages, it is the power exponent in the VESPO '
                               'loss. Controls how aggressively we down-weight samples with low importance '
                               'weights (when the importance sampling ratio < 1).',
                       'default': 2.0},
                      {'key': 'vespo_lambda_pos',
                       'help': 'lambda parameter for positive advantages, it is the decay factor in the '
                               'VESPO loss. Controls how aggressively we down-weight samples with high '
                               'importance weights (when the importance sampling ratio > 1).',
                       'default': 3.0},
                      {'key': 'vespo_k_neg',
                       'help': 'k parameter for negative advantages, it is the power exponent in the VESPO '
                               'loss. Controls how aggressively we down-weight samples with low importance '
                               'weights (when the importance sampling ratio < 1).',
                       'default': 3.0},
                      {'key': 'vespo_lambda_neg',
                       'help': 'lambda parameter for negative advantages, it is the exponential decay factor '
                               'in the VESPO loss. Controls how aggressively we down-weight samples with '
                               'high importance weights (when the importance sampling ratio > 1).',
                       'default': 2.0},
                      {'key': 'importance_sampling_level',
                       'help': "Controls whether importance sampling ratios are computed at the `'token'` or "
                               "`'sequence'` level. `'token'` keeps the raw per-token log-probability ratios "
                               "(one weight per token). `'sequence'` averages the log-probability ratios "
                               'across valid tokens to produce a single ratio per sequence. The GSPO paper '
                               'shows that sequence-level sampling often yields more stable training and '
                               'better alignment with sequence-level rewards.',
                       'default': 'token'},
                      {'key': 'reward_weights',
                       'help': 'Weights for each reward function. Must match the number of reward functions. '
                               'If `None`, all rewards are weighted equally with weight `1.0`.',
                       'default': None},
                      {'key': 'multi_objective_aggregation',
                       'help': 'Method to aggregate multiple reward functions. Supported values are: '
                               "`'sum_then_normalize'` (default): First sums the weighted rewards from each "
                               'reward function, then applies reward scaling/normalization as specified by '
                               "`scale_rewards` (see `scale_rewards` for details). `'normalize_then_sum'`: "
                               'First normalizes/scales each reward function across generations (within each '
                               'group), then sums the normalized rewards using the specified weights. The '
                               'aggregated reward is then normalized at the batch level when forming '
                               'advantages. This is the suggested approach from the paper GDPO: Group '
                               'reward-Decoupled Normalization Policy Optimization for Multi-reward RL '
                               'Optimization.',
                       'default': 'sum_then_normalize'},
                      {'key': 'scale_rewards',
                       'help': 'Specifies the scaling strategy for rewards. Supported values are: `True` or '
                               "`group'` (default): rewards are scaled by the standard deviation within each "
                               "group, ensuring unit variance within a group. `'batch'`: rewards are scaled "
                               'by the standard deviation across the entire batch, as recommended in the PPO '
                               "Lite paper. `False` or `'none'`: no scaling is applied. The Dr. GRPO paper "
                               'recommends not scaling rewards, as scaling by the standard deviation '
                               'introduces a question-level difficulty bias.',
                       'default': 'group'},
                      {'key': 'loss_type',
                       'help': "Specifies the loss formulation to use. Supported values are 'grpo', "
                               "'dr_grpo', 'dapo', 'bnpo', 'cispo', 'sapo', 'luspo', and 'vespo'. 'grpo': "
                               'Aggregates token-level losses by normalizing over sequence length. Not '
                               'recommended due to length bias—this approach tends to prefer shorter '
                               'completions with positive advantages and longer ones with negative '
                               "advantages. 'dapo' (default): Aggregates token-level losses by normalizing "
                               'with the number of active token in the global accumulated batch. This method '
                               "was introduced in the DAPO paper to eliminate length bias. 'dr_grpo': "
                               'Aggregates token-level losses by normalizing with a global constant. This '
                               'method was introduced in the Dr. GRPO paper to eliminate length bias. The '
                               "value of the constant corresponds to `max_completion_length`. 'bnpo': "
                               'Aggregates token-level losses by normalizing with the number of active token '
                               'in the local batch. Note that normalization is performed over the local '
                               'batch only, so results may slightly vary depending on the local batch size, '
                               'despite a constant effective batch size. When using '
                               '`per_device_train_batch_size==1`, the loss is equivalent to the GRPO loss. '
                               "'cispo': Clips the importance sampling weights instead of the advantage "
                               'scaled importance weights. The clipped weights are then multiplied with the '
                               "advantages and policy model's log probs. Individual token losses are "
                               'aggregated by normalizing with the number of active tokens in the global '
                               'accumulated batch. This method was introduced in the [MiniMax-M1 '
                               "paper](https://huggingface.co/papers/2506.13585). 'sapo': Soft Adaptive "
                               'Policy Optimization loss, as introduced in the [Soft Adaptive Policy '
                               'Optimization paper](https://huggingface.co/papers/2511.20347). Replaces hard '
                               'clipping with a smooth, temperature-controlled gate that adaptively '
                               'attenuates off-policy updates while preserving useful learning signals. '
                               "'luspo': Length-Unbiased Sequence Policy Optimization loss. A sequence-level "
                               "loss that scales each sequence's loss by its length. This is a modification "
                               "of GSPO and requires `importance_sampling_level='sequence'`. Introduced in "
                               "the [LUSPO paper](https://huggingface.co/papers/2602.05261). 'vespo': "
                               'Variational Sequence-Level Soft Policy Optimization. Replaces hard clipping '
                               'with a smooth, asymmetric Gamma weighting function applied directly to '
                               'sequence-level importance weights. Introduced in the [VESPO '
                               'paper](https://huggingface.co/papers/2602.10693).',
                       'default': 'dapo'},
                      {'key': 'mask_truncated_completions',
                       'help': 'When enabled, truncated completions are excluded from the loss calculation, '
                               'preventing them from being incorrectly penalized and introducing noise '
                               'during training. According to the DAPO paper, this is a good practice for '
                               'training stability.',
                       'default': False},
                      {'key': 'sync_ref_model',
                       'help': 'Whether to synchronize the reference model with the active model every '
                               '`ref_model_sync_steps` steps, using the `ref_model_mixup_alpha` parameter.',
                       'default': False},
                      {'key': 'ref_model_mixup_alpha',
                       'help': 'α parameter from the TR-DPO paper, which controls the mix between the '
                               'current policy and the previous reference policy during updates. The '
                               'reference policy is updated according to the equation: `π_ref = α * π_θ + (1 '
                               '- α) * π_ref_prev`. To use this parameter, you must set '
                               '`sync_ref_model=True`.',
                       'default': 0.6},
                      {'key': 'ref_model_sync_steps',
                       'help': 'τ parameter from the TR-DPO paper, which determines how frequently the '
                               'current policy is synchronized with the reference policy. To use this '
                               'parameter, you must set `sync_ref_model=True`.',
                       'default': 512},
                      {'key': 'top_entropy_quantile',
                       'help': 'ρ parameter from Beyond the 80/20 Rule. Keeps in the policy loss term only '
                               'the top-ρ quantile of tokens by entropy of the probability distribution at '
                               'each sequence position, improving results. Range: [0.0-1.0]. A value of '
                               '`0.0` masks all but the highest entropy token; `1.0` keeps all tokens. The '
                               'paper recommends a value of `0.2`. If used with '
                               '`mask_truncated_completions=True`, only tokens from non-truncated '
                               'completions are considered.',
                       'default': 1.0},
                      {'key': 'entropy_coef',
                       'help': 'Coefficient of the entropy regularization term in the loss. A positive value '
                               'adds an entropy bonus that encourages exploration. The bonus is always the '
                               'mean per-token entropy regardless of `loss_type` (not rescaled to a loss '
                               "type's policy normalization), so `entropy_coef` has the same meaning for "
                               'every loss type. When `use_adaptive_entropy=True`, this serves as the '
                               'initial coefficient and is updated each optimizer step. Has no effect when '
                               'set to `0.0` (default).',
                       'default': 0.0},
                      {'key': 'use_adaptive_entropy',
                       'help': 'Whether to use adaptive entropy control, introduced in Skywork-OR1 '
                               '(https://huggingface.co/papers/2505.22312). When enabled, `entropy_coef` is '
                               'incremented by `entropy_coef_delta` when entropy is below `entropy_target`, '
                               'and decremented otherwise.',
                       'default': False},
                      {'key': 'entropy_coef_min',
                       'help': 'Lower bound for the entropy coefficient when using adaptive entropy control.',
                       'default': 0.0},
                      {'key': 'entropy_coef_max',
                       'help': 'Upper bound for the entropy coefficient when using adaptive entropy control.',
                       'default': 1.0},
                      {'key': 'entropy_coef_delta',
                       'help': 'Step size for adjusting the entropy coefficient during adaptive entropy '
                               'control.',
                       'default': 0.005},
                      {'key': 'entropy_target',
                       'help': 'Target mean per-token entropy (nats) for adaptive entropy control. The '
                               'coefficient is only applied when current entropy is at or below this value. '
                               'Measured over the same token set as the policy loss (all completion tokens, '
                               'or the high-entropy subset when top_entropy_quantile < 1.0). Typical '
                               'language models have per-token entropies of 2–10 nats, so the default of 0.2 '
                               'almost never triggers regularization (only on near-complete collapse); set '
                               'it close to the entropy observed early in training and tune from there.',
                       'default': 0.2},
                      {'key': 'max_tool_calling_iterations',
                       'help': 'Maximum number of tool-calling turns when training an agent. If `None`, '
                               'there is no limit and generation stops when the model generates a response '
                               'turn with no tool calls or when the total response length reaches '
                               '`max_model_length`.',
                       'default': None},
                      {'key': 'vllm_importance_sampling_correction',
                       'help': 'Whether to apply Importance Sampling (IS) to correct for the mismatch '
                               'between vLLM completion logprobs and recomputed training logprobs. If set to '
                               '`False`, no IS is applied regardless of `vllm_importance_sampling_mode`. '
                               'When `True`, the selected mode determines how IS ratios are computed and '
                               'constrained.',
                       'default': True},
                      {'key': 'vllm_importance_sampling_mode',
                       'help': 'Specifies how Importance Sampling (IS) is performed when '
                               'vllm_importance_sampling_correction=True. Modes are defined along two '
                               'orthogonal dimensions: (1) constraint, which determines how to handle ratios '
                               'outside the bounds [C_min, C_max]—either truncation (clip to range, ρ ← '
                               'clamp(ρ, C_min, C_max)) or masking (set ratios above C_max or below C_min to '
                               'zero); and (2) granularity, which determines whether ratios are computed per '
                               'token or as a single sequence-level ratio applied to all tokens. Supported '
                               "options are: 'token_truncate', 'token_mask', 'sequence_truncate', and "
                               "'sequence_mask'.",
                       'default': 'sequence_mask'},
                      {'key': 'vllm_importance_sampling_clip_max',
                       'help': 'Importance sampling upper bound C_max used by '
                               "`vllm_importance_sampling_mode`. For '*_truncate' modes, ratios are clipped "
                               "from above at C_max. For '*_mask' modes, ratios larger than C_max are set to "
                               'zero.',
                       'default': 3.0},
                      {'key': 'vllm_importance_sampling_clip_min',
                       'help': 'Importance sampling lower bound C_min used by '
                               '`vllm_importance_sampling_mode`. For `*_truncate` modes, ratios are clipped '
                               'from below at C_min. For `*_mask` modes, ratios below C_min are set to zero. '
                               'To strictly mask ratios below C_min without upper bound, set '
                               '`vllm_importance_sampling_clip_max=None`.',
                       'default': None},
                      {'key': 'off_policy_mask_threshold',
                       'help': 'Threshold for off-policy sequence masking. If `None`, off-policy sequence '
                               'masking is disabled. When set, sequences with negative advantages and high '
                               'KL divergence are masked out to stabilize training. This parameter '
                               'corresponds to the `delta` threshold in Equation 9 of the [DeepSeek-V3.2 '
                               'paper](https://huggingface.co/papers/2512.02556). It expects a positive '
                               'value (e.g., 0.5).',
                       'default': None},
                      {'key': 'use_bias_correction_kl',
                       'help': 'Whether to multiply the KL term by the importance sampling ratio, so that '
                               'the KL gradient becomes the unbiased reverse-KL gradient, as described in '
                               'the [DeepSeek-V3.2 paper](https://huggingface.co/papers/2512.02556). This '
                               'changes the KL gradient whenever `beta != 0`, including on-policy: the ratio '
                               'is differentiable, so it affects the gradient even where its value is '
                               'exactly 1. The unbiased reverse-KL property holds for '
                               "`importance_sampling_level='token'`; with 'sequence' a sequence-level weight "
                               'is broadcast onto the per-token KL.',
                       'default': True},
                      {'key': 'log_completions',
                       'help': 'Whether to log a sample of (prompt, completion) pairs every `logging_steps` '
                               'steps. If `rich` is installed, it prints the sample. If `wandb` logging is '
                               'enabled, it logs it to `wandb`.',
                       'default': False},
                      {'key': 'log_multimodal',
                       'help': 'Whether to log multimodal content (images, videos, etc.) together with '
                               'completions. Disable this to reduce log size when using high-resolution '
                               'multimodal data.',
                       'default': True},
                      {'key': 'num_completions_to_print',
                       'help': 'Number of completions to print with `rich`. If `None`, all completions are '
                               'logged.',
                       'default': None},
                      {'key': 'log_unique_prompts',
                       'help': 'Whether to log unique prompts. If `True`, only unique prompts are logged. If '
                               '`False`, all prompts are logged.',
                       'default': False},
                      {'key': 'log_completions_hub_repo',
                       'help': 'Hugging Face Hub repository to save the completions. Should be a complete '
                               "repository name like `'username/reponame'` or `'orgname/reponame'`, or just "
                               "`'reponame'` in which case the repository will be created in the "
                               "currently-logged-in Hugging Face user's namespace. Note that this repository "
                               "will be public unless you set `hub_private_repo=True` or your organization's "
                               'default is to create private repositories.',
                       'default': None},
                      {'key': 'use_transformers_continuous_batching',
                       'help': "Whether to use transformers' continuous batching engine for generating "
                               'completions. Requires transformers>=5.8.0.',
                       'default': False},
                      {'key': 'transformers_continuous_batching_config',
                       'help': 'Keyword arguments for `transformers.generation.ContinuousBatchingConfig`.',
                       'default': None},
                      {'key': 'use_transformers_paged',
                       'help': 'Deprecated. Use `use_transformers_continuous_batching` instead.',
                       'default': False},
                      {'key': 'vllm_importance_sampling_cap',
                       'help': 'Deprecated, use `vllm_importance_sampling_clip_max` instead. Importance '
                               "sampling cap C used by `vllm_importance_sampling_mode`. For '*_truncate' "
                               "modes, ratios are clipped from above at C. For '*_mask' modes, ratios larger "
                               'than C are set to zero.',
                       'default': None})},
          {'class': '_BaseConfig',
           'module': 'trl.trainer.base_config',
           'fields': ({'key': 'lr_scheduler_kwargs',
                       'help': "Additional parameters for the lr_scheduler, such as {'num_cycles': 1} for "
                               'cosine with hard restarts. See the documentation of each scheduler for '
                               'possible values.',
                       'default': None},
                      {'key': 'bf16',
                       'help': 'Whether to use bf16 (mixed) precision instead of 32-bit. Requires Ampere or '
                               'higher NVIDIA architecture or Intel XPU or using CPU (use_cpu) or Ascend '
                               'NPU. If not set, it defaults to `True` if `fp16` is not set.',
                       'default': None},
                      {'key': 'gradient_checkpointing',
                       'help': 'Enable gradient checkpointing to trade compute for memory. Reduces memory at '
                               'the cost of ~20%% slower training.',
                       'default': True},
                      {'key': 'use_liger_kernel',
                       'help': "Enable Liger Kernel optimizations: transformers patches the model's layers "
                               "with Liger's Triton kernels. Deprecated in `SFTTrainer`, `DPOTrainer`, "
                               '`KTOTrainer`, `GRPOTrainer` and `RLOOTrainer`, and will be removed in '
                               'v2.0.0: use `model_init_kwargs={"use_kernels": True}` instead.',
                       'default': False},
                      {'key': 'torch_empty_cache_steps',
                       'help': 'Number of steps to wait before calling `torch.<device>.empty_cache()`. Helps '
                               'avoid CUDA OOM at a cost of ~10%% slower performance. If None, cache will '
                               'not be emptied.',
                       'default': None},
                      {'key': 'logging_steps',
                       'help': 'Log every X updates steps. Should be an integer or a float in range `[0,1)`. '
                               'If smaller than 1, will be interpreted as ratio of total training steps.',
                       'default': 10})},
          {'class': 'TrainingArguments',
           'module': 'transformers.training_args',
           'fields': ({'key': 'output_dir',
                       'help': 'The output directory where the model predictions and checkpoints will be '
                               'written.',
                       'default': None},
                      {'key': 'per_device_train_batch_size',
                       'help': 'The batch size per device for training.',
                       'default': 8},
                      {'key': 'num_train_epochs',
                       'help': 'Total number of training epochs to perform.',
                       'default': 3.0},
                      {'key': 'max_steps',
                       'help': 'Overrides `num_train_epochs`. If set to a positive number, the total number '
                               'of training steps to perform. Must be set when the training dataset does not '
                               'implement `__len__` (e.g. a streaming dataset).',
                       'default': -1},
                      {'key': 'learning_rate',
                       'help': 'The initial learning rate for the optimizer.',
                       'default': 5e-05},
                      {'key': 'lr_scheduler_type',
                       'help': 'The learning rate scheduler type to use. See `SchedulerType` for all '
                               'possible values.',
                       'default': 'linear'},
                      {'key': 'lr_scheduler_kwargs',
                       'help': 'The extra arguments for the lr_scheduler. See the documentation of each '
                               'scheduler for possible values.',
                       'default': None},
                      {'key': 'warmup_steps',
                       'help': 'Number of steps for a linear warmup from 0 to `learning_rate`. Can be an '
                               'integer (exact steps) or a float in [0, 1) (ratio of total steps).',
                       'default': 0},
                      {'key': 'optim',
                       'help': 'The optimizer to use. See `OptimizerNames` for the complete list.',
                       'default': 'adamw_torch_fused'},
                      {'key': 'optim_args',
                       'help': 'Optional arguments supplied to optimizers such as AnyPrecisionAdamW, '
                               'AdEMAMix, and GaLore.',
                       'default': None},
                      {'key': 'weight_decay',
                       'help': 'Weight decay coefficient applied by the optimizer. Automatically excluded '
                               'from bias and LayerNorm parameters.',
                       'default': 0.0},
                      {'key': 'adam_beta1',
                       'help': 'The exponential decay rate for the first moment estimates (momentum) in '
                               'Adam-based optimizers.',
                       'default': 0.9},
                      {'key': 'adam_beta2',
                       'help': 'The exponential decay rate for the second moment estimates (variance) in '
                               'Adam-based optimizers.',
                       'default': 0.999},
                      {'key': 'adam_epsilon',
                       'help': 'Epsilon value for numerical stability in Adam-based optimizers.',
                       'default': 1e-08},
                      {'key': 'optim_target_modules',
                       'help': 'The target modules to optimize. Currently used for the GaLore and APOLLO '
                               'algorithms.',
                       'default': None},
                      {'key': 'gradient_accumulation_steps',
                       'help': 'Number of update steps to accumulate gradients before performing a '
                               'backward/update pass. Effective batch size = per_device_train_batch_size * '
                               'num_devices * gradient_accumulation_steps.',
                       'default': 1},
                      {'key': 'average_tokens_across_devices',
                       'help': 'Whether or not to average tokens across devices. If enabled, will use '
                               'all_reduce to synchronize num_tokens_in_batch for precise loss calculation. '
                               'Reference: https://github.com/huggingface/transformers/issues/34242',
                       'default': True},
                      {'key': 'max_grad_norm',
                       'help': 'Maximum gradient norm for gradient clipping. Set to 0 to disable.',
                       'default': 1.0},
                      {'key': 'label_smoothing_factor',
                       'help': 'Label smoothing factor to prevent overconfidence. Zero means no smoothing.',
                       'default': 0.0},
                      {'key': 'bf16',
                       'help': 'Enable bfloat16 (BF16) mixed precision training. Generally preferred over '
                               'FP16 due to better numerical stability.',
                       'default': False},
                      {'key': 'fp16',
                       'help': 'Enable float16 (FP16) mixed precision training. Consider using BF16 instead '
                               'if your hardware supports it.',
                       'default': False},
                      {'key': 'bf16_full_eval',
                       'help': 'Use full BF16 precision for evaluation (not just mixed precision). Faster '
                               'and saves memory.',
                       'default': False},
                      {'key': 'fp16_full_eval',
                       'help': 'Use full FP16 precision for evaluation (not just mixed precision). Faster '
                               'and saves memory.',
                       'default': False},
                      {'key': 'tf32',
                       'help': 'Enable TF32 mode on Ampere and newer GPUs. Provides up to 8x speedup with '
                               'negligible accuracy loss.',
                       'default': None},
                      {'key': 'gradient_checkpointing',
                       'help': 'Enable gradient checkpointing to trade compute for memory. Reduces memory at '
                               'the cost of ~20%% slower training.',
                       'default': False},
                      {'key': 'gradient_checkpointing_kwargs',
                       'help': 'Keyword arguments passed to `gradient_checkpointing_enable()`. '
                               '`every_n_layers` checkpoints only every n-th decoder layer instead of all of '
                               'them; `1` is the usual all-or-nothing behavior, and larger values give some '
                               'memory back to speed. `offload` holds the saved activations in pinned host '
                               'memory, which frees device memory and makes the step slower. Any other key '
                               'is forwarded to `torch.utils.checkpoint.checkpoint`.',
                       'default': None},
                      {'key': 'torch_compile',
                       'help': 'Compile the model using `torch.compile()` for faster training.',
                       'default': False},
                      {'key': 'torch_compile_backend',
                       'help': 'Backend for `torch.compile()`. If set, automatically enables '
                               '`torch_compile`.',
                       'default': None},
                      {'key': 'torch_compile_mode',
                       'help': 'Compilation mode for `torch.compile()`. If set, automatically enables '
                               '`torch_compile`.',
                       'default': None},
                      {'key': 'use_liger_kernel',
                       'help': 'Enable Liger Kernel optimizations. Increases throughput by ~20%% and reduces '
                               'memory by ~60%%.',
                       'default': False},
                      {'key': 'liger_kernel_config',
                       'help': 'Configuration for Liger Kernel. Passed as kwargs to '
                               '`_apply_liger_kernel_to_instance()`. If None, uses default configuration.',
                       'default': None},
                      {'key': 'use_cache',
                       'help': 'Whether or not to use cache for the model For training, this is usually not '
                               'needed apart from some PEFT methods that uses `past_key_values`.',
                       'default': False},
                      {'key': 'neftune_noise_alpha',
                       'help': 'If not None, activates NEFTune noise embeddings. Can drastically improve '
                               'performance for instruction fine-tuning. Typical range: [5.0, 15.0].',
                       'default': None},
                      {'key': 'torch_empty_cache_steps',
                       'help': 'Number of steps to wait before calling `torch.<device>.empty_cache()`. Helps '
                               'avoid CUDA OOM at a cost of ~10%% slower performance. If None, cache will '
                               'not be emptied.',
                       'default': None},
                      {'key': 'auto_find_batch_size',
                       'help': 'Whether to find a training batch size that will fit into memory '
                               'automatically through exponential decay, avoiding CUDA Out-of-Memory errors. '
                               'The evaluation batch size is not adjusted.',
                       'default': False},
                      {'key': 'logging_strategy',
                       'help': "The logging strategy to adopt during training. Options: 'no', 'epoch', "
                               "'steps'.",
                       'default': 'steps'},
                      {'key': 'logging_steps',
                       'help': 'Log every X updates steps. Should be an integer or a float in range `[0,1)`. '
                               'If smaller than 1, will be interpreted as ratio of total training steps.',
                       'default': 500},
                      {'key': 'logging_first_step',
                       'help': 'Whether to log the first `global_step` or not.',
                       'default': False},
                      {'key': 'log_on_each_node',
                       'help': 'When doing a multinode distributed training, whether to log once per node or '
                               'just once on the main node.',
                       'default': True},
                      {'key': 'logging_nan_inf_filter',
                       'help': 'Filter out NaN and Inf losses when logging. Does not affect gradient '
                               'computation, only logging.',
                       'default': True},
                      {'key': 'include_num_input_tokens_seen',
                       'help': 'Whether to track the number of input tokens seen. Must be one of [`all`, '
                               '`non_padding`, `no`] or a boolean value which map to `all` or `no`',
                       'default': 'no'},
                      {'key': 'log_level',
                       'help': "Logging level for the main process. Options: 'debug', 'info', 'warning', "
                               "'error', 'critical', 'passive'.",
                       'default': 'passive'},
                      {'key': 'log_level_replica',
                       'help': 'Logging level for replica processes in distributed training. Same options as '
                               '`log_level`.',
                       'default': 'warning'},
                      {'key': 'disable_tqdm',
                       'help': 'Disable tqdm progress bars. Defaults to True if log_level is warning or '
                               'lower.',
                       'default': None},
                      {'key': 'report_to',
                       'help': "The list of integrations to report the results and logs to. Use 'all' for "
                               "all installed integrations, 'none' for no integrations.",
                       'default': 'none'},
                      {'key': 'run_name',
                       'help': 'An optional descriptor for the run. Notably used for trackio, wandb, mlflow '
                               'comet and swanlab logging.',
                       'default': None},
                      {'key': 'project',
                       'help': 'The name of the project to use for logging. Currently, only used by Trackio.',
                       'default': 'huggingface'},
                      {'key': 'trackio_space_id',
                       'help': 'Hugging Face Space id for live Gradio-based Trackio logging (read/write '
                               "Bucket access). Use 'username/reponame', 'orgname/reponame', or 'reponame' "
                               "(current user's namespace). None: log only locally, no Space. Prefer "
                               'trackio_static_space_id for stable post-training dashboard links. Public '
                               'unless hub_private_repo=True or org default.',
                       'default': None},
                      {'key': 'trackio_bucket_id',
                       'help': 'Optional HF Bucket id when using a Trackio Space; if unset, Trackio picks a '
                               'default.',
                       'default': None},
                      {'key': 'trackio_static_space_id',
                       'help': 'Static read-only Trackio Space over the Bucket (stable model-card links). '
                               'False: no static sync on Hub push and no freeze after training. None/str: '
                               'allow static Space; for local-only logging, Hub push runs sync(static); '
                               'after training, freeze runs only if trackio_space_id was set (Gradio Space). '
                               'str sets explicit static Space id. Public unless hub_private_repo=True or '
                               'org default.',
                       'default': None},
                      {'key': 'eval_strategy',
                       'help': "When to run evaluation. Options: 'no', 'steps', 'epoch'.",
                       'default': 'no'},
                      {'key': 'eval_steps',
                       'help': "Number of update steps between evaluations if `eval_strategy='steps'`. "
                               'Defaults to `logging_steps` if not set. Should be an integer or a float in '
                               'range `[0,1)`. If smaller than 1, will be interpreted as ratio of total '
                               'training steps.',
                       'default': None},
                      {'key': 'eval_delay',
                       'help': 'Number of epochs or steps to wait for before the first evaluation can be '
                               'performed, depending on the eval_strategy.',
                       'default': 0},
                      {'key': 'per_device_eval_batch_size',
                       'help': 'The batch size per device (GPU/TPU core/CPU) for evaluation.',
                       'default': 8},
                      {'key': 'prediction_loss_only',
                       'help': 'When performing evaluation and generating predictions, only returns the '
                               'loss.',
                       'default': False},
                      {'key': 'eval_on_start',
                       'help': 'Whether to run through the entire `evaluation` step at the very beginning of '
                               'training as a sanity check.',
                       'default': False},
                      {'key': 'eval_do_concat_batches',
                       'help': 'Whether to recursively concat inputs/losses/labels/predictions across '
                               'batches. If `False`, will instead store them as lists, with each batch kept '
                               'separate.',
                       'default': True},
                      {'key': 'eval_use_gather_object',
                       'help': 'Whether to run recursively gather object in a nested list/tuple/dictionary '
                               'of objects from all devices.',
                       'default': False},
                      {'key': 'eval_accumulation_steps',
                       'help': 'Number of predictions steps to accumulate the output tensors for, before '
                               'moving the results to the CPU. If unset, predictions are accumulated on the '
                               'accelerator before being moved to the CPU.',
                       'default': None},
                      {'key': 'include_for_metrics',
                       'help': 'Include additional data in the `compute_metrics` function. Options: '
                               "'inputs', 'loss'."},
                      {'key': 'batch_eval_metrics',
                       'help': 'Break eval metrics calculation into batches to save memory.',
                       'default': False},
                      {'key': 'save_only_model',
                       'help': 'Save only model weights, not optimizer/scheduler/RNG state. Prevents '
                               'resuming training from checkpoint.',
                       'default': False},
                      {'key': 'save_strategy',
                       'help': "The checkpoint save strategy to adopt during training. Options: 'no', "
                               "'epoch', 'steps', 'best'.",
                       'default': 'steps'},
                      {'key': 'save_steps',
                       'help': 'Save checkpoint every X updates steps. Should be an integer or a float in '
                               'range `[0,1)`. If smaller than 1, will be interpreted as ratio of total '
                               'training steps.',
                       'default': 500},
                      {'key': 'save_on_each_node',
                       'help': 'When doing multi-node distributed training, whether to save models and '
                               'checkpoints on each node, or only on the main one',
                       'default': False},
                      {'key': 'save_total_limit',
                       'help': 'Maximum number of checkpoints to keep. Deletes older checkpoints in '
                               '`output_dir`. The best checkpoint is always retained when '
                               '`load_best_model_at_end=True`.',
                       'default': None},
                      {'key': 'enable_jit_checkpoint',
                       'help': 'Enable JIT checkpointing on SIGTERM signal for graceful termination on '
                               "preemptible workloads. Configure your orchestrator's graceful shutdown "
                               'period accordingly.',
                       'default': False},
                      {'key': 'push_to_hub',
                       'help': 'Whether or not to push the model to the Hub every time the model is saved.',
                       'default': False},
                      {'key': 'hub_token',
                       'help': 'The token to use to push the model to the Hub. Defaults to the token from '
                               '`hf auth login`.',
                       'default': None},
                      {'key': 'hub_private_repo',
                       'help': 'Whether to make the repo private. If `None` (default), the repo will be '
                               "public unless the organization's default is private. This value is ignored "
                               'if the repo already exists. If reporting to Trackio Spaces created or synced '
                               '(including on Hub push when `trackio_space_id` is None) use the same logic '
                               'for whether the Space is private.',
                       'default': None},
                      {'key': 'hub_model_id',
                       'help': 'The name of the repository to keep in sync with the local `output_dir`.',
                       'default': None},
                      {'key': 'hub_strategy',
                       'help': "Defines what and when to push to Hub. Options: 'end', 'every_save', "
                               "'checkpoint', 'all_checkpoints'.",
                       'default': 'every_save'},
                      {'key': 'hub_always_push',
                       'help': "Unless `True`, the Trainer will skip pushes if the previous one wasn't "
                               'finished yet.',
                       'default': False},
                      {'key': 'hub_revision',
                       'help': 'The revision to use when pushing to the Hub. Can be a branch name, a tag, or '
                               'a commit hash.',
                       'default': None},
                      {'key': 'load_best_model_at_end',
                       'help': 'Load the best checkpoint at the end of training. Requires `eval_strategy` to '
                               'be set.',
                       'default': False},
                      {'key': 'metric_for_best_model',
                       'help': 'Metric to use for comparing models when `load_best_model_at_end=True`. '
                               "Defaults to 'loss'.",
                       'default': None},
                      {'key': 'greater_is_better',
                       'help': 'Whether higher metric values are better. Defaults based on '
                               '`metric_for_best_model`.',
                       'default': None},
                      {'key': 'ignore_data_skip',
                       'help': 'When resuming training, skip fast-forwarding through the dataset to reach '
                               'the previous state. If True, training starts from the beginning of the '
                               'dataset.',
                       'default': False},
                      {'key': 'restore_callback_states_from_checkpoint',
                       'help': 'Whether to restore the callback states from the checkpoint. If `True`, will '
                               'override callbacks passed to the `Trainer` if they exist in the checkpoint.',
                       'default': False},
                      {'key': 'full_determinism',
                       'help': 'Whether to call enable_full_determinism instead of set_seed for '
                               'reproducibility in distributed training. Important: this will negatively '
                               'impact the performance, so only use it for debugging.',
                       'default': False},
                      {'key': 'seed',
                       'help': 'Random seed that will be set at the beginning of training.',
                       'default': 42},
                      {'key': 'data_seed',
                       'help': 'Random seed to be used with data samplers. If not set, uses the same seed as '
                               '`seed`.',
                       'default': None},
                      {'key': 'use_cpu',
                       'help': 'Whether or not to use cpu. If set to False, we will use the available torch '
                               'device/backend.',
                       'default': False},
                      {'key': 'accelerator_config',
                       'help': 'Configuration for the internal Accelerate integration. Can be a path to a '
                               'JSON config file or a dict.',
                       'default': None},
                      {'key': 'parallelism_config',
                       'help': 'Parallelism configuration for the training run. Requires Accelerate '
                               '`1.10.1`.',
                       'default': None},
                      {'key': 'dataloader_drop_last',
                       'help': 'Drop the last incomplete batch if it is not divisible by the batch size.',
                       'default': False},
                      {'key': 'dataloader_num_workers',
                       'help': 'Number of subprocesses to use for data loading (PyTorch only). 0 means that '
                               'the data will be loaded in the main process.',
                       'default': 0},
                      {'key': 'dataloader_pin_memory',
                       'help': 'Whether or not to pin memory for DataLoader.',
                       'default': True},
                      {'key': 'dataloader_persistent_workers',
                       'help': 'If True, the data loader will not shut down the worker processes after a '
                               'dataset has been consumed once. This allows to maintain the workers Dataset '
                               'instances alive. Can potentially speed up training, but will increase RAM '
                               'usage.',
                       'default': False},
                      {'key': 'dataloader_prefetch_factor',
                       'help': 'Number of batches loaded in advance by each worker. 2 means there will be a '
                               'total of 2 * num_workers batches prefetched across all workers.',
                       'default': None},
                      {'key': 'dataloader_multiprocessing_context',
                       'help': "The multiprocessing start method to use for data loading workers ('fork', "
                               "'spawn', or 'forkserver'). Defaults to PyTorch's default, except on MPS with "
                               "dataloader_num_workers > 1, where it defaults to 'fork'. Use 'spawn' when "
                               'streaming from sources whose objects are not fork-safe (e.g. HDFS via '
                               "pyarrow). Under 'spawn', any custom collate_fn / dataset code must be "
                               'importable at module level (no lambdas/closures).',
                       'default': None},
                      {'key': 'dataloader_in_order',
                       'help': 'If True (default), the data loader yields batches in the order workers were '
                               'dispatched. Set to False to yield batches as soon as they are ready, '
                               'reducing tail latency for IterableDataset streaming workloads. Requires '
                               'PyTorch >= 2.6.',
                       'default': True},
                      {'key': 'remove_unused_columns',
                       'help': 'Whether or not to automatically remove the columns unused by the model '
                               'forward method.',
                       'default': True},
                      {'key': 'label_names',
                       'help': 'The list of keys in your dictionary of inputs that correspond to the labels.',
                       'default': None},
                      {'key': 'train_sampling_strategy',
                       'help': "Sampler for training: 'random' (default), 'sequential', 'group_by_length', "
                               "or 'batch_rebalance'.",
                       'default': 'random'},
                      {'key': 'length_column_name',
                       'help': 'Column name for precomputed lengths. Ignored unless '
                               "`train_sampling_strategy` is 'group_by_length' or 'batch_rebalance'.",
                       'default': 'length'},
                      {'key': 'ddp_find_unused_parameters',
                       'help': 'When using distributed training, the value of the flag '
                               '`find_unused_parameters` passed to `DistributedDataParallel`.',
                       'default': None},
                      {'key': 'ddp_bucket_cap_mb',
                       'help': 'When using distributed training, the value of the flag `bucket_cap_mb` '
                               'passed to `DistributedDataParallel`.',
                       'default': None},
                      {'key': 'ddp_broadcast_buffers',
                       'help': 'When using distributed training, the value of the flag `broadcast_buffers` '
                               'passed to `DistributedDataParallel`.',
                       'default': None},
                      {'key': 'ddp_static_graph',
                       'help': 'When using distributed training, the value of the flag `static_graph` passed '
                               'to `DistributedDataParallel`.',
                       'default': None},
                      {'key': 'ddp_backend',
                       'help': "The backend to use for distributed training. Must be one of 'nccl', 'mpi', "
                               "'xccl', 'gloo', 'hccl'.",
                       'default': None},
                      {'key': 'ddp_timeout',
                       'help': 'The timeout for `torch.distributed.init_process_group` calls (in seconds).',
                       'default': 1800},
                      {'key': 'fsdp',
                       'help': 'Enable PyTorch Fully Sharded Data Parallel (FSDP) for distributed training. '
                               'Pass `--fsdp` (or `fsdp=True`) to turn FSDP on.',
                       'default': None},
                      {'key': 'fsdp_config',
                       'help': 'Tuning for FSDP (used only when `fsdp` is enabled). Either a path to a JSON '
                               'config file (e.g., `fsdp_config.json`) or an already loaded dict.',
                       'default': None},
                      {'key': 'deepspeed',
                       'help': 'Enable DeepSpeed integration. Value is a path to a JSON config file or a '
                               'dict.',
                       'default': None},
                      {'key': 'debug',
                       'help': "Enable one or more debug features. Options: 'underflow_overflow' (detect "
                               "overflow in model I/O), 'tpu_metrics_debug' (print TPU metrics).",
                       'default': ''},
                      {'key': 'skip_memory_metrics',
                       'help': 'Whether to skip adding memory profiler reports to metrics. Skipped by '
                               'default because it slows down training.',
                       'default': True},
                      {'key': 'do_train',
                       'help': 'Whether to run training. Not directly used by Trainer; intended for '
                               'training/evaluation scripts.',
                       'default': False},
                      {'key': 'do_eval',
                       'help': 'Whether to run evaluation. Not directly used by Trainer; intended for '
                               'training/evaluation scripts.',
                       'default': False},
                      {'key': 'do_predict',
                       'help': 'Whether to run predictions on the test set. Not directly used by Trainer; '
                               'intended for training/evaluation scripts.',
                       'default': False},
                      {'key': 'resume_from_checkpoint',
                       'help': 'Path to a folder with a valid checkpoint for your model. Not directly used '
                               'by Trainer; intended for training/evaluation scripts.',
                       'default': None},
                      {'key': 'local_rank',
                       'help': 'When using torch.distributed.launch (Deprecated), it will pass `local_rank` '
                               'in the script, so we need this for the parser. To get the local rank, prefer '
                               'using the property `local_process_index`',
                       'default': -1})},
          {'class': 'SpatialModelConfig',
           'module': 'training.models',
           'fields': ({'key': 'language_lora',
                       'help': "LoRA on the language model's linear layers.",
                       'default': True},
                      {'key': 'vision_lora',
                       'help': "LoRA on the vision encoder's linear layers.",
                       'default': True},
                      {'key': 'vision_lora_r', 'help': 'LoRA rank of the vision layers.', 'default': 4},
                      {'key': 'vision_lora_alpha', 'help': 'LoRA alpha of the vision layers.', 'default': 8},
                      {'key': 'freeze_vision',
                       'help': 'Full fine-tuning: freeze the vision encoder.',
                       'default': False},
                      {'key': 'init_adapter_path',
                       'help': 'LoRA adapter that initialises the policy (e.g. the SFT cold start).',
                       'default': None})},
          {'class': 'ModelConfig',
           'module': 'trl.trainer.model_config',
           'fields': ({'key': 'model_name_or_path',
                       'help': 'Model checkpoint for weights initialization.',
                       'default': None},
                      {'key': 'model_revision',
                       'help': 'Specific model version to use. It can be a branch name, a tag name, or a '
                               'commit id.',
                       'default': 'main'},
                      {'key': 'dtype',
                       'help': 'Override the default `torch.dtype` and load the model under this dtype. It '
                               "defaults to `'float32'`.",
                       'default': 'float32'},
                      {'key': 'attn_implementation',
                       'help': 'Which attention implementation to use. You can run '
                               '`--attn_implementation=flash_attention_2`, in which case you must install '
                               'this manually by running `pip install flash-attn --no-build-isolation`.',
                       'default': None},
                      {'key': 'use_peft', 'help': 'Whether to use PEFT for training.', 'default': False},
                      {'key': 'lora_r', 'help': 'LoRA R value.', 'default': 16},
                      {'key': 'lora_alpha', 'help': 'LoRA alpha.', 'default': 32},
                      {'key': 'lora_dropout', 'help': 'LoRA dropout.', 'default': 0.05},
                      {'key': 'lora_target_modules', 'help': 'LoRA target modules.', 'default': None},
                      {'key': 'lora_target_parameters',
                       'help': 'List of target parameters for LoRA.',
                       'default': None},
                      {'key': 'lora_modules_to_save',
                       'help': 'Model layers to unfreeze & train.',
                       'default': None},
                      {'key': 'lora_task_type',
                       'help': "Task type to pass for LoRA (use 'SEQ_CLS' for reward modeling).",
                       'default': 'CAUSAL_LM'},
                      {'key': 'use_rslora',
                       'help': 'Whether to use Rank-Stabilized LoRA, which sets the adapter scaling factor '
                               'to `lora_alpha/√r`, instead of the original default value of `lora_alpha/r`.',
                       'default': False},
                      {'key': 'use_dora',
                       'help': 'Enable Weight-Decomposed Low-Rank Adaptation (DoRA). This technique '
                               'decomposes the updates of the weights into two parts, magnitude and '
                               'direction. Direction is handled by normal LoRA, whereas the magnitude is '
                               'handled by a separate learnable parameter. This can improve the performance '
                               'of LoRA, especially at low ranks. Right now, DoRA only supports linear and '
                               'Conv2D layers. DoRA introduces a bigger overhead than pure LoRA, so it is '
                               'recommended to merge weights for inference.',
                       'default': False},
                      {'key': 'load_in_8bit',
                       'help': 'Whether to use 8 bit precision for the base model. Works only with LoRA.',
                       'default': False},
                      {'key': 'load_in_4bit',
                       'help': 'Whether to use 4 bit precision for the base model. Works only with LoRA.',
                       'default': False},
                      {'key': 'bnb_4bit_quant_type', 'help': 'Quantization type.', 'default': 'nf4'},
                      {'key': 'use_bnb_nested_quant',
                       'help': 'Whether to use nested quantization.',
                       'default': False},
                      {'key': 'bnb_4bit_quant_storage',
                       'help': 'Quantization storage dtype',
                       'default': None})}),
 'sft': ({'class': 'SpatialSFTArguments',
          'module': 'training.sft',
          'fields': ({'key': 'data_root', 'help': 'Storage root of the Parquet caches.', 'default': None},
                     {'key': 'dataset_table',
                      'help': 'SFT table (with a completion column).',
                      'default': 'sft_cold_start'},
                     {'key': 'dataset_split', 'help': 'Split to train on.', 'default': 'train'},
                     {'key': 'max_train_samples', 'help': 'Rows used.', 'default': 1000},
                     {'key': 'allow_mixed_origins',
                      'help': 'Accept a table mixing sample-world and real rows (origin column).',
                      'default': False},
                     {'key': 'model_family', 'help': 'Box convention family (auto).', 'default': None},
                     {'key': 'max_length_policy',
                      'help': 'fit (max_length = longest sequence), error or warn when max_length cuts '
                              'targets.',
                      'default': 'fit'})},
         {'class': 'SFTConfig',
          'module': 'trl.trainer.sft_config',
          'fields': ({'key': 'learning_rate',
                      'help': 'The initial learning rate for AdamW.',
                      'default': 2e-05},
                     {'key': 'model_init_kwargs',
                      'help': 'Keyword arguments for `AutoModelForCausalLM.from_pretrained`, used when the '
                              '`model` argument of the `SFTTrainer` is provided as a string. The `revision` '
                              'value is also used when loading the processing class.',
                      'default': None},
                     {'key': 'trust_remote_code',
                      'help': 'Whether to allow loading models and tokenizers that ship custom Python code '
                              'from the Hub. Forwarded to `AutoModelForCausalLM.from_pretrained` and '
                              '`AutoProcessor.from_pretrained`.',
                      'default': False},
                     {'key': 'router_aux_loss_coef',
                      'help': 'Coefficient of the load-balancing auxiliary loss for Mixture-of-Experts (MoE) '
                              'models, added to the training loss with this weight. When not set, the value '
                              'declared by the model config is used. Set to `0.0` to disable it. Fails when '
                              'used with a non-MoE model.',
                      'default': None},
                     {'key': 'chat_template_path',
                      'help': "If specified, sets the model's chat template. This can either be the path to "
                              'a tokenizer (local directory or Hugging Face Hub model) or a direct path to a '
                              'Jinja template file. When using a Jinja file, you must ensure that any '
                              'special tokens referenced in the template are added to the tokenizer and that '
                              "the model's embedding layer is resized accordingly.",
                      'default': None},
                     {'key': 'dataset_text_field',
                      'help': 'Name of the column that contains text data in the dataset.',
                      'default': 'text'},
                     {'key': 'dataset_kwargs',
                      'help': 'Dictionary of optional keyword arguments for the dataset preparation. The '
                              'only supported key is `skip_prepare_dataset`. When the dataset contains '
                              'images, `skip_prepare_dataset` is automatically treated as `True` regardless '
                              'of the provided value, since preprocessing is done on the fly.',
                      'default': None},
                     {'key': 'dataset_num_proc',
                      'help': 'Number of processes to use for processing the dataset.',
                      'default': None},
                     {'key': 'eos_token',
                      'help': 'Token used to indicate the end of a turn or sequence. If `None`, it defaults '
                              'to `processing_class.eos_token`.',
                      'default': None},
                     {'key': 'max_length',
                      'help': 'Maximum length of the tokenized sequence. Sequences longer than `max_length` '
                              'are truncated from the left or right depending on the `truncation_mode`. If '
                              '`None`, no truncation is applied. When packing is enabled, this value sets '
                              'the sequence length.',
                      'default': 1024},
                     {'key': 'truncation_mode',
                      'help': 'Truncation mode to use when the sequence exceeds `max_length`. The only '
                              "supported value is `'keep_start'`. The `'keep_end'` value is deprecated and "
                              'will be removed in v2.0.0.',
                      'default': 'keep_start'},
                     {'key': 'shuffle_dataset', 'help': 'Whether to shuffle the dataset.', 'default': False},
                     {'key': 'packing',
                      'help': 'Whether to group multiple sequences into fixed-length blocks to improve '
                              'computational efficiency and reduce padding. Uses `max_length` to define '
                              'sequence length.',
                      'default': False},
                     {'key': 'packing_strategy',
                      'help': "Strategy for packing sequences. Can be `'bfd'` (best-fit decreasing, "
                              "truncates overflow), `'bfd_split'` (best-fit decreasing, splits overflow "
                              "sequences), or `'wrapped'` (aggressive, cuts mid-sequence).",
                      'default': 'bfd'},
                     {'key': 'padding_free',
                      'help': 'Whether to perform forward passes without padding by flattening all sequences '
                              'in the batch into a single continuous sequence. This reduces memory usage by '
                              'eliminating padding overhead. Currently, this is only supported with the '
                              'FlashAttention 2 or 3, which can efficiently handle the flattened batch '
                              "structure. When packing is enabled with strategy `'bfd'`, padding-free is "
                              'enabled, regardless of the value of this parameter.',
                      'default': False},
                     {'key': 'pad_to_multiple_of',
                      'help': "If set, the sequences will be padded to a multiple of this value. `'auto'` "
                              'pads to a multiple of 128 on Neuron (AWS Trainium), which compiles once per '
                              'input shape, and does not pad elsewhere.',
                      'default': 'auto'},
                     {'key': 'eval_packing',
                      'help': 'Whether to pack the eval dataset. If `None`, uses the same value as '
                              '`packing`.',
                      'default': None},
                     {'key': 'completion_only_loss',
                      'help': 'Whether to compute loss only on the completion part of the sequence. If set '
                              'to `True`, loss is computed only on the completion, which is supported only '
                              'for prompt-completion datasets. If `False`, loss is computed on the entire '
                              'sequence. If `None` (default), the behavior depends on the dataset: loss is '
                              'computed on the completion for prompt-completion datasets, and on the full '
                              'sequence for language modeling datasets.',
                      'default': None},
                     {'key': 'assistant_only_loss',
                      'help': 'Whether to compute loss only on the assistant part of the sequence. If set to '
                              '`True`, loss is computed only on the assistant responses, which is supported '
                              'only for conversational datasets. If `False`, loss is computed on the entire '
                              'sequence.',
                      'default': False},
                     {'key': 'loss_type',
                      'help': "Type of loss to use. Possible values are `'nll'` (standard negative "
                              "log-likelihood) and `'dft'` (Dynamic Fine-Tuning, "
                              'https://huggingface.co/papers/2508.05629).',
                      'default': 'nll'},
                     {'key': 'activation_offloading',
                      'help': 'Whether to offload the activations to the CPU.',
                      'default': False},
                     {'key': 'pad_token',
                      'help': 'Deprecated. Set `tokenizer.pad_token` directly and pass it as '
                              '`processing_class` to the trainer instead.',
                      'default': None})},
         {'class': '_BaseConfig',
          'module': 'trl.trainer.base_config',
          'fields': ({'key': 'lr_scheduler_kwargs',
                      'help': "Additional parameters for the lr_scheduler, such as {'num_cycles': 1} for "
                              'cosine with hard restarts. See the documentation of each scheduler for '
                              'possible values.',
                      'default': None},
                     {'key': 'bf16',
                      'help': 'Whether to use bf16 (mixed) precision instead of 32-bit. Requires Ampere or '
                              'higher NVIDIA architecture or Intel XPU or using CPU (use_cpu) or Ascend NPU. '
                              'If not set, it defaults to `True` if `fp16` is not set.',
                      'default': None},
                     {'key': 'gradient_checkpointing',
                      'help': 'Enable gradient checkpointing to trade compute for memory. Reduces memory at '
                              'the cost of ~20%% slower training.',
                      'default': True},
                     {'key': 'use_liger_kernel',
                      'help': "Enable Liger Kernel optimizations: transformers patches the model's layers "
                              "with Liger's Triton kernels. Deprecated in `SFTTrainer`, `DPOTrainer`, "
                              '`KTOTrainer`, `GRPOTrainer` and `RLOOTrainer`, and will be removed in v2.0.0: '
                              'use `model_init_kwargs={"use_kernels": True}` instead.',
                      'default': False},
                     {'key': 'torch_empty_cache_steps',
                      'help': 'Number of steps to wait before calling `torch.<device>.empty_cache()`. Helps '
                              'avoid CUDA OOM at a cost of ~10%% slower performance. If None, cache will not '
                              'be emptied.',
                      'default': None},
                     {'key': 'logging_steps',
                      'help': 'Log every X updates steps. Should be an integer or a float in range `[0,1)`. '
                              'If smaller than 1, will be interpreted as ratio of total training steps.',
                      'default': 10})},
         {'class': 'TrainingArguments',
          'module': 'transformers.training_args',
          'fields': ({'key': 'output_dir',
                      'help': 'The output directory where the model predictions and checkpoints will be '
                              'written.',
                      'default': None},
                     {'key': 'per_device_train_batch_size',
                      'help': 'The batch size per device for training.',
                      'default': 8},
                     {'key': 'num_train_epochs',
                      'help': 'Total number of training epochs to perform.',
                      'default': 3.0},
                     {'key': 'max_steps',
                      'help': 'Overrides `num_train_epochs`. If set to a positive number, the total number '
                              'of training steps to perform. Must be set when the training dataset does not '
                              'implement `__len__` (e.g. a streaming dataset).',
                      'default': -1},
                     {'key': 'learning_rate',
                      'help': 'The initial learning rate for the optimizer.',
                      'default': 5e-05},
                     {'key': 'lr_scheduler_type',
                      'help': 'The learning rate scheduler type to use. See `SchedulerType` for all possible '
                              'values.',
                      'default': 'linear'},
                     {'key': 'lr_scheduler_kwargs',
                      'help': 'The extra arguments for the lr_scheduler. See the documentation of each '
                              'scheduler for possible values.',
                      'default': None},
                     {'key': 'warmup_steps',
                      'help': 'Number of steps for a linear warmup from 0 to `learning_rate`. Can be an '
                              'integer (exact steps) or a float in [0, 1) (ratio of total steps).',
                      'default': 0},
                     {'key': 'optim',
                      'help': 'The optimizer to use. See `OptimizerNames` for the complete list.',
                      'default': 'adamw_torch_fused'},
                     {'key': 'optim_args',
                      'help': 'Optional arguments supplied to optimizers such as AnyPrecisionAdamW, '
                              'AdEMAMix, and GaLore.',
                      'default': None},
                     {'key': 'weight_decay',
                      'help': 'Weight decay coefficient applied by the optimizer. Automatically excluded '
                              'from bias and LayerNorm parameters.',
                      'default': 0.0},
                     {'key': 'adam_beta1',
                      'help': 'The exponential decay rate for the first moment estimates (momentum) in '
                              'Adam-based optimizers.',
                      'default': 0.9},
                     {'key': 'adam_beta2',
                      'help': 'The exponential decay rate for the second moment estimates (variance) in '
                              'Adam-based optimizers.',
                      'default': 0.999},
                     {'key': 'adam_epsilon',
                      'help': 'Epsilon value for numerical stability in Adam-based optimizers.',
                      'default': 1e-08},
                     {'key': 'optim_target_modules',
                      'help': 'The target modules to optimize. Currently used for the GaLore and APOLLO '
                              'algorithms.',
                      'default': None},
                     {'key': 'gradient_accumulation_steps',
                      'help': 'Number of update steps to accumulate gradients before performing a '
                              'backward/update pass. Effective batch size = per_device_train_batch_size * '
                              'num_devices * gradient_accumulation_steps.',
                      'default': 1},
                     {'key': 'average_tokens_across_devices',
                      'help': 'Whether or not to average tokens across devices. If enabled, will use '
                              'all_reduce to synchronize num_tokens_in_batch for precise loss calculation. '
                              'Reference: https://github.com/huggingface/transformers/issues/34242',
                      'default': True},
                     {'key': 'max_grad_norm',
                      'help': 'Maximum gradient norm for gradient clipping. Set to 0 to disable.',
                      'default': 1.0},
                     {'key': 'label_smoothing_factor',
                      'help': 'Label smoothing factor to prevent overconfidence. Zero means no smoothing.',
                      'default': 0.0},
                     {'key': 'bf16',
                      'help': 'Enable bfloat16 (BF16) mixed precision training. Generally preferred over '
                              'FP16 due to better numerical stability.',
                      'default': False},
                     {'key': 'fp16',
                      'help': 'Enable float16 (FP16) mixed precision training. Consider using BF16 instead '
                              'if your hardware supports it.',
                      'default': False},
                     {'key': 'bf16_full_eval',
                      'help': 'Use full BF16 precision for evaluation (not just mixed precision). Faster and '
                              'saves memory.',
                      'default': False},
                     {'key': 'fp16_full_eval',
                      'help': 'Use full FP16 precision for evaluation (not just mixed precision). Faster and '
                              'saves memory.',
                      'default': False},
                     {'key': 'tf32',
                      'help': 'Enable TF32 mode on Ampere and newer GPUs. Provides up to 8x speedup with '
                              'negligible accuracy loss.',
                      'default': None},
                     {'key': 'gradient_checkpointing',
                      'help': 'Enable gradient checkpointing to trade compute for memory. Reduces memory at '
                              'the cost of ~20%% slower training.',
                      'default': False},
                     {'key': 'gradient_checkpointing_kwargs',
                      'help': 'Keyword arguments passed to `gradient_checkpointing_enable()`. '
                              '`every_n_layers` checkpoints only every n-th decoder layer instead of all of '
                              'them; `1` is the usual all-or-nothing behavior, and larger values give some '
                              'memory back to speed. `offload` holds the saved activations in pinned host '
                              'memory, which frees device memory and makes the step slower. Any other key is '
                              'forwarded to `torch.utils.checkpoint.checkpoint`.',
                      'default': None},
                     {'key': 'torch_compile',
                      'help': 'Compile the model using `torch.compile()` for faster training.',
                      'default': False},
                     {'key': 'torch_compile_backend',
                      'help': 'Backend for `torch.compile()`. If set, automatically enables `torch_compile`.',
                      'default': None},
                     {'key': 'torch_compile_mode',
                      'help': 'Compilation mode for `torch.compile()`. If set, automatically enables '
                              '`torch_compile`.',
                      'default': None},
                     {'key': 'use_liger_kernel',
                      'help': 'Enable Liger Kernel optimizations. Increases throughput by ~20%% and reduces '
                              'memory by ~60%%.',
                      'default': False},
                     {'key': 'liger_kernel_config',
                      'help': 'Configuration for Liger Kernel. Passed as kwargs to '
                              '`_apply_liger_kernel_to_instance()`. If None, uses default configuration.',
                      'default': None},
                     {'key': 'use_cache',
                      'help': 'Whether or not to use cache for the model For training, this is usually not '
                              'needed apart from some PEFT methods that uses `past_key_values`.',
                      'default': False},
                     {'key': 'neftune_noise_alpha',
                      'help': 'If not None, activates NEFTune noise embeddings. Can drastically improve '
                              'performance for instruction fine-tuning. Typical range: [5.0, 15.0].',
                      'default': None},
                     {'key': 'torch_empty_cache_steps',
                      'help': 'Number of steps to wait before calling `torch.<device>.empty_cache()`. Helps '
                              'avoid CUDA OOM at a cost of ~10%% slower performance. If None, cache will not '
                              'be emptied.',
                      'default': None},
                     {'key': 'auto_find_batch_size',
                      'help': 'Whether to find a training batch size that will fit into memory automatically '
                              'through exponential decay, avoiding CUDA Out-of-Memory errors. The evaluation '
                              'batch size is not adjusted.',
                      'default': False},
                     {'key': 'logging_strategy',
                      'help': "The logging strategy to adopt during training. Options: 'no', 'epoch', "
                              "'steps'.",
                      'default': 'steps'},
                     {'key': 'logging_steps',
                      'help': 'Log every X updates steps. Should be an integer or a float in range `[0,1)`. '
                              'If smaller than 1, will be interpreted as ratio of total training steps.',
                      'default': 500},
                     {'key': 'logging_first_step',
                      'help': 'Whether to log the first `global_step` or not.',
                      'default': False},
                     {'key': 'log_on_each_node',
                      'help': 'When doing a multinode distributed training, whether to log once per node or '
                              'just once on the main node.',
                      'default': True},
                     {'key': 'logging_nan_inf_filter',
                      'help': 'Filter out NaN and Inf losses when logging. Does not affect gradient '
                              'computation, only logging.',
                      'default': True},
                     {'key': 'include_num_input_tokens_seen',
                      'help': 'Whether to track the number of input tokens seen. Must be one of [`all`, '
                              '`non_padding`, `no`] or a boolean value which map to `all` or `no`',
                      'default': 'no'},
                     {'key': 'log_level',
                      'help': "Logging level for the main process. Options: 'debug', 'info', 'warning', "
                              "'error', 'critical', 'passive'.",
                      'default': 'passive'},
                     {'key': 'log_level_replica',
                      'help': 'Logging level for replica processes in distributed training. Same options as '
                              '`log_level`.',
                      'default': 'warning'},
                     {'key': 'disable_tqdm',
                      'help': 'Disable tqdm progress bars. Defaults to True if log_level is warning or '
                              'lower.',
                      'default': None},
                     {'key': 'report_to',
                      'help': "The list of integrations to report the results and logs to. Use 'all' for all "
                              "installed integrations, 'none' for no integrations.",
                      'default': 'none'},
                     {'key': 'run_name',
                      'help': 'An optional descriptor for the run. Notably used for trackio, wandb, mlflow '
                              'comet and swanlab logging.',
                      'default': None},
                     {'key': 'project',
                      'help': 'The name of the project to use for logging. Currently, only used by Trackio.',
                      'default': 'huggingface'},
                     {'key': 'trackio_space_id',
                      'help': 'Hugging Face Space id for live Gradio-based Trackio logging (read/write '
                              "Bucket access). Use 'username/reponame', 'orgname/reponame', or 'reponame' "
                              "(current user's namespace). None: log only locally, no Space. Prefer "
                              'trackio_static_space_id for stable post-training dashboard links. Public '
                              'unless hub_private_repo=True or org default.',
                      'default': None},
                     {'key': 'trackio_bucket_id',
                      'help': 'Optional HF Bucket id when using a Trackio Space; if unset, Trackio picks a '
                              'default.',
                      'default': None},
                     {'key': 'trackio_static_space_id',
                      'help': 'Static read-only Trackio Space over the Bucket (stable model-card links). '
                              'False: no static sync on Hub push and no freeze after training. None/str: '
                              'allow static Space; for local-only logging, Hub push runs sync(static); after '
                              'training, freeze runs only if trackio_space_id was set (Gradio Space). str '
                              'sets explicit static Space id. Public unless hub_private_repo=True or org '
                              'default.',
                      'default': None},
                     {'key': 'eval_strategy',
                      'help': "When to run evaluation. Options: 'no', 'steps', 'epoch'.",
                      'default': 'no'},
                     {'key': 'eval_steps',
                      'help': "Number of update steps between evaluations if `eval_strategy='steps'`. "
                              'Defaults to `logging_steps` if not set. Should be an integer or a float in '
                              'range `[0,1)`. If smaller than 1, will be interpreted as ratio of total '
                              'training steps.',
                      'default': None},
                     {'key': 'eval_delay',
                      'help': 'Number of epochs or steps to wait for before the first evaluation can be '
                              'performed, depending on the eval_strategy.',
                      'default': 0},
                     {'key': 'per_device_eval_batch_size',
                      'help': 'The batch size per device (GPU/TPU core/CPU) for evaluation.',
                      'default': 8},
                     {'key': 'prediction_loss_only',
                      'help': 'When performing evaluation and generating predictions, only returns the loss.',
                      'default': False},
                     {'key': 'eval_on_start',
                      'help': 'Whether to run through the entire `evaluation` step at the very beginning of '
                              'training as a sanity check.',
                      'default': False},
                     {'key': 'eval_do_concat_batches',
                      'help': 'Whether to recursively concat inputs/losses/labels/predictions across '
                              'batches. If `False`, will instead store them as lists, with each batch kept '
                              'separate.',
                      'default': True},
                     {'key': 'eval_use_gather_object',
                      'help': 'Whether to run recursively gather object in a nested list/tuple/dictionary of '
                              'objects from all devices.',
                      'default': False},
                     {'key': 'eval_accumulation_steps',
                      'help': 'Number of predictions steps to accumulate the output tensors for, before '
                              'moving the results to the CPU. If unset, predictions are accumulated on the '
                              'accelerator before being moved to the CPU.',
                      'default': None},
                     {'key': 'include_for_metrics',
                      'help': "Include additional data in the `compute_metrics` function. Options: 'inputs', "
                              "'loss'."},
                     {'key': 'batch_eval_metrics',
                      'help': 'Break eval metrics calculation into batches to save memory.',
                      'default': False},
                     {'key': 'save_only_model',
                      'help': 'Save only model weights, not optimizer/scheduler/RNG state. Prevents resuming '
                              'training from checkpoint.',
                      'default': False},
                     {'key': 'save_strategy',
                      'help': "The checkpoint save strategy to adopt during training. Options: 'no', "
                              "'epoch', 'steps', 'best'.",
                      'default': 'steps'},
                     {'key': 'save_steps',
                      'help': 'Save checkpoint every X updates steps. Should be an integer or a float in '
                              'range `[0,1)`. If smaller than 1, will be interpreted as ratio of total '
                              'training steps.',
                      'default': 500},
                     {'key': 'save_on_each_node',
                      'help': 'When doing multi-node distributed training, whether to save models and '
                              'checkpoints on each node, or only on the main one',
                      'default': False},
                     {'key': 'save_total_limit',
                      'help': 'Maximum number of checkpoints to keep. Deletes older checkpoints in '
                              '`output_dir`. The best checkpoint is always retained when '
                              '`load_best_model_at_end=True`.',
                      'default': None},
                     {'key': 'enable_jit_checkpoint',
                      'help': 'Enable JIT checkpointing on SIGTERM signal for graceful termination on '
                              "preemptible workloads. Configure your orchestrator's graceful shutdown period "
                              'accordingly.',
                      'default': False},
                     {'key': 'push_to_hub',
                      'help': 'Whether or not to push the model to the Hub every time the model is saved.',
                      'default': False},
                     {'key': 'hub_token',
                      'help': 'The token to use to push the model to the Hub. Defaults to the token from `hf '
                              'auth login`.',
                      'default': None},
                     {'key': 'hub_private_repo',
                      'help': 'Whether to make the repo private. If `None` (default), the repo will be '
                              "public unless the organization's default is private. This value is ignored if "
                              'the repo already exists. If reporting to Trackio Spaces created or synced '
                              '(including on Hub push when `trackio_space_id` is None) use the same logic '
                              'for whether the Space is private.',
                      'default': None},
                     {'key': 'hub_model_id',
                      'help': 'The name of the repository to keep in sync with the local `output_dir`.',
                      'default': None},
                     {'key': 'hub_strategy',
                      'help': "Defines what and when to push to Hub. Options: 'end', 'every_save', "
                              "'checkpoint', 'all_checkpoints'.",
                      'default': 'every_save'},
                     {'key': 'hub_always_push',
                      'help': "Unless `True`, the Trainer will skip pushes if the previous one wasn't "
                              'finished yet.',
                      'default': False},
                     {'key': 'hub_revision',
                      'help': 'The revision to use when pushing to the Hub. Can be a branch name, a tag, or '
                              'a commit hash.',
                      'default': None},
                     {'key': 'load_best_model_at_end',
                      'help': 'Load the best checkpoint at the end of training. Requires `eval_strategy` to '
                              'be set.',
                      'default': False},
                     {'key': 'metric_for_best_model',
                      'help': 'Metric to use for comparing models when `load_best_model_at_end=True`. '
                              "Defaults to 'loss'.",
                      'default': None},
                     {'key': 'greater_is_better',
                      'help': 'Whether higher metric values are better. Defaults based on '
                              '`metric_for_best_model`.',
                      'default': None},
                     {'key': 'ignore_data_skip',
                      'help': 'When resuming training, skip fast-forwarding through the dataset to reach the '
                              'previous state. If True, training starts from the beginning of the dataset.',
                      'default': False},
                     {'key': 'restore_callback_states_from_checkpoint',
                      'help': 'Whether to restore the callback states from the checkpoint. If `True`, will '
                              'override callbacks passed to the `Trainer` if they exist in the checkpoint.',
                      'default': False},
                     {'key': 'full_determinism',
                      'help': 'Whether to call enable_full_determinism instead of set_seed for '
                              'reproducibility in distributed training. Important: this will negatively '
                              'impact the performance, so only use it for debugging.',
                      'default': False},
                     {'key': 'seed',
                      'help': 'Random seed that will be set at the beginning of training.',
                      'default': 42},
                     {'key': 'data_seed',
                      'help': 'Random seed to be used with data samplers. If not set, uses the same seed as '
                              '`seed`.',
                      'default': None},
                     {'key': 'use_cpu',
                      'help': 'Whether or not to use cpu. If set to False, we will use the available torch '
                              'device/backend.',
                      'default': False},
                     {'key': 'accelerator_config',
                      'help': 'Configuration for the internal Accelerate integration. Can be a path to a '
                              'JSON config file or a dict.',
                      'default': None},
                     {'key': 'parallelism_config',
                      'help': 'Parallelism configuration for the training run. Requires Accelerate `1.10.1`.',
                      'default': None},
                     {'key': 'dataloader_drop_last',
                      'help': 'Drop the last incomplete batch if it is not divisible by the batch size.',
                      'default': False},
                     {'key': 'dataloader_num_workers',
                      'help': 'Number of subprocesses to use for data loading (PyTorch only). 0 means that '
                              'the data will be loaded in the main process.',
                      'default': 0},
                     {'key': 'dataloader_pin_memory',
                      'help': 'Whether or not to pin memory for DataLoader.',
                      'default': True},
                     {'key': 'dataloader_persistent_workers',
                      'help': 'If True, the data loader will not shut down the worker processes after a '
                              'dataset has been consumed once. This allows to maintain the workers Dataset '
                              'instances alive. Can potentially speed up training, but will increase RAM '
                              'usage.',
                      'default': False},
                     {'key': 'dataloader_prefetch_factor',
                      'help': 'Number of batches loaded in advance by each worker. 2 means there will be a '
                              'total of 2 * num_workers batches prefetched across all workers.',
                      'default': None},
                     {'key': 'dataloader_multiprocessing_context',
                      'help': "The multiprocessing start method to use for data loading workers ('fork', "
                              "'spawn', or 'forkserver'). Defaults to PyTorch's default, except on MPS with "
                              "dataloader_num_workers > 1, where it defaults to 'fork'. Use 'spawn' when "
                              'streaming from sources whose objects are not fork-safe (e.g. HDFS via '
                              "pyarrow). Under 'spawn', any custom collate_fn / dataset code must be "
                              'importable at module level (no lambdas/closures).',
                      'default': None},
                     {'key': 'dataloader_in_order',
                      'help': 'If True (default), the data loader yields batches in the order workers were '
                              'dispatched. Set to False to yield batches as soon as they are ready, reducing '
                              'tail latency for IterableDataset streaming workloads. Requires PyTorch >= '
                              '2.6.',
                      'default': True},
                     {'key': 'remove_unused_columns',
                      'help': 'Whether or not to automatically remove the columns unused by the model '
                              'forward method.',
                      'default': True},
                     {'key': 'label_names',
                      'help': 'The list of keys in your dictionary of inputs that correspond to the labels.',
                      'default': None},
                     {'key': 'train_sampling_strategy',
                      'help': "Sampler for training: 'random' (default), 'sequential', 'group_by_length', or "
                              "'batch_rebalance'.",
                      'default': 'random'},
                     {'key': 'length_column_name',
                      'help': 'Column name for precomputed lengths. Ignored unless `train_sampling_strategy` '
                              "is 'group_by_length' or 'batch_rebalance'.",
                      'default': 'length'},
                     {'key': 'ddp_find_unused_parameters',
                      'help': 'When using distributed training, the value of the flag '
                              '`find_unused_parameters` passed to `DistributedDataParallel`.',
                      'default': None},
                     {'key': 'ddp_bucket_cap_mb',
                      'help': 'When using distributed training, the value of the flag `bucket_cap_mb` passed '
                              'to `DistributedDataParallel`.',
                      'default': None},
                     {'key': 'ddp_broadcast_buffers',
                      'help': 'When using distributed training, the value of the flag `broadcast_buffers` '
                              'passed to `DistributedDataParallel`.',
                      'default': None},
                     {'key': 'ddp_static_graph',
                      'help': 'When using distributed training, the value of the flag `static_graph` passed '
                              'to `DistributedDataParallel`.',
                      'default': None},
                     {'key': 'ddp_backend',
                      'help': "The backend to use for distributed training. Must be one of 'nccl', 'mpi', "
                              "'xccl', 'gloo', 'hccl'.",
                      'default': None},
                     {'key': 'ddp_timeout',
                      'help': 'The timeout for `torch.distributed.init_process_group` calls (in seconds).',
                      'default': 1800},
                     {'key': 'fsdp',
                      'help': 'Enable PyTorch Fully Sharded Data Parallel (FSDP) for distributed training. '
                              'Pass `--fsdp` (or `fsdp=True`) to turn FSDP on.',
                      'default': None},
                     {'key': 'fsdp_config',
                      'help': 'Tuning for FSDP (used only when `fsdp` is enabled). Either a path to a JSON '
                              'config file (e.g., `fsdp_config.json`) or an already loaded dict.',
                      'default': None},
                     {'key': 'deepspeed',
                      'help': 'Enable DeepSpeed integration. Value is a path to a JSON config file or a '
                              'dict.',
                      'default': None},
                     {'key': 'debug',
                      'help': "Enable one or more debug features. Options: 'underflow_overflow' (detect "
                              "overflow in model I/O), 'tpu_metrics_debug' (print TPU metrics).",
                      'default': ''},
                     {'key': 'skip_memory_metrics',
                      'help': 'Whether to skip adding memory profiler reports to metrics. Skipped by default '
                              'because it slows down training.',
                      'default': True},
                     {'key': 'do_train',
                      'help': 'Whether to run training. Not directly used by Trainer; intended for '
                              'training/evaluation scripts.',
                      'default': False},
                     {'key': 'do_eval',
                      'help': 'Whether to run evaluation. Not directly used by Trainer; intended for '
                              'training/evaluation scripts.',
                      'default': False},
                     {'key': 'do_predict',
                      'help': 'Whether to run predictions on the test set. Not directly used by Trainer; '
                              'intended for training/evaluation scripts.',
                      'default': False},
                     {'key': 'resume_from_checkpoint',
                      'help': 'Path to a folder with a valid checkpoint for your model. Not directly used by '
                              'Trainer; intended for training/evaluation scripts.',
                      'default': None},
                     {'key': 'local_rank',
                      'help': 'When using torch.distributed.launch (Deprecated), it will pass `local_rank` '
                              'in the script, so we need this for the parser. To get the local rank, prefer '
                              'using the property `local_process_index`',
                      'default': -1})},
         {'class': 'SpatialModelConfig',
          'module': 'training.models',
          'fields': ({'key': 'language_lora',
                      'help': "LoRA on the language model's linear layers.",
                      'default': True},
                     {'key': 'vision_lora',
                      'help': "LoRA on the vision encoder's linear layers.",
                      'default': True},
                     {'key': 'vision_lora_r', 'help': 'LoRA rank of the vision layers.', 'default': 4},
                     {'key': 'vision_lora_alpha', 'help': 'LoRA alpha of the vision layers.', 'default': 8},
                     {'key': 'freeze_vision',
                      'help': 'Full fine-tuning: freeze the vision encoder.',
                      'default': False},
                     {'key': 'init_adapter_path',
                      'help': 'LoRA adapter that initialises the policy (e.g. the SFT cold start).',
                      'default': None})},
         {'class': 'ModelConfig',
          'module': 'trl.trainer.model_config',
          'fields': ({'key': 'model_name_or_path',
                      'help': 'Model checkpoint for weights initialization.',
                      'default': None},
                     {'key': 'model_revision',
                      'help': 'Specific model version to use. It can be a branch name, a tag name, or a '
                              'commit id.',
                      'default': 'main'},
                     {'key': 'dtype',
                      'help': 'Override the default `torch.dtype` and load the model under this dtype. It '
                              "defaults to `'float32'`.",
                      'default': 'float32'},
                     {'key': 'attn_implementation',
                      'help': 'Which attention implementation to use. You can run '
                              '`--attn_implementation=flash_attention_2`, in which case you must install '
                              'this manually by running `pip install flash-attn --no-build-isolation`.',
                      'default': None},
                     {'key': 'use_peft', 'help': 'Whether to use PEFT for training.', 'default': False},
                     {'key': 'lora_r', 'help': 'LoRA R value.', 'default': 16},
                     {'key': 'lora_alpha', 'help': 'LoRA alpha.', 'default': 32},
                     {'key': 'lora_dropout', 'help': 'LoRA dropout.', 'default': 0.05},
                     {'key': 'lora_target_modules', 'help': 'LoRA target modules.', 'default': None},
                     {'key': 'lora_target_parameters',
                      'help': 'List of target parameters for LoRA.',
                      'default': None},
                     {'key': 'lora_modules_to_save',
                      'help': 'Model layers to unfreeze & train.',
                      'default': None},
                     {'key': 'lora_task_type',
                      'help': "Task type to pass for LoRA (use 'SEQ_CLS' for reward modeling).",
                      'default': 'CAUSAL_LM'},
                     {'key': 'use_rslora',
                      'help': 'Whether to use Rank-Stabilized LoRA, which sets the adapter scaling factor to '
                              '`lora_alpha/√r`, instead of the original default value of `lora_alpha/r`.',
                      'default': False},
                     {'key': 'use_dora',
                      'help': 'Enable Weight-Decomposed Low-Rank Adaptation (DoRA). This technique '
                              'decomposes the updates of the weights into two parts, magnitude and '
                              'direction. Direction is handled by normal LoRA, whereas the magnitude is '
                              'handled by a separate learnable parameter. This can improve the performance '
                              'of LoRA, especially at low ranks. Right now, DoRA only supports linear and '
                              'Conv2D layers. DoRA introduces a bigger overhead than pure LoRA, so it is '
                              'recommended to merge weights for inference.',
                      'default': False},
                     {'key': 'load_in_8bit',
                      'help': 'Whether to use 8 bit precision for the base model. Works only with LoRA.',
                      'default': False},
                     {'key': 'load_in_4bit',
                      'help': 'Whether to use 4 bit precision for the base model. Works only with LoRA.',
                      'default': False},
                     {'key': 'bnb_4bit_quant_type', 'help': 'Quantization type.', 'default': 'nf4'},
                     {'key': 'use_bnb_nested_quant',
                      'help': 'Whether to use nested quantization.',
                      'default': False},
                     {'key': 'bnb_4bit_quant_storage',
                      'help': 'Quantization storage dtype',
                      'default': None})})}
# fmt: on
