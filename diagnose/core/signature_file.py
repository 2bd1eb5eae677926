"""A signature file as its author writes it: the signature and the examples that test it.

A diagnosis reads the signature alone (:class:`~diagnose.core.signature.Signature`), and the
library keeps it apart (``library.load_library``): the examples are two fifths of a file, and
only testing, linting and showing a signature read them.
"""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation
# from a string at every start.

from pydantic import BaseModel, ConfigDict, Field

from diagnose.core.models import Confidence, empty_dict, empty_list
from diagnose.core.signature import Signature


class _Schema(BaseModel):
    """Built when a signature file is first read: a run whose library is cached builds none."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Example(_Schema):
    name: str
    log: str
    lines: list[int] = Field(
        default_factory=empty_list, description="1-based lines the evidence must point at."
    )
    captures: dict[str, str] = Field(
        default_factory=empty_dict, description="Values the match must capture or derive."
    )
    confidence: Confidence | None = Field(
        default=None, description="The confidence the finding must have (e.g. low when demoted)."
    )
    category: str | None = Field(
        default=None, description="The category the finding must have (where `categories` vary)."
    )
    xfail: str | None = Field(default=None, description="A known gap, with the reason.")
    superseded_by: str | None = Field(
        default=None,
        description="The signature that is primary when the whole library reads this log, "
        "when it is not this one (a critical signature's example must name it).",
    )


class Examples(_Schema):
    positive: list[Example] = Field(min_length=1)
    negative: list[Example] = Field(min_length=1)


# No docstring: the file schema (``diagnose signatures schema``) would carry it.
class SignatureFile(Signature):
    model_config = ConfigDict(title="Signature")

    examples: Examples

    def signature(self) -> Signature:
        """The signature without its examples, as a diagnosis reads it (already validated)."""
        fields = {name: getattr(self, name) for name in Signature.model_fields}
        return Signature.model_construct(self.model_fields_set - {"examples"}, **fields)
