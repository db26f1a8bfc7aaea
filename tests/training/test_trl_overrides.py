"""`SpatialGRPOTrainer` against TRL's `GRPOTrainer`: what each override relies on still holds.

The trainer overrides private methods of TRL 1.16. A TRL upgrade that renames a parameter, changes a
return shape or moves a call would break the overrides silently (a keyword swallowed by `**kwargs`,
a tuple unpacked wrongly, entropies captured from the wrong pass). These tests read TRL's methods
(`inspect.signature` and their source, no model, no data) and fail loudly, naming the override to
revisit, when one of those assumptions stops holding. The behaviour itself is tested end to end on a
tiny model in `test_grpo_trainer.py`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from functools import cache

from transformers import Trainer
from trl import GRPOConfig, GRPOTrainer

from training.grpo_trainer import SpatialGRPOTrainer
from training.scheduler import TaskAdaptiveSampler

OVERRIDES = {
    "__init__",
    "get_train_dataloader",
    "_get_train_sampler",
    "_tokenize_prompts",
    "_generate_single_turn",
    "_get_per_token_logps_and_entropies",
    "_generate_and_score_completions",
    "_calculate_rewards",
    "train",
}
"""Every method `SpatialGRPOTrainer` overrides; each one has a test below."""


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def _default(function, name: str):
    return inspect.signature(function).parameters[name].default


@cache
def _tree(function) -> ast.FunctionDef:
    """The parsed source of a (possibly decorated) function."""
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(function)))
    return ast.parse(source).body[0]


def _calls(function, method: str) -> list[ast.Call]:
    """Calls of `self.<method>(...)` in `function`, in source order."""
    calls = [
        node
        for node in ast.walk(_tree(function))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ]
    return sorted(calls, key=lambda call: (call.lineno, call.col_offset))


def _returned_tuple_sizes(function) -> set[int | None]:
    """The length of every returned tuple literal of `function` (`None` for a return of anything else)."""
    return {
        len(node.value.elts) if isinstance(node.value, ast.Tuple) else None
        for node in ast.walk(_tree(function))
        if isinstance(node, ast.Return)
    }


def test_every_override_has_a_test_here():
    overridden = {
        name
        for name, value in vars(SpatialGRPOTrainer).items()
        if callable(value) and hasattr(GRPOTrainer, name)
    }
    assert overridden == OVERRIDES, (
        "SpatialGRPOTrainer overrides changed: add a test of TRL's contract for "
        f"{sorted(overridden - OVERRIDES)}, drop the test of {sorted(OVERRIDES - overridden)}"
    )


# -- __init__ ---------------------------------------------------------------------------------------


def test_init_keywords_do_not_collide_and_the_attributes_read_exist():
    """`__init__` adds keywords and passes the rest to TRL; the trainer reads TRL's attributes."""
    ours = set(_parameters(SpatialGRPOTrainer.__init__)) - {"self", "args", "kwargs"}
    trl = set(_parameters(GRPOTrainer.__init__))
    assert not ours & trl, f"TRL's GRPOTrainer now takes {sorted(ours & trl)}, which the subclass consumes"
    assert {"model", "reward_funcs", "args", "train_dataset", "processing_class", "peft_config"} <= trl

    own_tree = ast.parse(textwrap.dedent(inspect.getsource(SpatialGRPOTrainer)))
    read, assigned = set(), set()
    for node in ast.walk(own_tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (assigned if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    set_by_trl = set()
    for cls in (GRPOTrainer, *GRPOTrainer.__mro__[1:-1]):
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(cls)))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)
            ):
                set_by_trl.add(node.attr)
    missing = {
        name
        for name in read - assigned - set(vars(SpatialGRPOTrainer))
        if name not in set_by_trl and not hasattr(GRPOTrainer, name)
    }
    assert not missing, f"SpatialGRPOTrainer reads self.{sorted(missing)}, which TRL no longer sets"

    config_fields = {field.name for field in dataclasses.fields(GRPOConfig)}
    read_from_args = {
        node.attr
        for node in ast.walk(own_tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "args"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "self"
    }
    assert read_from_args <= config_fields, f"GRPOConfig lost {sorted(read_from_args - config_fields)}"


# -- get_train_dataloader ---------------------------------------------------------------------------


def test_get_train_dataloader_contract():
    """The override swaps `self.train_dataset` for the slots; TRL's dataloader must read it from there."""
    assert _parameters(GRPOTrainer.get_train_dataloader) == ["self"]
    tree = _tree(GRPOTrainer.get_train_dataloader)
    read = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "self.train_dataset"
    ]
    assert read, "TRL's get_train_dataloader no longer reads self.train_dataset"
    dataset_keywords = [
        ast.unparse(keyword.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "dataset"
    ]
    assert dataset_keywords == ["dataset"], dataset_keywords
    # the rows reach `_generate_and_score_completions` as the dataloader yields them (a list of dicts)
    assert "identity" in inspect.getsource(GRPOTrainer.__init__), "TRL no longer collates rows as a list"


# -- _get_train_sampler -----------------------------------------------------------------------------


def test_get_train_sampler_contract():
    """The override takes `dataset` (None: the training set) and mirrors TRL's RepeatSampler layout."""
    assert _parameters(GRPOTrainer._get_train_sampler) == ["self", "dataset"]
    assert _default(GRPOTrainer._get_train_sampler, "dataset") is None
    # TRL's dataloader asks this method for the sampler
    dataloader_calls = [
        keyword
        for node in ast.walk(_tree(GRPOTrainer.get_train_dataloader))
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "sampler_fn"
    ]
    assert dataloader_calls and all(
        isinstance(keyword.value, ast.Attribute) and keyword.value.attr == "_get_train_sampler"
        for keyword in dataloader_calls
    ), "TRL's get_train_dataloader no longer takes its sampler from _get_train_sampler"
    # the task sampler takes the same layout arguments TRL gives its RepeatSampler
    repeat_sampler_keywords = {
        keyword.arg
        for node in ast.walk(_tree(GRPOTrainer._get_train_sampler))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RepeatSampler"
        for keyword in node.keywords
    }
    layout = {"mini_repeat_count", "batch_size", "repeat_count", "seed"}
    assert repeat_sampler_keywords == layout | {"data_source", "shuffle"}, repeat_sampler_keywords
    assert layout <= set(_parameters(TaskAdaptiveSampler.__init__))


# -- _tokenize_prompts ------------------------------------------------------------------------------


def test_tokenize_prompts_contract():
    """The override passes `prompts` through and stores TRL's `(prompt_ids, images, multimodal_fields)`."""
    assert _parameters(GRPOTrainer._tokenize_prompts) == ["self", "prompts"]
    assert _returned_tuple_sizes(GRPOTrainer._tokenize_prompts) == {3}
    calls = _calls(GRPOTrainer._generate, "_tokenize_prompts")
    assert calls, "TRL's _generate no longer tokenises through _tokenize_prompts"


# -- _generate_single_turn --------------------------------------------------------------------------


def test_generate_single_turn_contract():
    """The override passes all five parameters through and reads `(completion_ids, logprobs)`."""
    assert _parameters(GRPOTrainer._generate_single_turn) == [
        "self",
        "prompt_ids",
        "images",
        "multimodal_fields",
        "num_generations",
        "has_tool_images",
    ]
    assert _default(GRPOTrainer._generate_single_turn, "has_tool_images") is False
    assert _returned_tuple_sizes(GRPOTrainer._generate_single_turn) == {2}
    # the prompts it generates from are the ones `_tokenize_prompts` returned (the selective pass reuses them)
    call = _calls(GRPOTrainer._generate, "_generate_single_turn")[0]
    assert [getattr(argument, "id", None) for argument in call.args[:3]] == [
        "prompt_ids",
        "images",
        "multimodal_fields",
    ]


# -- _get_per_token_logps_and_entropies --------------------------------------------------------------


def test_get_per_token_logps_and_entropies_contract():
    """The override relies on the leading parameters, `compute_entropy`, a 3-tuple, and the call order."""
    method = GRPOTrainer._get_per_token_logps_and_entropies
    assert _parameters(method)[:5] == ["self", "model", "input_ids", "attention_mask", "logits_to_keep"]
    assert _default(method, "compute_entropy") is False
    assert _returned_tuple_sizes(method) == {3}
    # With the logprob_pass source, the first call after generation must be the old-policy pass (on the
    # policy, before the rewards), or the rewards would get no entropies or the reference model's.
    generate_and_score = GRPOTrainer._generate_and_score_completions
    first = _calls(generate_and_score, "_get_per_token_logps_and_entropies")[0]
    rewards = _calls(generate_and_score, "_calculate_rewards")[0]
    assert ast.unparse(first.args[0]) == "self.model"
    assert first.lineno < rewards.lineno
    assert "compute_entropy" not in {keyword.arg for keyword in first.keywords}
    # and the trainer's condition for that pass is TRL's
    condition = "self.args.gradient_accumulation_steps % generate_every != 0 or (self.use_vllm and self.vllm_importance_sampling_correction)"
    conditions = {
        ast.unparse(node.test) for node in ast.walk(_tree(generate_and_score)) if isinstance(node, ast.If)
    }
    assert condition in conditions, "TRL changed when it runs the old-policy log-prob pass"


# -- _generate_and_score_completions ----------------------------------------------------------------


def test_generate_and_score_completions_contract():
    """The override passes `inputs` through; TRL calls it once per generation batch."""
    assert _parameters(GRPOTrainer._generate_and_score_completions) == ["self", "inputs"]
    assert len(_calls(GRPOTrainer._prepare_inputs, "_generate_and_score_completions")) == 2  # train, eval


# -- _calculate_rewards -----------------------------------------------------------------------------


def test_calculate_rewards_contract():
    """The override passes the four arguments through; TRL hands every row column to the rewards."""
    assert _parameters(GRPOTrainer._calculate_rewards) == [
        "self",
        "inputs",
        "prompts",
        "completions",
        "completion_ids_list",
    ]
    call = _calls(GRPOTrainer._generate_and_score_completions, "_calculate_rewards")[0]
    assert [ast.unparse(argument) for argument in call.args] == [
        "inputs",
        "prompts",
        "completions",
        "completion_ids_list",
    ]
    # `box_entropies` reaches the rewards because TRL builds the reward kwargs from the rows' keys
    iterated = {
        ast.unparse(node.iter)
        for node in ast.walk(_tree(GRPOTrainer._calculate_rewards))
        if isinstance(node, ast.comprehension)
    }
    assert "inputs[0]" in iterated, "TRL no longer passes every input column to the reward functions"


# -- train ------------------------------------------------------------------------------------------


def test_train_contract():
    """The override resolves `resume_from_checkpoint` and passes it and every other keyword through."""
    parameters = inspect.signature(Trainer.train).parameters
    assert list(parameters)[:2] == ["self", "resume_from_checkpoint"]
    assert all(
        parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD)
        for name, parameter in parameters.items()
        if name != "self"
    )
    assert GRPOTrainer.train is Trainer.train, "TRL now overrides train; re-read it before resolving aliases"
