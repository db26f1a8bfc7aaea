"""Counting: how many objects of a label the room holds (``object_count``).

The question shows frames that together show every instance of the label, so the count can be
read from the images; labels with an unmeasured instance are not asked about.

>>> import numpy as np
>>> from assets.dge.tasks.facts import ObjectFact, SceneFacts
>>> cups = {i: ObjectFact(i, "cup", np.zeros(3), np.zeros(3)) for i in (0, 1)}
>>> object_count_wording({"label": "cup", "frames": [0]}, SceneFacts("s", cups, {}, {}, None))
'How many cups are there in this room? The images show the same room from different viewpoints. Answer with a whole number.'
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from assets.dge.tasks.answers import Evaluation, Spec, all_visible, first_failure, numeric
from assets.dge.tasks.balance import NUMERIC
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.sampling import CandidatePool
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType
from data_contracts.nouns import pluralize


def sample_object_count(pool: CandidatePool) -> Iterator[Spec]:
    """Every askable label once, in random order, with frames that show all its instances."""
    facts = pool.facts
    labels = sorted(
        {
            obj.label
            for obj in facts.objects.values()
            if obj.label.lower() not in pool.settings.excluded_labels
        }
    )
    for index in pool.rng.permutation(len(labels)):
        members = [o for o, obj in facts.objects.items() if obj.label == labels[index]]
        cover = pool.cover(members)
        if cover is not None:
            yield {"label": labels[index], "frames": cover}


def evaluate_object_count(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The number of objects with the label; clear when every one was measured and the frames show them all."""
    label = spec["label"]
    frames = spec["frames"]
    members = sorted(o for o, obj in facts.objects.items() if obj.label == label)
    count = len(members)
    reason = first_failure(
        (count > 0, "no object with the label"),
        (label not in facts.unmeasured_labels, "an instance of the label was not measured"),
        (
            all_visible(facts, frames, members, settings),
            "not every instance is clearly visible in the frames",
        ),
    )
    return numeric(
        frames, count, None, {"label": label, "object_ids": members, "count": count}, not reason, reason
    )


def object_count_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """How many <label>s."""
    return (
        f"How many {pluralize(spec['label'])} are there in this room? The images show the same room from "
        "different viewpoints. Answer with a whole number."
    )


COUNTING_TASK_TYPES = (
    TaskType("object_count", sample_object_count, evaluate_object_count, object_count_wording, NUMERIC),
)
"""The counting task types."""
