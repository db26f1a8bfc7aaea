"""Small builders of completions and rows shared by the reward tests."""

from __future__ import annotations

import json
import math

LN10 = math.log(10)


def box_line(box, label: str) -> str:
    """One SpatialCORE grounding line ``{"bbox_2d": [...], "label": ...}``."""
    return json.dumps({"bbox_2d": list(box), "label": label})


def spatialcore_completion(boxes=(), answer: str = "A", reasoning: str = "The reasoning goes here.") -> str:
    """Box lines, reasoning, ``</think>`` and the answer letter (the SpatialCORE grammar)."""
    lines = [box_line(box, label) for box, label in boxes]
    return "\n".join([*lines, reasoning]) + "</think>" + answer


def spatialthinker_completion(
    objects=(), relations=(), answer: str = "(A) left", observe: str = "a scene"
) -> str:
    """A well-formed SpatialThinker completion with the given scene graph and answer text."""
    scene = json.dumps(
        {
            "objects": [{"id": object_id, "bbox": list(bbox)} for object_id, bbox in objects],
            "relationships": [
                {"subject": subject, "predicate": predicate, "object": obj}
                for subject, predicate, obj in relations
            ],
        }
    )
    return (
        f"<observe>{observe}</observe>\n<scene>{scene}</scene>\n"
        f"<think>Reasoning over the scene.</think>\n<answer>{answer}</answer>"
    )


def char_tokens(text: str) -> list[str]:
    """Tokenise text one character per token (every digit is its own token, as in Qwen)."""
    return list(text)


def scalar_ciou(a, b, eps=1e-7):
    """Plain-Python CIoU, the public SpatialThinker formula (before its (x + 1) / 2 mapping)."""
    wa, ha, wb, hb = a[2] - a[0], a[3] - a[1], b[2] - b[0], b[3] - b[1]
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = wa * ha + wb * hb - inter
    iou = inter / union if union > 0 else 0.0
    rho = ((a[0] + a[2]) / 2 - (b[0] + b[2]) / 2) ** 2 + ((a[1] + a[3]) / 2 - (b[1] + b[3]) / 2) ** 2
    c = (max(a[2], b[2]) - min(a[0], b[0])) ** 2 + (max(a[3], b[3]) - min(a[1], b[1])) ** 2 + eps
    v = 4 / math.pi**2 * (math.atan(wb / (hb + eps)) - math.atan(wa / (ha + eps))) ** 2
    alpha = v / ((1 - iou) + v) if (1 - iou) + v > 0 else 0.0
    return iou - (rho / c + alpha * v)
