"""Contract for ``mcq_questions``: one row per multiple-choice question about one image.

Sources: OmniSpatial (``answer`` is a 0-based index) and SpatiaLab (``Answer`` is 1-based); both are
normalised here to a 0-based ``answer_index`` and the gold letter ``answer`` derived from it (the
gold is never read back out of option text).

``origin`` (1.1.0) says whether the question is the sample world's or a real data set's. Since 2.0.0 a
question names its image by ``image_sha256`` and the bytes are stored once per distinct image in
``mcq_images`` (:class:`McqImages`; several questions share an image); the tables meant to be loaded alone
(``spatialcore_train``, ``eval_items``) embed the image again (:class:`McqQuestionsWithImage`).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column
from data_contracts.origin import origin_column

CONTRACT_VERSION = "2.0.0"  # 1.1: origin; 2.0: the image by image_sha256 (bytes in mcq_images)
IMAGES_CONTRACT_VERSION = "1.0.0"
LETTERS = "ABCDEFGH"
SHA256_PATTERN = r"^[0-9a-f]{64}$"


def image_sha256_column(description: str) -> dy.String:
    """The SHA-256 (64 lower-case hex digits) of an image file's bytes."""
    return dy.String(nullable=False, regex=SHA256_PATTERN, description=description)


class McqImages(dy.Schema):
    """An image of the multiple-choice questions, stored once however many questions ask about it."""

    image_sha256 = dy.String(
        primary_key=True,
        regex=SHA256_PATTERN,
        description="SHA-256 of the image file's bytes (64 hex digits): what mcq_questions' image_sha256 names.",
    )
    image = image_column(
        description="The image as a Hugging Face image cell {bytes, path}: the file's bytes unchanged and its file "
        "name (no folder)."
    )
    image_width = dy.Int64(nullable=False, min=1, description="Width in pixels, read from the decoded file.")
    image_height = dy.Int64(
        nullable=False, min=1, description="Height in pixels, read from the decoded file."
    )


class McqQuestions(dy.Schema):
    """A multiple-choice spatial question about one image (named by its hash), with its gold answer."""

    question_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Question id, unique across sources: 'omnispatial/<task_type>/<id>' (OmniSpatial ids restart "
        "in every task folder) or 'spatialab/<id>'.",
    )
    image_sha256 = image_sha256_column(
        "SHA-256 of the question's image file (64 hex digits): its row in mcq_images holds the bytes."
    )
    image_width = dy.Int64(
        nullable=False, min=1, description="Width of the image in pixels, read from the decoded file."
    )
    image_height = dy.Int64(
        nullable=False, min=1, description="Height of the image in pixels, read from the decoded file."
    )
    question = dy.String(
        nullable=False, min_length=1, description="Question text as the source gives it, without the options."
    )
    options = dy.List(
        dy.String(nullable=False),
        nullable=False,
        max_length=len(LETTERS),
        description="Option texts in the source's order, without letters (option i has letter 'ABCDEFGH'[i]); "
        "empty when the choices are drawn in the image (OmniSpatial). SpatiaLab's empty Option_k are left out.",
    )
    answer_index = dy.Int64(
        nullable=False,
        min=0,
        description="0-based index of the gold option: OmniSpatial's 'answer' as is, SpatiaLab's 1-based "
        "'Answer' minus 1. The gold is never read back out of option text.",
    )
    answer = dy.String(
        nullable=False,
        regex=r"^[A-H]$",
        description="Gold letter A-H, derived from answer_index (index 0 is 'A').",
    )
    task_type = dy.String(
        nullable=False,
        description="Task family as the source names it: OmniSpatial's task folder (e.g. 'Complex_Logic', "
        "'Perspective_Taking'), SpatiaLab's 'Category'.",
    )
    sub_task_type = dy.String(
        nullable=False,
        description="Finer task name: OmniSpatial's 'sub_task_type', SpatiaLab's 'Sub_Category'; empty text when "
        "the source has none.",
    )
    split = dy.String(
        nullable=False,
        description="'train' or 'test'. OmniSpatial: by default a stable SHA-256 hash of the image number "
        "(20% test, questions about one image stay together), or the configured label; SpatiaLab: always 'test'.",
    )
    source = dy.String(nullable=False, description="Source data set: 'omnispatial' or 'spatialab'.")
    origin = origin_column("questions")

    @dy.rule()
    def answer_index_in_options(cls) -> pl.Expr:
        """The gold index points at an option (rows whose options are drawn in the image have none)."""
        return (cls.options.col.list.len() == 0) | (cls.answer_index.col < cls.options.col.list.len())

    @dy.rule()
    def letter_matches_index(cls) -> pl.Expr:
        """The gold letter is the letter of ``answer_index``."""
        letters = pl.lit(LETTERS)
        return cls.answer.col == letters.str.slice(cls.answer_index.col, 1)


class McqQuestionsWithImage(McqQuestions):
    """A question with its image embedded (what the readers give, and the base of the tables loaded alone)."""

    image = image_column(
        description="The question's image as a Hugging Face image cell {bytes, path}: the file's bytes unchanged "
        "and its file name (no folder)."
    )
