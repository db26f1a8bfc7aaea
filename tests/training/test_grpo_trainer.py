"""`SpatialGRPOTrainer` on a tiny Qwen3-VL: box entropies handed to the rewards, learning, metrics."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import TrainerCallback
from trl import GRPOConfig

from training.data import load_training_data
from training.entropy import token_entropy
from training.grpo_trainer import SpatialGRPOTrainer
from training.models import SpatialModelConfig, load_model, load_processor, prepare_policy
from training.rewards import get_reward_funcs
from training.rewards.parsing import parse_spatialcore
from training.scheduler import TaskScheduler
from training.testing import DGE_COMPLETIONS, SPATIALCORE_COMPLETIONS, scripted_generation

pytestmark = pytest.mark.slow


def _config(output_dir, **overrides) -> GRPOConfig:
    values = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 4,
        "num_generations": 2,
        "max_completion_length": 80,
        "max_steps": 1,
        "logging_steps": 1,
        "learning_rate": 1e-2,
        "beta": 0.01,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "save_strategy": "no",
        "seed": 0,
    }
    values.update(overrides)
    return GRPOConfig(**values)


def _trainer(
    model_dir,
    data_root,
    output_dir,
    reward_funcs,
    table="spatialcore_train",
    prompt_format="spatialcore",
    **kwargs,
):
    trainer_kwargs = {
        key: kwargs.pop(key) for key in list(kwargs) if key in ("box_entropy_source", "task_scheduler")
    }
    model_args = SpatialModelConfig(
        model_name_or_path=str(model_dir),
        use_peft=True,
        lora_r=8,
        lora_alpha=16,
        lora_dropout=kwargs.pop("lora_dropout", 0.0),
    )
    model, peft_config = prepare_policy(load_model(model_args), model_args)
    data = load_training_data(data_root, table, prompt_format, "qwen3_vl")
    return SpatialGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=_config(output_dir, **kwargs),
        train_dataset=data.dataset,
        processing_class=load_processor(model_dir, "qwen3_vl"),
        peft_config=peft_config,
        prompt_format=prompt_format,
        **trainer_kwargs,
    )


class EntropyProbe:
    """A reward that records `box_entropies` and the entropies of an independent full forward pass.

    The reference pass runs with the model in eval mode (no dropout), as confidence must be measured.
    """

    __name__ = "entropy_probe_reward"

    def __init__(self):
        self.trainer = None
        self.records = []

    def __call__(self, completions, prompts, completion_ids, box_entropies, **kwargs):
        processor = self.trainer.processing_class
        model = self.trainer.model
        for prompt, ids, entry, completion in zip(
            prompts, completion_ids, box_entropies, completions, strict=True
        ):
            inputs = processor.apply_chat_template(
                prompt, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
            completion_tensor = torch.tensor(ids).unsqueeze(0)
            input_ids = torch.cat([inputs["input_ids"], completion_tensor], dim=1)
            was_training = model.training
            model.eval()
            with torch.no_grad():
                logits = model(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    pixel_values=inputs["pixel_values"],
                    image_grid_thw=inputs["image_grid_thw"],
                    mm_token_type_ids=torch.cat(
                        [inputs["mm_token_type_ids"], torch.zeros_like(completion_tensor)], 1
                    ),
                ).logits
            model.train(was_training)
            prompt_length = inputs["input_ids"].shape[1]
            full = token_entropy(logits[0, prompt_length - 1 : -1]).tolist()
            self.records.append(
                {"text": completion[0]["content"], "ids": list(ids), "entry": entry, "full": full}
            )
        return [0.0] * len(completions)


def _coordinate_digits_of(text: str) -> str:
    """Digits of the coordinates of the valid reasoning-segment boxes, in order."""
    return "".join(
        text[start:end] for box in parse_spatialcore(text).grounding_boxes for start, end in box.coord_spans
    )


@pytest.mark.parametrize(
    ("source", "overrides"),
    [
        ("generation", {}),
        ("selective_pass", {}),
        # two iterations per generation batch make TRL run its own no-grad log-prob pass
        ("logprob_pass", {"num_iterations": 2}),
    ],
)
def test_rewards_get_full_forward_entropies_at_exactly_the_coordinate_digits(
    source, overrides, tiny_qwen3_vl, tiny_tables, tmp_path
):
    probe = EntropyProbe()
    trainer = _trainer(
        tiny_qwen3_vl, tiny_tables, tmp_path / "out", [probe], box_entropy_source=source, **overrides
    )
    probe.trainer = trainer
    assert trainer.entropy_source == source
    with scripted_generation(trainer.processing_class.tokenizer, SPATIALCORE_COMPLETIONS):
        trainer.train()
    assert len(probe.records) == 4
    for record in probe.records:
        tokens, entropies = record["entry"]["tokens"], record["entry"]["entropies"]
        assert "".join(tokens) == record["text"]
        measured = [index for index, value in enumerate(entropies) if math.isfinite(value)]
        # exactly the coordinate-digit tokens of the boxes the reward scores
        assert "".join(tokens[index] for index in measured) == _coordinate_digits_of(record["text"])
        for index in measured:
            assert entropies[index] == pytest.approx(record["full"][index], abs=1e-4)


def _enlarge_adapter(model, std: float) -> None:
    """Give every LoRA B matrix random weights (a trained adapter), so adapter dropout changes the logits."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)


@pytest.mark.parametrize(
    ("source", "overrides"),
    [("generation", {}), ("selective_pass", {}), ("logprob_pass", {"num_iterations": 2})],
)
def test_box_entropies_are_those_of_the_model_without_dropout(
    source, overrides, tiny_qwen3_vl, tiny_tables, tmp_path
):
    """TRL generates and scores in train mode; adapter dropout must not reach the confidence entropies."""
    probe = EntropyProbe()
    trainer = _trainer(
        tiny_qwen3_vl,
        tiny_tables,
        tmp_path / "out",
        [probe],
        box_entropy_source=source,
        lora_dropout=0.5,
        **overrides,
    )
    probe.trainer = trainer
    _enlarge_adapter(trainer.model, std=0.5)
    with scripted_generation(trainer.processing_class.tokenizer, SPATIALCORE_COMPLETIONS):
        trainer.train()
    errors = [
        abs(record["entry"]["entropies"][index] - record["full"][index])
        for record in probe.records
        for index, value in enumerate(record["entry"]["entropies"])
        if math.isfinite(value)
    ]
    assert errors and max(errors) < 1e-4, max(errors)
    assert trainer.model.training  # the trainer's own modes are left as TRL set them


def test_spatialcore_training_step_learns_and_logs_every_component(tiny_qwen3_vl, tiny_tables, tmp_path):
    trainer = _trainer(
        tiny_qwen3_vl, tiny_tables, tmp_path / "out", get_reward_funcs(["spatialcore_reward"]), max_steps=2
    )
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if "lora_" in name}
    with scripted_generation(trainer.processing_class.tokenizer, SPATIALCORE_COMPLETIONS):
        trainer.train()
    changed = [
        name
        for name, p in trainer.model.named_parameters()
        if "lora_" in name and not torch.equal(p, before[name])
    ]
    assert any("language_model" in name for name in changed)
    logged = {key for entry in trainer.state.log_history for key in entry}
    for component in (
        "answer",
        "format",
        "attempt_bonus",
        "spatial",
        "gated_spatial",
        "precision",
        "recall",
        "mean_matched_iou",
        "mean_box_entropy",
        "boxes_per_completion",
        "share_with_boxes",
        "truncated",
        "has_answer",
    ):
        assert f"spatialcore/{component}" in logged, component
    for key in (
        "rewards/spatialcore_reward/mean",
        "completions/clipped_ratio",
        "grounding/answer_accuracy",
        "grounding/coordinate_entropy",
    ):
        assert key in logged, key


def test_scheduler_moves_weight_to_the_failing_task_type(tiny_qwen3_vl, tiny_tables, tmp_path):
    # Every completion answers "A": right for the multiple-choice rows (relative_direction_image),
    # wrong for the numeric rows (absolute_distance).
    scheduler = TaskScheduler(["absolute_distance", "relative_direction_image"])
    trainer = _trainer(
        tiny_qwen3_vl,
        tiny_tables,
        tmp_path / "out",
        get_reward_funcs(["dge_reward"]),
        table="dge_tasks",
        prompt_format="dge",
        task_scheduler=scheduler,
        max_steps=2,
    )
    with scripted_generation(trainer.processing_class.tokenizer, DGE_COMPLETIONS):
        trainer.train()
    weights = scheduler.weights()
    assert weights["absolute_distance"] > weights["relative_direction_image"]
    assert sum(scheduler.attempts.values()) == 8
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert "scheduler/weight/absolute_distance" in logged


class StopAt(TrainerCallback):
    """Stop training after `step` (the interruption of a run)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True
        return control


def _scheduled_dge_run(model_dir, data_root, output_dir, stop_at=None, resume=None):
    """A DGE run with the task scheduler; returns the draws `(chunk, rows, scored completions then)`."""
    scheduler = TaskScheduler(["absolute_distance", "relative_direction_image"])
    trainer = _trainer(
        model_dir,
        data_root,
        output_dir,
        get_reward_funcs(["dge_reward"]),
        table="dge_tasks",
        prompt_format="dge",
        task_scheduler=scheduler,
        max_steps=6,
        save_strategy="steps",
        save_steps=3,
    )
    draws = []
    draw_chunk = trainer.task_sampler.draw_chunk

    def recording_draw(chunk_index):
        rows = draw_chunk(chunk_index)
        draws.append((chunk_index, rows, sum(scheduler.attempts.values())))
        return rows

    trainer.task_sampler.draw_chunk = recording_draw
    if stop_at is not None:
        trainer.add_callback(StopAt(stop_at))
    with scripted_generation(trainer.processing_class.tokenizer, DGE_COMPLETIONS):
        trainer.train(resume_from_checkpoint=resume)
    epochs = {entry["step"]: entry["epoch"] for entry in trainer.state.log_history if "loss" in entry}
    return draws, epochs


def test_scheduler_draws_after_scoring_and_resumes_bit_identical(tiny_qwen3_vl, tiny_tables, tmp_path):
    full, full_epochs = _scheduled_dge_run(tiny_qwen3_vl, tiny_tables, tmp_path / "full")
    # 6 steps, one generation batch each (2 prompts x 2 completions): batch k is drawn once the k
    # batches before it are scored, never earlier (the dataloader fetches a batch ahead)
    assert [(chunk, scored) for chunk, _, scored in full] == [(k, 4 * k) for k in range(6)]

    interrupted, _ = _scheduled_dge_run(tiny_qwen3_vl, tiny_tables, tmp_path / "split", stop_at=3)
    resumed, resumed_epochs = _scheduled_dge_run(
        tiny_qwen3_vl, tiny_tables, tmp_path / "split", resume=str(tmp_path / "split" / "checkpoint-3")
    )
    assert interrupted + resumed == full
    # the epoch counter goes on as in the uninterrupted run (4 batches per epoch here)
    assert {step: resumed_epochs[step] for step in (4, 5, 6)} == {
        step: full_epochs[step] for step in (4, 5, 6)
    }


LENGTH_STOP_COMPLETIONS = (
    # boxes, then reasoning that runs past the token limit: a length stop without </think>
    '{"bbox_2d": [80, 420, 330, 900], "label": "red chair"}\n' + "the chair is left " * 20,
    # </think> and a letter, then more text until the limit: a length stop *with* </think>
    '{"bbox_2d": [100, 400, 300, 880], "label": "chair"}\nleft</think>B' + " and more" * 20,
    # finished within the limit
    '{"bbox_2d": [560, 120, 760, 640], "label": "blue lamp"}\nright</think>A',
)


def test_length_stops_are_logged_masked_and_keep_dropout_free_entropies(tiny_qwen3_vl, tiny_tables, tmp_path):
    probe = EntropyProbe()
    trainer = _trainer(
        tiny_qwen3_vl,
        tiny_tables,
        tmp_path / "out",
        [get_reward_funcs(["spatialcore_reward"])[0], probe],
        box_entropy_source="logprob_pass",
        num_iterations=2,  # TRL's own log-prob pass (its attention masks out the masked completions)
        mask_truncated_completions=True,
        max_completion_length=48,
        lora_dropout=0.5,
    )
    probe.trainer = trainer
    _enlarge_adapter(trainer.model, std=0.5)
    eos = trainer.processing_class.tokenizer.convert_tokens_to_ids("<|im_end|>")
    with scripted_generation(trainer.processing_class.tokenizer, LENGTH_STOP_COMPLETIONS, seed=1):
        trainer.train()
    texts = [record["text"] for record in probe.records]
    stopped = [record["ids"][-1] != eos for record in probe.records]
    assert any(stopped) and not all(stopped)
    logged = next(entry for entry in trainer.state.log_history if "truncation/length_stopped" in entry)
    assert logged["truncation/length_stopped"] == pytest.approx(sum(stopped) / len(stopped))
    assert logged["truncation/masked_from_loss"] == logged["truncation/length_stopped"]
    assert logged["completions/clipped_ratio"] == logged["truncation/length_stopped"]
    # `spatialcore/truncated` is the share without </think>, which a length stop may still contain
    without_think = [("</think>" not in text) for text in texts]
    assert logged["spatialcore/truncated"] == pytest.approx(sum(without_think) / len(texts))
    assert sum(without_think) < sum(stopped)
    assert "truncation/length_stopped_reward" in logged
    # entropies of the masked completions come from a pass that sees them (and without dropout)
    for record in probe.records:
        for index, value in enumerate(record["entry"]["entropies"]):
            if math.isfinite(value):
                assert value == pytest.approx(record["full"][index], abs=1e-4)
