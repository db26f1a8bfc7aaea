"""`SpatialGRPOTrainer`: TRL's `GRPOTrainer` plus box entropies, grounding metrics and the task scheduler.

What it adds to TRL (nothing else changes):

* Every reward function receives `box_entropies`: per completion a dict `{"tokens": [...],
  "entropies": [...]}` with the decoded tokens (their concatenation is the completion text) and
  each token's full-vocabulary entropy in nats, NaN except at the digit tokens of the coordinates
  of the valid reasoning-segment boxes. Where the entropies come from (see `training.entropy`):
  the generation hook (transformers generation), TRL's own no-grad log-prob pass (vLLM with
  importance-sampling correction or several iterations per batch, temperature 1), or one selective
  no-grad pass; each with the dropout modules (LoRA dropout) switched off, so the entropies are the
  deterministic policy's. `None` per completion when the run does not use them.
* Per-step metrics: answer accuracy (`grounding/answer_accuracy`), the mean coordinate-digit
  entropy in nats (`grounding/coordinate_entropy`), length stops (`truncation/length_stopped`: the
  share of completions that hit `max_completion_length` without an end-of-turn token;
  `truncation/length_stopped_reward` and `truncation/length_stopped_positive`: their mean total
  reward and the share of them rewarded above 0; `truncation/masked_from_loss`: the share left out of
  the loss by `mask_truncated_completions`) and, with the scheduler, the task weights
  (`scheduler/weight/<task_type>`). TRL logs each reward function and `completions/clipped_ratio`
  (the length stops again); the rewards log their components through `log_metric` (for SpatialCORE:
  answer, format, spatial, precision, recall, matched IoU, boxes per completion, share with boxes,
  mean box entropy H, and `spatialcore/truncated`, the share without `</think>`, which is not the
  share of length stops).
* The DGE task scheduler: the dataloader hands out placeholder slots (`ScheduledSlots`) and the rows
  of generation batch `k` are drawn by `TaskAdaptiveSampler` when that batch is generated, after
  batches `0 .. k-1` were scored, whatever the dataloader fetched ahead; after each generation batch
  the accuracy of every completion (gathered from all ranks, in rank order) updates the
  `TaskScheduler`; its state and `k` are written into each checkpoint and restored on resume, so an
  interrupted and resumed run draws the same rows as an uninterrupted one.

It overrides these private methods of TRL 1.16's `GRPOTrainer` (each docstring says which TRL
behaviour it replaces or extends; `tests/training/test_trl_overrides.py` fails when TRL changes a
signature or a call order they rely on): `get_train_dataloader`, `_get_train_sampler`, `_tokenize_prompts`,
`_generate_single_turn`, `_get_per_token_logps_and_entropies`, `_generate_and_score_completions` and
`_calculate_rewards`; and the public `train` of transformers' `Trainer`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from accelerate.utils import gather_object
from datasets import Dataset
from torch import nn
from transformers.trainer_utils import TrainOutput, get_last_checkpoint
from trl import GRPOConfig, GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import pad

from training.data import task_types_of
from training.entropy import (
    CompletionTokenDecoder,
    GenerationEntropyRecorder,
    coordinate_token_indices,
    dropout_disabled,
    scatter_entropies,
    selective_entropy_pass,
)
from training.rewards.dge import score_dge
from training.rewards.parsing import (
    allowed_letters,
    completion_text,
    gold_option_letter,
    parse_spatialcore,
    parse_spatialthinker,
)
from training.rewards.spatialthinker import answer_matches
from training.scheduler import (
    SLOT_KEY,
    ScheduledSlots,
    TaskAdaptiveSampler,
    TaskScheduler,
    TaskSchedulerCallback,
    is_slot_batch,
    load_task_scheduler_state,
)

logger = logging.getLogger(__name__)

ENTROPY_SOURCES = ("auto", "generation", "logprob_pass", "selective_pass", "none")


def spatialcore_answer_accuracy(text: str, row: dict) -> float:
    """1.0 when the single letter after the single `</think>` is the gold letter, else 0.0.

    >>> spatialcore_answer_accuracy("boxes</think>B", {"answer": "B", "options": ["x", "y"]})
    1.0
    """
    options = list(row.get("options") or [])
    gold = gold_option_letter(row.get("answer"), len(options))
    letter = parse_spatialcore(text).answer_letter
    return 1.0 if letter is not None and letter in allowed_letters(len(options)) and letter == gold else 0.0


def spatialthinker_answer_accuracy(text: str, row: dict) -> float:
    """1.0 when the `<answer>` matches the gold option text (or its letter), else 0.0."""
    answer = parse_spatialthinker(text).answer_text
    return (
        1.0 if answer is not None and answer_matches(answer, str(row.get("answer_option_text", ""))) else 0.0
    )


def dge_answer_accuracy(text: str, row: dict) -> float:
    """Exact letter match, or the mean relative accuracy of a numeric answer."""
    return score_dge(
        text,
        answer=row.get("answer"),
        options=row.get("options"),
        numeric_answer=row.get("numeric_answer"),
        unit=row.get("unit"),
        task_type=row.get("task_type"),
    ).accuracy


ACCURACY_FUNCTIONS: dict[str, Callable[[str, dict], float]] = {
    "spatialcore": spatialcore_answer_accuracy,
    "spatialthinker": spatialthinker_answer_accuracy,
    "dge": dge_answer_accuracy,
}


class SpatialGRPOTrainer(GRPOTrainer):
    """GRPO with box entropies for the rewards, grounding metrics and task-adaptive sampling.

    Args:
        *args, **kwargs: as for `trl.GRPOTrainer`.
        prompt_format (`str`, *optional*, defaults to `"spatialcore"`): completion grammar of the run
            (`spatialcore`, `spatialthinker`, `dge`); picks the answer-accuracy function.
        box_entropy_source (`str`, *optional*, defaults to `"auto"`): `auto` (entropies for the
            `spatialcore` format from the cheapest source), `generation`, `logprob_pass`,
            `selective_pass`, or `none` (rewards get `box_entropies=None`).
        task_scheduler ([`TaskScheduler`], *optional*): draw training rows by task type with its weights.
        task_type_column (`str`, *optional*, defaults to `"task_type"`): column holding the task type.
    """

    args: GRPOConfig  # TRL builds the trainer from its GRPOConfig

    def __init__(
        self,
        *args,
        prompt_format: str = "spatialcore",
        box_entropy_source: str = "auto",
        task_scheduler: TaskScheduler | None = None,
        task_type_column: str = "task_type",
        **kwargs,
    ):
        if prompt_format not in ACCURACY_FUNCTIONS:
            raise ValueError(
                f"unknown prompt format {prompt_format!r}; expected one of {', '.join(ACCURACY_FUNCTIONS)}"
            )
        if box_entropy_source not in ENTROPY_SOURCES:
            raise ValueError(
                f"box_entropy_source must be one of {ENTROPY_SOURCES}, got {box_entropy_source!r}"
            )
        self.prompt_format = prompt_format
        self.requested_entropy_source = box_entropy_source
        self.task_scheduler = task_scheduler
        self.task_type_column = task_type_column
        self.accuracy_function = ACCURACY_FUNCTIONS[prompt_format]
        self._generation_entropies: list[list[float]] | None = None
        self._logprob_pass_entropies: torch.Tensor | None = None
        self._capture_logprob_pass = False
        self._last_prompt_batch: tuple | None = None
        self.chunks_consumed = 0
        super().__init__(*args, **kwargs)
        self.token_decoder = CompletionTokenDecoder(self.processing_class)
        self.entropy_source = self._resolve_entropy_source()
        logger.info("box entropies for the rewards: %s", self.entropy_source)
        self.task_sampler: TaskAdaptiveSampler | None = None
        if task_scheduler is not None:
            num_generations, generation_batch = self.num_generations, self.args.generation_batch_size
            assert num_generations is not None and generation_batch is not None  # GRPOConfig resolves both
            self.task_sampler = TaskAdaptiveSampler(
                task_types_of(self._training_rows(), task_type_column),
                task_scheduler,
                mini_repeat_count=num_generations,
                batch_size=generation_batch // num_generations,
                repeat_count=self.num_iterations * self._steps_per_generation(),
                seed=self.args.seed,
            )
            self.add_callback(TaskSchedulerCallback(task_scheduler, lambda: self.chunks_consumed))

    # ------------------------------------------------------------------ set-up

    def _steps_per_generation(self) -> int:
        """`steps_per_generation` of the config (`GRPOConfig.__post_init__` resolves its `None`)."""
        steps = self.args.steps_per_generation
        assert steps is not None
        return steps

    def _training_rows(self) -> Dataset:
        """`train_dataset`, a `datasets.Dataset` of rows (what the task scheduler draws from by index)."""
        return cast(Dataset, self.train_dataset)

    def _policy(self) -> nn.Module:
        """The model being trained (`Trainer` sets it when built; its type also allows `None`)."""
        if self.model is None:
            raise RuntimeError("the trainer has no model")
        return self.model

    def _old_logprob_pass_runs(self) -> bool:
        generate_every = self._steps_per_generation() * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    def _resolve_entropy_source(self) -> str:
        requested = self.requested_entropy_source
        transformers_generation = not self.use_vllm and not self.use_transformers_continuous_batching
        logprob_pass_usable = self._old_logprob_pass_runs() and math.isclose(self.temperature, 1.0)
        custom_rollout = self.rollout_func is not None or bool(self.tools)
        if requested == "none" or (requested == "auto" and self.prompt_format != "spatialcore"):
            return "none"
        if requested == "auto":
            if transformers_generation and not custom_rollout:
                return "generation"
            return "logprob_pass" if logprob_pass_usable and not custom_rollout else "selective_pass"
        if requested == "generation" and (not transformers_generation or custom_rollout):
            raise ValueError(
                "box_entropy_source='generation' needs transformers generation (no vLLM, no custom rollout)"
            )
        if requested == "logprob_pass" and not logprob_pass_usable:
            raise ValueError(
                "box_entropy_source='logprob_pass' needs TRL's no-grad log-prob pass (vLLM importance "
                "sampling correction or several iterations per batch) and temperature 1"
            )
        return requested

    def get_train_dataloader(self):
        """TRL's training dataloader; with the task scheduler, over `ScheduledSlots` placeholders.

        TRL builds the dataloader of generation batches from `self.train_dataset` and
        `_get_train_sampler`. With the scheduler, the dataset is swapped for `ScheduledSlots` (same
        length) for that call only, so the dataloader fetches slots, never rows: the rows are drawn
        in `_generate_and_score_completions`. Resuming then skips placeholder batches (cheap), and
        the epoch counter follows the steps as in an uninterrupted run. Without the scheduler, TRL's
        dataloader is returned unchanged.
        """
        if self.task_sampler is None:
            return super().get_train_dataloader()
        dataset = self._training_rows()
        self.train_dataset = ScheduledSlots(len(dataset))
        try:
            return super().get_train_dataloader()
        finally:
            self.train_dataset = dataset

    def _get_train_sampler(self, dataset=None):
        """Replaces TRL's `RepeatSampler` by the `TaskAdaptiveSampler` for the training slots (task scheduler only).

        TRL builds a `RepeatSampler` (each prompt `num_generations` times, batches of
        `generation_batch_size // num_generations` prompts, each batch repeated
        `num_iterations * steps_per_generation` times, seeded shuffle). The task sampler keeps that
        layout over the slots of each generation batch; the prompts are drawn by task-type weight when
        the batch is generated. Without the scheduler, or for another dataset, TRL's sampler is
        returned unchanged.
        """
        if self.task_sampler is not None and isinstance(dataset, ScheduledSlots):
            return self.task_sampler
        return super()._get_train_sampler(dataset)

    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any | dict[str, Any] | None = None,
        ignore_keys_for_eval: list[str] | None = None,
        **kwargs: Any,
    ) -> TrainOutput:
        """Train; `resume_from_checkpoint` is a checkpoint folder, or `True` / `"last"` for the newest one.

        Extends transformers' `Trainer.train`: the aliases `True`, `"last"` and `"latest"` resolve to the
        newest checkpoint of `output_dir` (a missing one is a `FileNotFoundError`, where `Trainer`
        raises a `ValueError` for `True` only), and with the task scheduler its state and the number
        of generation batches drawn come back from the checkpoint. Other keyword arguments pass through.
        """
        if resume_from_checkpoint is True:
            resume_from_checkpoint = "last"
        if isinstance(resume_from_checkpoint, str):
            output_dir = self.args.output_dir
            assert output_dir is not None  # TrainingArguments defaults it to "trainer_output"
            resume_from_checkpoint = resolve_checkpoint(output_dir, resume_from_checkpoint)
        if resume_from_checkpoint and self.task_scheduler is not None:
            consumed = load_task_scheduler_state(resume_from_checkpoint, self.task_scheduler)
            if consumed is None:
                logger.warning(
                    "checkpoint %s has no task scheduler state; starting it afresh", resume_from_checkpoint
                )
            else:
                self.chunks_consumed = consumed
                logger.info(
                    "restored the task scheduler from %s (%d batches drawn)", resume_from_checkpoint, consumed
                )
        return super().train(
            resume_from_checkpoint=resume_from_checkpoint,
            trial=trial,
            ignore_keys_for_eval=ignore_keys_for_eval,
            **kwargs,
        )

    # ------------------------------------------------------------------ capture hooks

    def _tokenize_prompts(self, prompts: list):
        """TRL's tokenisation, unchanged; keeps its `(prompt_ids, images, multimodal_fields)` for the batch.

        TRL applies the chat template and returns the prompt token ids, the images and the processor's
        multimodal fields (`pixel_values`, `image_grid_thw`, ...), then forgets them. The selective
        entropy pass (`_selective_pass`) needs them to rebuild prompt + completion inputs.
        """
        result = super()._tokenize_prompts(prompts)
        self._last_prompt_batch = result
        return result

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        """TRL's generation; with the `generation` entropy source, also records each step's entropy.

        TRL generates with vLLM, transformers continuous batching or `model.generate` and returns
        `(completion_ids, logprobs)`. With `entropy_source == "generation"` (plain transformers
        generation only) a `GenerationEntropyRecorder` hooks the unwrapped model's output head during
        that call, and the full-vocabulary entropy of every generated token is kept per completion.
        TRL generates with the model in train mode; for this source the dropout modules (LoRA
        dropout) are switched off during generation, so the recorded entropies, and the samples, are
        those of the deterministic policy (as vLLM samples). The return value is TRL's, untouched.
        """
        if self.entropy_source != "generation":
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        recorder = GenerationEntropyRecorder(self.accelerator.unwrap_model(self.model))
        with recorder, dropout_disabled(self._policy()):
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        steps = recorder.entropies()
        self._generation_entropies = [
            steps[row, : len(ids)].tolist() if row < steps.shape[0] else [math.nan] * len(ids)
            for row, ids in enumerate(completion_ids)
        ]
        return completion_ids, logprobs

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
    ):
        """TRL's log-prob pass; once per batch with the `logprob_pass` source, also keeps its entropies.

        TRL calls this for the loss, and in `_generate_and_score_completions` under `no_grad` for the
        old policy's log-probs (when generation and optimisation steps are misaligned, or for vLLM
        importance sampling) and for the reference model. With `entropy_source == "logprob_pass"` the
        first call after a batch is generated (the old-policy pass, which precedes the rewards) is run
        with `compute_entropy=True` and the dropout modules switched off (that no-grad pass then gives
        the deterministic old policy's log-probs, as the vLLM sampler has no dropout either); its
        per-token entropies are kept for the rewards, and the caller gets entropies only when it asked
        for them. Every other call is TRL's, unchanged.
        """
        if not self._capture_logprob_pass:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        self._capture_logprob_pass = False
        wanted = kwargs.pop("compute_entropy", False)
        with dropout_disabled(model):
            logps, entropies, aux_loss = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, compute_entropy=True, **kwargs
            )
        self._logprob_pass_entropies = entropies.detach().float().cpu()
        return logps, entropies if wanted else None, aux_loss

    def _generate_and_score_completions(self, inputs):
        """TRL's generate-and-score step, between resets of the per-batch entropy state.

        TRL generates the completions of one generation batch, computes the old/reference log-probs,
        calls `_calculate_rewards` and the advantages. Before it, in training with the task scheduler,
        the batch's `ScheduledSlots` placeholders become the rows drawn for this generation batch
        (`TaskAdaptiveSampler.rows_of_chunk`: the scheduler then holds the scores of every earlier
        batch); the generation batches drawn in training are counted (the resume position). It arms
        the log-prob capture for the `logprob_pass` source, and clears the captured entropies and
        prompts afterwards, also when TRL raises.
        """
        if self._policy().training:
            if self.task_sampler is not None and is_slot_batch(inputs):
                inputs = self._scheduled_rows(self.task_sampler, inputs, self.chunks_consumed)
            self.chunks_consumed += 1
        self._generation_entropies = None
        self._logprob_pass_entropies = None
        self._capture_logprob_pass = self.entropy_source == "logprob_pass"
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._capture_logprob_pass = False
            self._generation_entropies = None
            self._logprob_pass_entropies = None
            self._last_prompt_batch = None

    def _scheduled_rows(
        self, sampler: TaskAdaptiveSampler, slots: list[dict], chunk_index: int
    ) -> list[dict]:
        """The training rows that the task sampler draws for the slots of generation batch `chunk_index`."""
        rows = sampler.rows_of_chunk(chunk_index)
        dataset = self._training_rows()
        return [dataset[rows[slot[SLOT_KEY]]] for slot in slots]

    # ------------------------------------------------------------------ box entropies

    def _selective_pass(
        self, completion_ids_list: list[list[int]], positions: list[list[int]]
    ) -> list[list[float]]:
        """Entropies at `positions` from one no-grad backbone pass (dropout off) with a selective output head."""
        if self._last_prompt_batch is None:
            raise RuntimeError("the selective entropy pass needs the tokenised prompts of the batch")
        prompt_ids, images, multimodal_fields = self._last_prompt_batch
        pixel_values = multimodal_fields.get("pixel_values")
        grids = multimodal_fields.get("image_grid_thw")
        token_types = multimodal_fields.get("mm_token_type_ids")
        if pixel_values is not None and not isinstance(pixel_values, torch.Tensor):
            pixel_values = torch.as_tensor(np.array(pixel_values))
        if grids is not None and not isinstance(grids, torch.Tensor):
            grids = torch.as_tensor(np.array(grids))
        images_per_row = [
            len(row_images) if row_images else 0 for row_images in (images or [None] * len(prompt_ids))
        ]
        image_offsets = np.concatenate([[0], np.cumsum(images_per_row)]).astype(int)
        patch_offsets = None
        if grids is not None:
            patch_offsets = np.concatenate([[0], np.cumsum(grids.prod(dim=-1).tolist())]).astype(int)

        device = self.accelerator.device
        model = self.accelerator.unwrap_model(self.model)
        results: list[list[float]] = [[] for _ in completion_ids_list]
        wanted_rows = [row for row, row_positions in enumerate(positions) if row_positions]
        chunk_size = max(1, self.args.per_device_train_batch_size)
        for start in range(0, len(wanted_rows), chunk_size):
            rows = wanted_rows[start : start + chunk_size]
            prompts = [torch.tensor(prompt_ids[row]) for row in rows]
            completions = [torch.tensor(completion_ids_list[row]) for row in rows]
            padded_prompts = pad(prompts, padding_value=self._tokenizer.pad_token_id, padding_side="left")
            prompt_mask = pad([torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left")
            padded_completions = pad(
                completions, padding_value=self._tokenizer.pad_token_id, padding_side="right"
            )
            completion_mask = pad(
                [torch.ones_like(c) for c in completions], padding_value=0, padding_side="right"
            )
            input_ids = torch.cat([padded_prompts, padded_completions], dim=1).to(device)
            attention_mask = torch.cat([prompt_mask, completion_mask], dim=1).to(device)
            prompt_length = padded_prompts.size(1)
            forward_kwargs: dict[str, Any] = {}
            if token_types is not None:
                row_types = pad(
                    [torch.as_tensor(np.array(token_types[row])) for row in rows],
                    padding_value=0,
                    padding_side="left",
                )
                forward_kwargs["mm_token_type_ids"] = torch.cat(
                    [row_types, torch.zeros_like(padded_completions)], dim=1
                ).to(device)
            if pixel_values is not None and grids is not None and patch_offsets is not None:
                image_slices = [range(image_offsets[row], image_offsets[row + 1]) for row in rows]
                image_indices = [index for indices in image_slices for index in indices]
                if image_indices:
                    forward_kwargs["image_grid_thw"] = grids[image_indices].to(device)
                    forward_kwargs["pixel_values"] = torch.cat(
                        [pixel_values[patch_offsets[i] : patch_offsets[i + 1]] for i in image_indices]
                    ).to(device)
            targets = [[prompt_length + position for position in positions[row]] for row in rows]
            checkpointing_kwargs = self.args.gradient_checkpointing_kwargs
            assert not isinstance(checkpointing_kwargs, str)  # TrainingArguments parses its JSON form
            with (
                self.accelerator.autocast(),
                # TRL annotates PreTrainedModel; a PEFT model forwards the checkpointing calls (TRL passes it too)
                disable_gradient_checkpointing(self._policy(), checkpointing_kwargs),  # type: ignore[arg-type]
                dropout_disabled(model),
            ):
                values = selective_entropy_pass(model, input_ids, attention_mask, targets, forward_kwargs)
            for row, row_values in zip(rows, values, strict=True):
                results[row] = row_values.tolist()
        return results

    def _box_entropies(self, texts: list[str], completion_ids_list: list[list[int]]) -> list[dict | None]:
        """`{"tokens", "entropies"}` per completion (NaN except at coordinate digits), or `None`s."""
        if self.entropy_source == "none":
            return [None] * len(texts)
        tokens_list, positions, misaligned = [], [], 0
        for text, ids in zip(texts, completion_ids_list, strict=True):
            tokens = self.token_decoder.decode(ids, expected_text=text)
            tokens_list.append(tokens)
            aligned = "".join(tokens) == text
            misaligned += not aligned
            positions.append(coordinate_token_indices(tokens) if aligned else [])
        if misaligned:
            logger.warning(
                "%d of %d completions: the decoded tokens do not reproduce the completion text, so their "
                "boxes get no entropies (no confidence credit)",
                misaligned,
                len(texts),
            )
        if self.entropy_source == "generation" and self._generation_entropies is not None:
            values = [
                [row_entropies[index] for index in row_positions]
                for row_entropies, row_positions in zip(self._generation_entropies, positions, strict=True)
            ]
        elif self.entropy_source == "logprob_pass" and self._logprob_pass_entropies is not None:
            # With `mask_truncated_completions`, TRL's pass saw length-stopped completions with their
            # attention masked out: their entropies come from the selective pass instead.
            masked = [
                self.mask_truncated_completions and self._length_stopped(ids) for ids in completion_ids_list
            ]
            values = [
                [] if masked[row] else self._logprob_pass_entropies[row, row_positions].tolist()
                for row, row_positions in enumerate(positions)
            ]
            if any(masked[row] and positions[row] for row in range(len(positions))):
                recomputed = self._selective_pass(
                    completion_ids_list,
                    [row_positions if masked[row] else [] for row, row_positions in enumerate(positions)],
                )
                values = [recomputed[row] if masked[row] else values[row] for row in range(len(values))]
        else:
            values = self._selective_pass(completion_ids_list, positions)
        return [
            {"tokens": tokens, "entropies": scatter_entropies(len(tokens), row_positions, row_values)}
            for tokens, row_positions, row_values in zip(tokens_list, positions, values, strict=True)
        ]

    # ------------------------------------------------------------------ rewards, metrics, scheduler

    def _global_mean(self, total: float, count: float) -> float:
        """Mean over all ranks of per-rank `(sum, count)`; NaN when the count is 0."""
        local = torch.tensor([total, count], dtype=torch.float64, device=self.accelerator.device)
        summed = self.accelerator.gather(local.unsqueeze(0)).sum(dim=0).tolist()
        return summed[0] / summed[1] if summed[1] > 0 else math.nan

    def _log_grounding_metrics(
        self, mode: str, box_entropies: list[dict | None], accuracy: list[float]
    ) -> None:
        """Answer accuracy and the mean coordinate-digit entropy (nats), averaged over all ranks.

        The rewards log their own components (boxes per completion, matched IoU, box uncertainty...).
        """
        values = {}
        finite_accuracy = [value for value in accuracy if math.isfinite(value)]
        values["grounding/answer_accuracy"] = self._global_mean(sum(finite_accuracy), len(finite_accuracy))
        if self.entropy_source != "none":
            digit_entropies = [
                value
                for entry in box_entropies
                if entry is not None
                for value in entry["entropies"]
                if math.isfinite(value)
            ]
            values["grounding/coordinate_entropy"] = self._global_mean(
                sum(digit_entropies), len(digit_entropies)
            )
        for name, value in values.items():
            if math.isfinite(value):  # the same on every rank: the means are global
                self._metrics[mode][name].append(value)

    def _length_stopped(self, completion_ids: list[int]) -> bool:
        """True when a completion ends without an end-of-turn or pad token (it hit the length limit).

        The same test as TRL's `completions/clipped_ratio` and `mask_truncated_completions`.
        """
        ends = (*self.eos_token_ids, self._tokenizer.pad_token_id)
        return len(completion_ids) > 0 and completion_ids[-1] not in ends

    def _log_length_stops(
        self, mode: str, completion_ids_list: list[list[int]], rewards_per_func: torch.Tensor
    ) -> None:
        """`truncation/*` metrics: length stops, their total reward, and how many the loss leaves out."""
        device = self.accelerator.device
        local = torch.tensor([float(self._length_stopped(ids)) for ids in completion_ids_list], device=device)
        stopped = self.accelerator.gather(local).bool()
        weights = self.reward_weights.to(device=rewards_per_func.device, dtype=rewards_per_func.dtype)
        total = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1).to(device)
        metrics = self._metrics[mode]
        metrics["truncation/length_stopped"].append(stopped.float().mean().item())
        masked = stopped.float().mean().item() if self.mask_truncated_completions else 0.0
        metrics["truncation/masked_from_loss"].append(masked)
        if stopped.any():
            metrics["truncation/length_stopped_reward"].append(total[stopped].mean().item())
            metrics["truncation/length_stopped_positive"].append((total[stopped] > 0).float().mean().item())

    def _answer_accuracy(self, inputs: list[dict], texts: list[str]) -> list[float]:
        values = []
        for row, text in zip(inputs, texts, strict=True):
            try:
                values.append(float(self.accuracy_function(text, row)))
            except ValueError as error:
                logger.debug("no answer accuracy for a row: %s", error)
                values.append(math.nan)
        return values

    def _update_task_scheduler(
        self, scheduler: TaskScheduler, mode: str, inputs: list[dict], accuracy: list[float]
    ) -> None:
        local = [
            (str(row[self.task_type_column]), value) for row, value in zip(inputs, accuracy, strict=True)
        ]
        for task_type, value in gather_object(local):
            scheduler.update(task_type, value)
        for task_type, weight in scheduler.weights().items():
            self._metrics[mode][f"scheduler/weight/{task_type}"].append(weight)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards with `box_entropies` as an extra column, then grounding metrics and the scheduler.

        TRL passes every column of the input rows to each reward function as a keyword argument and
        returns the `(num_completions, num_reward_funcs)` rewards gathered from all ranks. Before that
        call each row gets `box_entropies` (see `_box_entropies`); after it, the answer accuracy of
        every completion is logged (`grounding/answer_accuracy`, `grounding/coordinate_entropy`), the
        length stops and their rewards (`truncation/*`) and, in training with the scheduler, the
        accuracies update the `TaskScheduler`. TRL's rewards are returned as is.
        """
        mode = "train" if self._policy().training else "eval"
        texts = [completion_text(completion) for completion in completions]
        box_entropies = self._box_entropies(texts, completion_ids_list)
        for row, entry in zip(inputs, box_entropies, strict=True):
            row["box_entropies"] = entry
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        accuracy = self._answer_accuracy(inputs, texts)
        self._log_grounding_metrics(mode, box_entropies, accuracy)
        self._log_length_stops(mode, completion_ids_list, rewards_per_func)
        if self.task_scheduler is not None and mode == "train":
            self._update_task_scheduler(self.task_scheduler, mode, inputs, accuracy)
        return rewards_per_func


def resolve_checkpoint(output_dir: str | Path, resume_from_checkpoint: str | None) -> str | None:
    """`"last"`/`"latest"`/`"true"` -> the newest checkpoint of `output_dir`; a path is returned as is.

    Raises:
        `FileNotFoundError`: when asked for the last checkpoint and there is none, or the path is missing.
    """
    if resume_from_checkpoint is None or str(resume_from_checkpoint).lower() in ("", "none", "false"):
        return None
    if str(resume_from_checkpoint).lower() in ("last", "latest", "true"):
        last = get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None
        if last is None:
            raise FileNotFoundError(f"no checkpoint to resume from in {output_dir}")
        return last
    if not Path(resume_from_checkpoint).is_dir():
        raise FileNotFoundError(f"checkpoint folder {resume_from_checkpoint} does not exist")
    return str(resume_from_checkpoint)
