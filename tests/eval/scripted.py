"""Scripted answerers for `spatial-eval` tests: a loopback OpenAI server answering with chosen policies.

The server is the suite's loopback OpenAI-compatible server (`tests/fakes/llm_servers.py`), here
with the finish reason under the policy's control. A policy sees the request and returns a
:class:`Reply` (text and finish reason); it finds the item a request is about from the prompt text
and the image bytes (a flipped 3DSRBench question has the same text as the original, not the same
image). Policies: the gold answer, always "A", the gold letter with its option text in the
``X. text`` form, a completion cut by the token limit, and a failing server.

Fixture writers put small benchmarks on disk in their native layouts (the 3DSRBench VLMEvalKit TSV).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from PIL import Image

from tests.fakes.llm_servers import (
    Fault,
    LoopbackLLMServer,
    _openai_completion,
    request_images,
    request_text,
)
from training.eval.scoring import output_format_for
from training.prompts import build_messages

SCENE = '{"objects": [], "relationships": []}'


@dataclass(frozen=True)
class Reply:
    """What the scripted server answers: the text and the finish reason it reports."""

    text: str
    finish_reason: str = "stop"


Policy = Callable[[dict], Reply]


class ScriptedOpenAIServer(LoopbackLLMServer):
    """The loopback OpenAI server with a policy that also chooses the reported ``finish_reason``."""

    def __init__(self, policy: Policy):
        super().__init__("openai", responder=lambda body: policy(body).text)
        self.policy = policy

    def _answer_body(self, body: dict) -> dict:
        reply = self.policy(body)
        document = _openai_completion(body, reply.text)
        document["choices"][0]["finish_reason"] = reply.finish_reason
        return document

    def fail_every_request(self) -> None:
        """Refuse every request from now on (HTTP 400: not retried)."""
        self.fault_policy = lambda recorded, hit: Fault.http_error(400, "the scripted server refuses")


def _digest(images: list[bytes]) -> str:
    return hashlib.sha256(b"".join(hashlib.sha256(image).digest() for image in images)).hexdigest()


class AnswerKey:
    """The gold of each prompt of a set of eval items, as the API backend sends them.

    Args:
        items (`pl.DataFrame`): ``eval_items`` rows.
        prompt_format (`str`): the format the run asks for (``spatialthinker`` or ``spatialcore``).
        family (`str`): the family whose coordinate wording the prompts use (``qwen2_vl`` for APIs).
    """

    def __init__(self, items, prompt_format: str = "spatialthinker", family: str = "qwen2_vl"):
        self.prompt_format = prompt_format
        self.items: dict[tuple[str, str], dict] = {}
        for item in items.iter_rows(named=True):
            messages = build_messages(output_format_for(item, prompt_format), item, family)
            text = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
            self.items[(text, _digest([cell["bytes"] for cell in item["images"]]))] = item

    def item(self, body: dict) -> dict:
        """The item a request is about."""
        return self.items[(request_text(body), _digest(request_images(body)))]

    def completion(self, answer: str, item: dict | None = None) -> str:
        """A well-formed completion of the item's format (the run's, or ``dge`` for numbers) answering ``answer``."""
        if item is not None and item["answer_format"] == "numeric":
            return f"<think>measured</think><answer>{answer}</answer>"
        if self.prompt_format == "spatialcore":
            return f"I look at the image.</think>{answer}"
        return f"<observe>a scene</observe><scene>{SCENE}</scene><think>so</think><answer>{answer}</answer>"

    # -- policies --------------------------------------------------------------------------------
    def gold(self, body: dict) -> Reply:
        """The gold answer: ``(X) option text`` (SpatialThinker), the letter (SpatialCORE), the number."""
        item = self.item(body)
        if item["answer_format"] == "numeric":
            return Reply(self.completion(f"{item['numeric_answer']} {item['unit'] or ''}".strip(), item))
        letter, options = item["answer"], item["options"]
        if self.prompt_format == "spatialcore":
            return Reply(self.completion(letter))
        text = f"({letter}) {options[item['answer_index']]}" if options else f"({letter})"
        return Reply(self.completion(text))

    def always_a(self, body: dict) -> Reply:
        """Always option A (with A's text when the format writes texts); numbers: twice the gold value."""
        item = self.item(body)
        if item["answer_format"] == "numeric":
            return Reply(self.completion(f"{2 * item['numeric_answer']} {item['unit'] or ''}".strip(), item))
        if self.prompt_format == "spatialcore":
            return Reply(self.completion("A"))
        text = f"(A) {item['options'][0]}" if item["options"] else "(A)"
        return Reply(self.completion(text))

    def gold_letter_dot_text(self, body: dict) -> Reply:
        """The gold letter with its option text, OmniSpatial style: ``X. option text``."""
        item = self.item(body)
        letter, options = item["answer"], item["options"]
        text = f"{letter}. {options[item['answer_index']]}" if options else f"{letter}."
        return Reply(self.completion(text))

    def cut_by_the_limit(self, body: dict) -> Reply:
        """A completion the token limit cut: the gold answer is in it, but the server says ``length``."""
        return Reply(self.gold(body).text, finish_reason="length")

    def bare_letter(self, body: dict) -> Reply:
        """A normal stop with only the gold letter and none of the format's tags."""
        return Reply(self.item(body)["answer"])


# -- 3DSRBench in its VLMEvalKit TSV layout ---------------------------------------------------------


def _png(colour: tuple[int, int, int], mirrored: bool = False) -> str:
    image = Image.new("RGB", (32, 24), (230, 230, 230))
    for x in range(4, 12):
        for y in range(6, 18):
            image.putpixel((x, y), colour)
    if mirrored:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _rotations(qid: str, options: list[str], gold: int, rotate: bool) -> list[tuple[str, list[str], int]]:
    """``(qid, options, gold index)`` of a question and, with ``rotate``, its CircularEval rotations ``-N``."""
    rows = [(qid, options, gold)]
    if rotate:
        for shift in range(1, len(options)):
            rows.append((f"{qid}-{shift}", options[shift:] + options[:shift], (gold - shift) % len(options)))
    return rows


THREEDSR_QUESTIONS = (
    # (qid, category, question, options, gold index, gold index in the flipped image or None)
    ("a1", "height_higher", "Is the red box higher than the lamp?", ["yes", "no"], 0, 0),
    ("b2", "orientation_on_the_left", "Is the red box on the left of the lamp?", ["yes", "no"], 0, 1),
    (
        "c3",
        "location_above",
        "Where is the red box?",
        ["above the table", "under it", "beside it", "far"],
        0,
        None,
    ),
    ("d4", "multi_object_facing", "Which object faces the camera?", ["the red box", "the lamp"], 0, 1),
)


def write_3dsrbench_tsv(path: Path, rotate: bool = True) -> Path:
    """A 3DSRBench TSV in VLMEvalKit's layout: ``-N`` rotations (with ``rotate``) and ``-flip`` questions.

    Four questions (height, orientation, location, multi-object), gold ``A`` in their original option
    order; three have a flipped counterpart (a mirrored image) whose gold changes for left/right and
    facing questions. 2-option rows leave ``C`` and ``D`` empty; a repeated image is given by the
    ``index`` of the row that holds it, as the released file does.
    """
    colours = [(200, 30, 30), (30, 160, 30), (30, 30, 200), (200, 160, 30)]
    records = []
    for number, (qid, category, question, options, gold, flipped_gold) in enumerate(THREEDSR_QUESTIONS):
        variants = [(qid, gold, _png(colours[number]))]
        if flipped_gold is not None:
            variants.append((f"{qid}-flip", flipped_gold, _png(colours[number], mirrored=True)))
        for base, base_gold, image in variants:
            first_index = None
            for row_qid, row_options, row_gold in _rotations(base, options, base_gold, rotate):
                index = len(records) + 1
                cells = {
                    letter: (row_options[k] if k < len(row_options) else None)
                    for k, letter in enumerate("ABCD")
                }
                records.append(
                    {
                        "index": index,
                        "qid": row_qid,
                        "question": question,
                        **cells,
                        "answer": "ABCD"[row_gold],
                        "category": category,
                        "image": image if first_index is None else str(first_index),
                    }
                )
                first_index = first_index or index
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(records).to_csv(path, sep="\t", index=False)
    return path


# -- OmniSpatial in its release layout -----------------------------------------------------------------


def write_omnispatial(root: Path, questions: int, options_in_image: int = 0) -> Path:
    """An OmniSpatial folder: ``data.json`` (0-based ``answer``) and ``<task_type>/<image id>.png``.

    The last ``options_in_image`` questions have no option texts (the options are drawn in the image).
    """
    folder = root / "Perspective_Taking"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for number in range(questions):
        image = Image.new("RGB", (32, 24), ((number * 37) % 255, (number * 91) % 255, 120))
        image.save(folder / f"{number}.png")
        drawn = number >= questions - options_in_image
        records.append(
            {
                "id": f"{number}_0",
                "task_type": "Perspective_Taking",
                "sub_task_type": "Egocentric",
                "question": f"Question {number}: which way should I turn?",
                "options": []
                if drawn
                else ["Go straight", "Turn a bit to the right", "Turn a bit to the left"],
                "answer": number % 3,
            }
        )
    (root / "data.json").write_text(json.dumps(records))
    return root


# -- vLLM -------------------------------------------------------------------------------------------------


class FakeVllm:
    """A stand-in for the `vllm` package: records engine settings, generate calls and the teardown."""

    def __init__(self):
        self.engines, self.generate_calls, self.events = [], [], []
        fake = self

        class SamplingParams:
            def __init__(self, **kwargs):
                self.kwargs = kwargs

        class LLM:
            def __init__(self, **kwargs):
                fake.engines.append(kwargs)
                core = SimpleNamespace(shutdown=lambda: fake.events.append("engine core shut down"))
                self.llm_engine = SimpleNamespace(engine_core=core)

            def generate(self, prompts, params, lora_request=None, use_tqdm=True):
                fake.generate_calls.append(len(prompts))
                outputs = []
                for _ in prompts:
                    logprob = -1.0 if lora_request is None else -1.5
                    done = SimpleNamespace(text="boxes</think>A", finish_reason="stop", token_ids=[1, 2])
                    outputs.append(
                        SimpleNamespace(
                            outputs=[done],
                            prompt_token_ids=[1, 5],
                            prompt_logprobs=[None, {5: SimpleNamespace(logprob=logprob)}],
                        )
                    )
                return outputs

        class LoRARequest:
            def __init__(self, name, number, path):
                self.path = path

        def destroyer(name):
            return lambda: fake.events.append(name)

        self.modules = {
            "vllm": SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams),
            "vllm.lora": SimpleNamespace(),
            "vllm.lora.request": SimpleNamespace(LoRARequest=LoRARequest),
            "vllm.distributed": SimpleNamespace(),
            "vllm.distributed.parallel_state": SimpleNamespace(
                destroy_model_parallel=destroyer("model parallel destroyed"),
                destroy_distributed_environment=destroyer("distributed environment destroyed"),
            ),
        }


@pytest.fixture
def fake_vllm(monkeypatch) -> FakeVllm:
    """The `vllm` modules replaced by a :class:`FakeVllm` for one test."""
    import training.models  # noqa: F401  (TRL probes for vLLM when first imported: import it first)

    fake = FakeVllm()
    for name, module in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return fake
