"""The knowledge tiers as the engine is given them: their needles at once (a small JSON list),
their code and data only when a run asks them, so a run a hand signature decides never
imports the tiers, their schemas or their YAML. This module is the top of the knowledge
package: it imports the tiers, and no tier imports it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from diagnose.core.models import Finding
from diagnose.core.optionlink import keyword_refusal
from diagnose.engines import profile
from diagnose.knowledge.location import builtin_anchors, defined_by_some_release

if TYPE_CHECKING:
    from diagnose.core.explain import IncidentView


class KnownIssueTier(NamedTuple):
    """The known-issue tier over the shipped base, imported when first asked;
    ``exclude_threads`` leaves records out by the thread they were drawn from (the accuracy
    benchmark scores each case without its own)."""

    exclude_threads: tuple[str, ...] = ()

    @property
    def needles(self) -> frozenset[str]:
        return builtin_anchors()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.tiers import known_issue_findings

        return known_issue_findings(incident, self.exclude_threads)


class EngineSourceTier(NamedTuple):
    """The engine-source tier, imported when first asked. No needles: the messages it reads
    are the error lines the incident tracker keeps anyway. ``other_spellings`` is the file
    that maps each engine's flags to the other engine's (``_flags.yaml``), read only when an
    argparse error needs it."""

    other_spellings: Path | None = None
    needles: frozenset[str] = frozenset()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.source_tier import engine_source_findings

        return engine_source_findings(incident, self.other_spellings)


class ReleaseFactsTier:
    """The release-tables tier, imported when first asked; no needles, as for the
    engine-source tier."""

    needles: frozenset[str] = frozenset()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.release_facts import release_fact_findings

        return release_fact_findings(incident)


class MessageWordsTier:
    """The last tier, on the first error past its wrappers: the component an engine switch
    turns on that the error names, else the feature a two-way flag turns on that it refuses,
    else a slip of the engine's own code that raised it, else
    the system error it carries (the error number and the path or address it names), else the
    area its own words point at; imported when first asked; no needles."""

    needles: frozenset[str] = frozenset()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.code_fault import engine_code_fault_findings
        from diagnose.knowledge.os_errors import os_error_findings
        from diagnose.knowledge.source_tier import message_words_findings, past_wrappers
        from diagnose.knowledge.switches import engine_switch_findings, flag_switch_findings

        incident = past_wrappers(incident)
        return (
            engine_switch_findings(incident)
            or flag_switch_findings(incident)
            or engine_code_fault_findings(incident)
            or os_error_findings(incident)
            or message_words_findings(incident)
        )


class ReleaseFixChecks:
    """A finding's fix read against the release in the log: its added flags and variables as
    that release spells them (values too), and no flag that no release of the engine has
    (imported only for a finding that adds flags or sets variables),
    then its package change made exact: a transformers upgrade for a model type the log names
    by the first transformers release that knows it (and the running release's cap on it), a
    transformers downgrade for a model the engine registers itself to below that release, a
    change of the engine or of a mined library (outlines, xgrammar, pydantic, transformers,
    huggingface_hub, torchao, flashinfer, compressed_tensors, mistral_common, triton) by the
    releases that ship the module or name an import missed (an upgrade of the engine that
    nothing else places: past the release shown, else the newest mined), any other change
    that names no version by the release's requirements (imported only for a finding that
    needs it)."""

    def __call__(self, finding: Finding, engine: str | None, engine_version: str | None) -> Finding:
        if finding.patch is not None and _to_check(finding, engine, engine_version):
            from diagnose.knowledge.release_flags import checked_flags

            finding = checked_flags(finding, engine, engine_version)
        own_package = finding.package is not None and finding.package.name == engine
        refused = [] if own_package else _refused_flags(finding, engine_version)
        if refused:
            from diagnose.knowledge.release_flags import newer_flags

            finding = newer_flags(finding, engine, engine_version, refused)
        if finding.package is not None and finding.package.name == "transformers":
            from diagnose.knowledge.requirements import model_type_fix, registered_model_fix

            for exact in (model_type_fix, registered_model_fix):
                fixed = exact(finding, engine, engine_version)
                if fixed is not finding:
                    return fixed
        if finding.package is None or any(c.isdigit() for c in finding.package.spec):
            return finding
        if finding.package.name in _ENGINE_PACKAGES:
            from diagnose.knowledge.package_api import engine_api_fix, named_upgrade

            fixed = engine_api_fix(finding, engine_version)
            return fixed if fixed is not finding else named_upgrade(finding, engine_version)
        from diagnose.knowledge.package_api import library_api_fix
        from diagnose.knowledge.requirements import pinned_by_release

        fixed = library_api_fix(finding, engine, engine_version)
        return fixed if fixed is not finding else pinned_by_release(finding, engine, engine_version)


_ENGINE_PACKAGES = ("sglang", "vllm")
"""The mined engines: a change of one of their own packages is read against the modules and
names each release ships."""


def _to_check(finding: Finding, engine: str | None, engine_version: str | None) -> bool:
    """Added flags or variables to read against the release in the log, or (none shown) a flag
    that no release of the engine (of either engine, where the log shows none) defines or, in a
    fix a hand signature did not write for its releases, an engine variable that only later
    releases may read: the release tables are loaded only then."""
    patch = finding.patch
    if patch is None or not (patch.args_add or patch.env_set):
        return False
    flags = [w.split("=", 1)[0] for w in patch.args_add if w.startswith("--")]
    if engine is None:  # a flag neither engine's releases define: a program's own option
        return any(
            not any(defined_by_some_release(e, flag) for e in ("sglang", "vllm")) for flag in flags
        )
    own_variables = tuple(profile(engine).env_prefixes)  # only those are in its tables
    return (
        engine_version is not None
        or (
            finding.tier != "signature"
            and any(name.startswith(own_variables) for name in patch.env_set)
        )
        or any(not defined_by_some_release(engine, flag) for flag in flags)
    )


_ARGUMENT_CLASS_KEYWORD = re.compile(
    r"\b(?:(?P<owner>(?:Async)?(?:EngineArgs|ServerArgs))\.)?__init__\(\) got an unexpected "
    r"keyword argument '(?P<keyword>\w+)'"
)
"""The argument class refusing a keyword; before Python 3.10 the message names no class
(``__init__() got ...``), and only a call of the class on the line above says whose it is."""
_ARGUMENT_CLASS_CALL = re.compile(r"(?<!\w)(?:Async)?(?:EngineArgs|ServerArgs)\(")


def _refused_flags(finding: Finding, engine_version: str | None) -> list[str]:
    """For a program's upgrade (a package that is not the engine), the keywords the engine's
    argument class refused from the program's code; else the flags the patch drops (not set
    again: that is a value changed) that the installed engine lacks, by the release in the log
    or by the evidence (argparse's unrecognized arguments, the argument class's unexpected
    keyword). Newer releases may have them."""
    said = " ".join(e.message or e.text for e in finding.evidence)
    if finding.package is not None:
        called = _ARGUMENT_CLASS_CALL.search(said) is not None
        return [
            "--" + found.group("keyword").replace("_", "-")
            for found in _ARGUMENT_CLASS_KEYWORD.finditer(said)
            if found.group("owner") or called
        ]
    if finding.patch is None:
        return []
    added = {word for word in finding.patch.args_add if word.startswith("--")}

    def refused(flag: str) -> bool:
        return keyword_refusal(flag) in said or ("unrecognized arguments" in said and flag in said)

    return [
        flag
        for flag in finding.patch.args_remove
        if flag not in added and (engine_version is not None or refused(flag))
    ]
