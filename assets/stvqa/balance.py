"""The running category/level balance of generated questions, and steering toward the targets.

Generation keeps a :class:`RunningBalance` over everything generated so far in a shard. The
template backend uses it to pick which of an image's many candidate questions to keep
(:func:`select_questions`: greedy, most under-represented category and level first); the
Anthropic backend prints it into the prompt (:meth:`RunningBalance.describe`) so the model steers
toward the same targets, as SpatialThinker's generator does. When every image's prompt must be known
before any answer (batch mode: one wait for all images), :func:`planned_balance_texts` gives each image the
balance as it would stand had every earlier image got its planned questions.

>>> balance = RunningBalance()
>>> balance.add("relation", "easy")
>>> balance.shares()["categories"]["relation"]
1.0
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from assets.stvqa.vocabulary import CATEGORIES, LEVEL_TARGETS, LEVELS, category_targets


class Balanced(Protocol):
    """Anything with a category, a level, a rating and a fact key (template questions), read only."""

    @property
    def category(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def rating(self) -> int: ...
    @property
    def fact_key(self) -> str: ...
    @property
    def template(self) -> str: ...
    @property
    def question(self) -> str: ...


BalancedItem = TypeVar("BalancedItem", bound=Balanced)
"""The type of the candidates :func:`select_questions` picks from (and hands back)."""


@dataclass
class RunningBalance:
    """Counts of generated questions per category and level, with their targets.

    Args:
        category_targets (`Mapping[str, float]`, *optional*): target share per category (defaults to 50%
            relation, the rest equal).
        level_targets (`Mapping[str, float]`, *optional*): target share per level (40/40/20).
    """

    category_targets: Mapping[str, float] = field(default_factory=category_targets)
    level_targets: Mapping[str, float] = field(default_factory=lambda: dict(LEVEL_TARGETS))
    categories: Counter = field(default_factory=Counter)
    levels: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        for name, targets, known in (
            ("category", self.category_targets, CATEGORIES),
            ("level", self.level_targets, LEVELS),
        ):
            unknown = set(targets) - set(known)
            if unknown:
                raise ValueError(f"unknown {name} in targets: {sorted(unknown)}; known: {list(known)}")
            if any(value < 0 for value in targets.values()) or sum(targets.values()) <= 0:
                raise ValueError(f"{name} targets must be non-negative and not all zero, got {dict(targets)}")

    @property
    def total(self) -> int:
        """Questions counted so far."""
        return sum(self.levels.values())

    def add(self, category: str, level: str) -> None:
        """Count one question."""
        self.categories[category] += 1
        self.levels[level] += 1

    def _normalised(self, targets: Mapping[str, float]) -> dict[str, float]:
        total = sum(targets.values())
        return {name: value / total for name, value in targets.items()}

    def deficit(self, category: str, level: str) -> float:
        """How many questions the category and level are short of their targets, counting one more question.

        The sum of two shortfalls in question units (target share x (total + 1) - count); categories and
        levels without a target are not wanted (-1 each). A 50% category is needed about every other
        question, a 6% one about every sixteenth.
        """
        total = self.total + 1
        score = 0.0
        for counts, targets, name in (
            (self.categories, self._normalised(self.category_targets), category),
            (self.levels, self._normalised(self.level_targets), level),
        ):
            target = targets.get(name, 0.0)
            if target <= 0:
                score -= 1.0
                continue
            score += target * total - counts[name]
        return score

    def shares(self) -> dict[str, dict[str, float]]:
        """Current shares per category and level (0 when nothing was counted)."""
        total = max(self.total, 1)
        return {
            "categories": {name: self.categories[name] / total for name in CATEGORIES},
            "levels": {name: self.levels[name] / total for name in LEVELS},
        }

    def describe(self, counted: str = "generated so far") -> str:
        """The balance as text for the generation prompt: current counts and shares next to the targets.

        >>> print(RunningBalance().describe().splitlines()[0])
        Questions generated so far: 0
        """
        shares = self.shares()
        categories = self._normalised(self.category_targets)
        levels = self._normalised(self.level_targets)
        lines = [f"Questions {counted}: {self.total}", "Category: count (share now / target share)"]
        for name in CATEGORIES:
            lines.append(
                f"- {name}: {self.categories[name]} ({shares['categories'][name]:.0%} / {categories.get(name, 0.0):.0%})"
            )
        lines.append("Level: count (share now / target share)")
        for name in LEVELS:
            lines.append(
                f"- {name}: {self.levels[name]} ({shares['levels'][name]:.0%} / {levels.get(name, 0.0):.0%})"
            )
        return "\n".join(lines)


PLANNED = "planned before this scene"
"""How a planned balance names its counts (:meth:`RunningBalance.describe`)."""


def planned_balance_texts(images: int, questions_per_image: int, balance: RunningBalance) -> list[str]:
    """The balance each image's prompt shows when all prompts are written before any answer arrives.

    Before image ``k`` the balance is what it would be had every earlier image got its planned questions: each
    image is planned ``questions_per_image`` questions, one at a time the category and level furthest below
    their targets (a category once per image while another is wanted). The text shown to an image therefore
    names the categories the plan still needs, as the running balance does when answers come back in between.
    `balance` ends holding the plan.

    >>> texts = planned_balance_texts(3, 2, RunningBalance())
    >>> [text.splitlines()[0] for text in texts]
    ['Questions planned before this scene: 0', 'Questions planned before this scene: 2', 'Questions planned before this scene: 4']
    """
    texts = []
    pairs = [(category, level) for category in CATEGORIES for level in LEVELS]
    for _ in range(images):
        texts.append(balance.describe(PLANNED))
        used: set[str] = set()
        for _ in range(questions_per_image):
            category, level = max(
                pairs, key=lambda pair: (pair[0] not in used, balance.deficit(*pair), -pairs.index(pair))
            )
            used.add(category)
            balance.add(category, level)
    return texts


def _tie_break(item: Balanced, seed: int) -> str:
    return hashlib.sha256(f"{seed}\x1f{item.template}\x1f{item.question}".encode()).hexdigest()


def select_questions(
    candidates: Sequence[BalancedItem],
    count: int,
    balance: RunningBalance,
    *,
    seed: int = 0,
    max_per_template: int = 2,
) -> list[BalancedItem]:
    """Pick up to `count` candidates of one image, each time the one whose category and level are most needed.

    Ties go to the higher rating, then to a stable hash. At most one question per fact (`fact_key`) and
    `max_per_template` per template. `balance` is updated with every pick.

    Example:
        >>> from assets.stvqa.templates import TemplateQuestion
        >>> make = lambda c, l, k: TemplateQuestion("t." + k, c, l, k + "?", ("a", "b"), 0, 5, (k,), k)
        >>> balance = RunningBalance()
        >>> balance.add("relation", "easy")
        >>> picked = select_questions([make("relation", "easy", "x"), make("depth", "hard", "y")], 1, balance)
        >>> picked[0].category
        'depth'
    """
    remaining = list(candidates)
    chosen: list[BalancedItem] = []
    used_facts: set[str] = set()
    per_template: Counter = Counter()
    while remaining and len(chosen) < count:
        remaining = [
            item
            for item in remaining
            if item.fact_key not in used_facts and per_template[item.template] < max_per_template
        ]
        if not remaining:
            break
        best = max(
            remaining,
            key=lambda item: (
                balance.deficit(item.category, item.level),
                item.rating,
                _tie_break(item, seed),
            ),
        )
        chosen.append(best)
        used_facts.add(best.fact_key)
        per_template[best.template] += 1
        balance.add(best.category, best.level)
        remaining.remove(best)
    return chosen
