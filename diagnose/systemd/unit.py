"""The unit that really runs: unit file, drop-ins and EnvironmentFile=, parsed as systemd does.

Syntax (systemd.syntax(7), systemd.service(5), systemd.exec(5)):

* A line ending in ``\\`` continues on the next one (the backslash becomes a space); comment
  lines inside a continuation are skipped. ``#`` and ``;`` start a comment only at the start
  of a line: ``User=bob  # me`` sets ``User`` to ``bob  # me``.
* A line that is not ``[Section]`` or ``Key=value`` is ignored with a warning, as systemd does.
* ``ExecStart=`` splits into words with systemd's quoting (single and double quotes anywhere
  in a word, C escapes); ``$VAR``/``${VAR}`` and ``%`` specifiers are kept as written, so a
  word written back means the same to systemd. The ``-@:+!`` prefixes are kept apart.
* An empty ``ExecStart=`` or ``Environment=`` (in a drop-in) resets what came before.
  Drop-ins apply in file-name order; ``EnvironmentFile=`` settings override ``Environment=``.

>>> split_words('/bin/vllm serve m --cfg \\'{"a": [1, 2]}\\' "x y"')
['/bin/vllm', 'serve', 'm', '--cfg', '{"a": [1, 2]}', 'x y']
>>> quote_word('{"a": 1}')
'\\'{"a": 1}\\''
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.core.dropin import (
    DROPIN_NAME,
    UnsafeDropin,
    escape_literal,
    flag_groups,
    quote_word,
    render_dropin,
    split_fixes,
)
from diagnose.core.errors import UserError
from diagnose.core.models import Patch

UNIT_DIRS = (
    "etc/systemd/system.control",
    "run/systemd/system.control",
    "run/systemd/transient",
    "run/systemd/generator.early",
    "etc/systemd/system",
    "etc/systemd/system.attached",
    "run/systemd/system",
    "run/systemd/system.attached",
    "run/systemd/generator",
    "usr/local/lib/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
    "run/systemd/generator.late",
)
"""The system manager's unit search path, highest priority first (relative to the root),
as ``systemd-analyze unit-paths`` lists it (``lib/`` for distributions without merged /usr)."""
ENCODING = {"encoding": "utf-8", "errors": "surrogateescape"}
"""How unit files are read and written: bytes that are not UTF-8 survive a round trip."""
EXEC_PREFIXES = "-@:+!"
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Setting:
    section: str
    key: str
    value: str
    path: str
    line: int


@dataclass
class ParsedFile:
    path: str
    settings: list[Setting] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ignored: list[Setting] = field(default_factory=list)
    """Assignments systemd ignores because they are not UTF-8 (in a unit file, the unit then
    fails to load)."""


_LINE_END = re.compile(r"\r\n|\r|\n|\0")
"""Where systemd's line reader ends a line: a NUL byte ends one too."""
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
"""A byte that is not UTF-8, as read with ``surrogateescape``."""


def parse_unit_text(text: str, path: str = "<unit>") -> ParsedFile:
    """Settings of one unit file or drop-in, in order, with warnings for what systemd ignores."""
    parsed = ParsedFile(path)
    section: str | None = None
    lines = _LINE_END.split(text)
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#;":
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " "
            while i < len(lines) and lines[i].lstrip()[:1] in ("#", ";"):
                i += 1  # comment lines inside a continuation are skipped
            if i < len(lines):
                line += lines[i].strip()
                i += 1
        if line.endswith("\\"):
            line = line[:-1]
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if "=" not in line:
            parsed.warnings.append(
                f"{path}:{number}: not a Key=value line, ignored (as systemd does): {line[:60]!r}"
            )
            continue
        if section is None:
            parsed.warnings.append(f"{path}:{number}: assignment before any [Section], ignored")
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if _NOT_UTF8.search(line):
            parsed.warnings.append(
                f"{path}:{number}: {key}= is not UTF-8: systemd ignores the assignment "
                '("String is not UTF-8 clean")'
            )
            parsed.ignored.append(Setting(section, key, value, path, number))
            continue
        if re.search(r"\s[#;]", value) and section in ("Service", "Unit"):
            parsed.warnings.append(
                f"{path}:{number}: {key}= value contains ' #': systemd has no inline comments, "
                f"so it is part of the value: {value!r}"
            )
        parsed.settings.append(Setting(section, key, value, path, number))
    return parsed


def split_words(text: str) -> list[str]:
    """Words as systemd's ``extract_first_word(UNQUOTE|CUNESCAPE|RELAX)`` splits them."""
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\n\r":
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote: str | None = None
        while i < n:
            ch = text[i]
            if quote is None and ch in " \t\n\r":
                break
            if ch == "\\" and i + 1 < n:
                escaped, i = _unescape(text, i + 1)
                word.append(escaped)
                continue
            if quote is None and ch in "'\"":
                quote = ch
            elif quote is not None and ch == quote:
                quote = None
            else:
                word.append(ch)
            i += 1
        words.append("".join(word))


def _unescape(text: str, i: int) -> tuple[str, int]:
    """The character(s) a backslash escape at ``text[i-1]`` stands for, and the next index."""
    ch = text[i]
    if ch in _ESCAPES:
        return _ESCAPES[ch], i + 1
    if ch == "x" and re.match(r"[0-9a-fA-F]{2}", text[i + 1 : i + 3]):
        return chr(int(text[i + 1 : i + 3], 16)), i + 3
    if ch in "01234567" and re.match(r"[0-7]{3}", text[i : i + 3]):
        return chr(int(text[i : i + 3], 8)), i + 3
    if ch == "u" and re.match(r"[0-9a-fA-F]{4}", text[i + 1 : i + 5]):
        return chr(int(text[i + 1 : i + 5], 16)), i + 5
    return "\\" + ch, i + 1  # relaxed: an unknown escape stays as written


@dataclass
class ExecCommand:
    prefix: str
    argv: list[str]
    """Words as written, quotes removed; ``$VAR`` and ``%i`` kept."""

    @classmethod
    def parse(cls, value: str) -> ExecCommand:
        stripped = value.lstrip()
        prefix = ""
        while stripped and stripped[0] in EXEC_PREFIXES:
            prefix += stripped[0]
            stripped = stripped[1:]
        return cls(prefix, split_words(stripped))

    def render(self, width: int = 100) -> str:
        """The command as an ``ExecStart=`` value; longer than ``width``, one flag a line
        with ``\\`` continuations (systemd reads them back as one line)."""
        words = [quote_word(word) for word in self.argv]
        flat = self.prefix + " ".join(words)
        if len(flat) + len("ExecStart=") <= width:
            return flat
        lines = [self.prefix + (words[0] if words else "")]
        for word, raw in zip(words[1:], self.argv[1:], strict=True):
            if raw.startswith("-") or len(lines) == 1:
                lines.append(word)
            else:
                lines[-1] += " " + word
        return " \\\n  ".join(lines)

    @property
    def through_shell(self) -> bool:
        """``bash -c '...'``: flags appended to it would not reach the server."""
        if not self.argv:
            return False
        program = self.argv[0].rsplit("/", 1)[-1]
        return program in SHELLS and any(w.startswith("-") and "c" in w for w in self.argv[1:3])


@dataclass
class EnvironmentFile:
    path: str
    optional: bool
    loaded: bool = False
    values: dict[str, str] = field(default_factory=dict)
    unreadable: str | None = None
    """Why it could not be read (its variables are unknown); None when read or absent."""


@dataclass
class UnitConfig:
    """The effective configuration of a unit: its file, its drop-ins, its environment files."""

    name: str
    fragment: str | None
    dropins: list[str] = field(default_factory=list)
    settings: list[Setting] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    exec_start: list[ExecCommand] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    """From Environment= (no expansion: ``$PATH`` stays as written)."""
    environment_files: list[EnvironmentFile] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)
    """UnsetEnvironment=: removed from the environment last, whatever set them."""
    ignored: list[Setting] = field(default_factory=list)
    """Assignments systemd ignores (not UTF-8)."""
    problems: list[str] = field(default_factory=list)
    """What makes the unit itself wrong (category ``unit_config``)."""
    fingerprint: str = ""
    """A digest of the unit file and drop-ins as read: ``--apply`` refuses a unit changed since."""

    def values(self, section: str, key: str) -> list[str]:
        return [s.value for s in self.settings if s.section == section and s.key == key]

    def get(self, section: str, key: str) -> str | None:
        values = self.values(section, key)
        return values[-1] if values else None

    @property
    def command(self) -> ExecCommand | None:
        return self.exec_start[-1] if self.exec_start else None

    @property
    def effective_environment(self) -> dict[str, str]:
        """Environment= then every loaded EnvironmentFile=, later ones winning; then
        UnsetEnvironment= removes its names (``NAME`` or only ``NAME=value``)."""
        merged = dict(self.environment)
        for env_file in self.environment_files:
            merged.update(env_file.values)
        for entry in self.unset:
            name, has_value, value = entry.partition("=")
            if name in merged and (not has_value or merged[name] == value):
                del merged[name]
        return merged


def parse_environment_assignments(value: str) -> list[tuple[str, str]]:
    """``Environment=`` words: ``A=1 "B=two words"`` -> [(A, 1), (B, two words)]."""
    pairs = []
    for word in split_words(value):
        if "=" in word:
            key, val = word.split("=", 1)
            if _ENV_NAME.match(key):
                pairs.append((key, val.replace("%%", "%")))
    return pairs


def parse_environment_file(text: str) -> dict[str, str]:
    """An EnvironmentFile=: ``KEY=value`` lines; quotes removed; ``#``/``;`` comment lines;
    ``\\`` at the end of an unquoted line continues it. No variable expansion."""
    values: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#;":
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        if "=" not in line:
            continue
        key, raw = line.split("=", 1)
        key = key.strip()
        if not _ENV_NAME.match(key):
            continue
        values[key] = _env_value(raw.strip())
    return values


def _env_value(raw: str) -> str:
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(raw):
        ch = raw[i]
        if quote == "'":
            if ch == "'":
                quote = None
            else:
                out.append(ch)
        elif quote == '"':
            if ch == '"':
                quote = None
            elif ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\`$':
                i += 1
                out.append(raw[i])
            else:
                out.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch == "\\" and i + 1 < len(raw):
            i += 1
            out.append(raw[i])
        else:
            out.append(ch)
        i += 1
    return "".join(out).rstrip() if quote is None else "".join(out)


def build_config(
    name: str,
    fragment: tuple[str, str] | None,
    dropins: Iterable[tuple[str, str]] = (),
    root: Path | None = None,
) -> UnitConfig:
    """Merge a unit file and its drop-ins (``(path, text)`` pairs, in order)."""
    config = UnitConfig(name=name, fragment=fragment[0] if fragment else None)
    sources = [*([fragment] if fragment else []), *dropins]
    config.fingerprint = hashlib.sha256(
        "\0".join(f"{path}\0{text}" for path, text in sources).encode("utf-8", "surrogateescape")
    ).hexdigest()
    for path, text in sources:
        parsed = parse_unit_text(text, path)
        if path != config.fragment:
            config.dropins.append(path)
        config.warnings += parsed.warnings
        config.ignored += parsed.ignored
        for setting in parsed.settings:
            config.settings.append(setting)
            _apply(config, setting)
    if not config.exec_start and config.get("Service", "Type") != "oneshot":
        config.problems.append(
            f"{name} has no ExecStart=: systemd refuses to start it "
            '("Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing.")'
        )
    for env_file in config.environment_files:
        _load_environment_file(config, env_file, root)
    return config


def _apply(config: UnitConfig, setting: Setting) -> None:
    if setting.section != "Service":
        return
    key, value = setting.key, setting.value
    if key == "ExecStart":
        if not value:
            config.exec_start.clear()
        else:
            config.exec_start.append(ExecCommand.parse(value))
    elif key == "Environment":
        if not value:
            config.environment.clear()
        else:
            config.environment.update(parse_environment_assignments(value))
    elif key == "EnvironmentFile":
        if not value:
            config.environment_files.clear()
        else:
            optional = value.startswith("-")
            config.environment_files.append(EnvironmentFile(value.lstrip("-").strip(), optional))
    elif key == "UnsetEnvironment":
        if not value:
            config.unset.clear()
        else:
            config.unset += split_words(value)


def _load_environment_file(
    config: UnitConfig, env_file: EnvironmentFile, root: Path | None
) -> None:
    if "%" in env_file.path:
        env_file.unreadable = "its path holds % specifiers, which only systemd resolves"
        config.warnings.append(
            f"EnvironmentFile={env_file.path}: specifiers are resolved by systemd; not read here"
        )
        return
    path = under_root(root, env_file.path)
    try:
        text = path.read_text(**ENCODING)
    except FileNotFoundError:
        if not env_file.optional:
            config.problems.append(
                f"EnvironmentFile={env_file.path} does not exist: systemd fails the start "
                "(status=226/NAMESPACE or 'Failed to load environment files')"
            )
        return
    except OSError as error:
        env_file.unreadable = f"cannot read it: {error.strerror}"
        config.warnings.append(f"EnvironmentFile={env_file.path}: cannot read: {error.strerror}")
        return
    env_file.values = parse_environment_file(text)
    env_file.loaded = True


def under_root(root: Path | None, path: str) -> Path:
    """``path`` (absolute, as a unit names it) under ``root`` when there is one, its symlinks
    resolved inside ``root`` as a chroot would: an absolute link target, or ``..`` past the
    top, stays under ``root`` and never reads the host's own files."""
    if root is None:
        return Path(path)
    top = root.resolve()
    resolved = top
    pending = [part for part in Path(path).parts if part not in ("/", "", ".")]
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            resolved = resolved.parent if resolved != top else top
            continue
        candidate = resolved / part
        if candidate.is_symlink() and hops < _MAX_SYMLINKS:
            hops += 1
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = top
            pending = [p for p in Path(target).parts if p not in ("/", "", ".")] + pending
            continue
        resolved = candidate
    return resolved


_MAX_SYMLINKS = 40
"""As the kernel: past this many links in one path, stop following (a loop)."""


# -- finding the unit ---------------------------------------------------------------------


def read_unit_text(path: Path, without_fixes: bool = False) -> str:
    """A unit file or drop-in as text (bytes that are not UTF-8 kept as surrogate escapes);
    ``without_fixes``: diagnose's own marked fix blocks left out."""
    text = path.read_text(**ENCODING)
    return split_fixes(text)[0] if without_fixes else text


def load_unit_file(
    path: Path, name: str | None = None, root: Path | None = None, without_fixes: bool = False
) -> UnitConfig:
    """A unit from a file (``--unit-file``), with drop-ins from ``PATH.d/*.conf`` beside it and,
    under a root, the drop-ins systemd would read for it there."""
    unit = name or path.name
    try:
        text = path.read_text(**ENCODING)
    except OSError as error:
        raise UserError(f"{path}: cannot read the unit file: {error.strerror}") from None
    directory = Path(f"{path}.d")
    found = {d.name: d for d in sorted(directory.glob("*.conf"))} if directory.is_dir() else {}
    if root is not None:
        for conf in dropin_paths(unit, root):
            found.setdefault(conf.name, conf)
    dropins = [found[key] for key in sorted(found)]
    return build_config(
        unit,
        (str(path), text),
        [(str(d), read_unit_text(d, without_fixes)) for d in dropins],
        root,
    )


def dropin_dir_names(name: str) -> list[str]:
    """The ``.d`` directories systemd reads for a unit, most specific first: the unit, its
    template, each dash prefix (``a-b-.service.d``, ``a-.service.d``), its type (``service.d``).

    >>> dropin_dir_names("vllm-qwen@2.service")
    ['vllm-qwen@2.service.d', 'vllm-qwen@.service.d', 'vllm-.service.d', 'service.d']
    """
    stem, _, kind = name.rpartition(".")
    names = unit_file_names(name)
    base = stem.split("@", 1)[0]
    parts = base.split("-")
    for i in range(len(parts) - 1, 0, -1):
        names.append("-".join(parts[:i]) + "-." + kind)
    names.append(kind)
    return [f"{n}.d" for n in dict.fromkeys(names)]


def dropin_paths(name: str, root: Path) -> list[Path]:
    """Every drop-in systemd applies to ``name`` under ``root``, in the order it applies them:
    by file name across all directories; of two files with one name, the one in the
    higher-priority directory (``/etc`` before ``/run`` before ``/usr/lib``) is read."""
    found: dict[str, Path] = {}
    for directory in UNIT_DIRS:
        for folder_name in dropin_dir_names(name):
            folder = root / directory / folder_name
            if not folder.is_dir():
                continue
            for conf in sorted(folder.glob("*.conf")):
                found.setdefault(conf.name, conf)
    return [found[key] for key in sorted(found)]


def fragment_path(name: str, root: Path) -> Path | None:
    """The unit file systemd loads for ``name`` under ``root``: the first in the search path
    (the unit itself before its template)."""
    for directory in UNIT_DIRS:
        for candidate in unit_file_names(name):
            path = root / directory / candidate
            if path.is_file():
                return path
    return None


def find_unit(
    name: str, root: Path, exclude: Iterable[str] = (), without_fixes: bool = False
) -> UnitConfig | None:
    """A unit from a root's search path (what ``systemctl --root`` would load): its file and
    every drop-in systemd would apply. ``without_fixes``: diagnose's own blocks left out."""
    fragment = fragment_path(name, root)
    if fragment is None:
        return None
    excluded = set(exclude)
    dropins = [d for d in dropin_paths(name, root) if d.name not in excluded]
    return build_config(
        name,
        (str(fragment), fragment.read_text(**ENCODING)),
        [(str(d), read_unit_text(d, without_fixes)) for d in dropins],
        root,
    )


def unit_file_names(name: str) -> list[str]:
    """The unit, then its template (``a@b.service`` -> ``a@.service``)."""
    names = [name]
    if "@" in name:
        head, tail = name.split("@", 1)
        names.append(f"{head}@.{tail.rsplit('.', 1)[-1]}")
    return names


_CAT_HEADER = re.compile(r"^# (/\S+)$")


def parse_systemctl_cat(text: str) -> list[tuple[str, str]]:
    """``systemctl cat UNIT`` output split into ``(path, text)`` per file."""
    files: list[tuple[str, list[str]]] = []
    previous_blank = True
    for line in text.splitlines():
        header = _CAT_HEADER.match(line)
        if header and previous_blank and header.group(1).endswith((".service", ".conf")):
            files.append((header.group(1), []))
        elif files:
            files[-1][1].append(line)
        previous_blank = not line.strip()
    out = []
    for path, lines in files:
        while lines and not lines[-1].strip():
            lines.pop()
        out.append((path, "\n".join(lines) + "\n"))
    return out


def systemctl_unit(
    name: str, exclude: Iterable[str] = (), user: bool = False, without_fixes: bool = False
) -> UnitConfig | None:
    """The unit as the running systemd has it (``systemctl [--user] cat``), or None.
    ``without_fixes``: diagnose's own blocks left out."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        result = subprocess.run(
            [systemctl, *(["--user"] if user else []), "cat", "--no-pager", name],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    output = result.stdout.decode(**ENCODING)
    if result.returncode != 0 or not output.strip():
        return None
    files = parse_systemctl_cat(output)
    if not files:
        return None
    excluded = set(exclude)
    dropins = [
        (path, split_fixes(text)[0] if without_fixes else text)
        for path, text in files[1:]
        if Path(path).name not in excluded
    ]
    return build_config(name, files[0], dropins)


# -- patches against the unit -------------------------------------------------------------


def _flag(word: str) -> str:
    return word.split("=", 1)[0].replace("_", "-") if word.startswith("--") else word


def _takes_value(argv: list[str], index: int) -> bool:
    word = argv[index]
    return "=" not in word and index + 1 < len(argv) and not argv[index + 1].startswith("-")


def remove_flags(argv: list[str], flags: Iterable[str]) -> list[str]:
    """``argv`` without ``flags`` and their values (``--f v`` and ``--f=v``; ``_``/``-`` alike);
    a word of ``flags`` that is no option (``trust_remote_code=True`` given as an argument) is
    removed where it stands alone."""
    flags = list(flags)
    wanted = {_flag(f) for f in flags if f.startswith("-")}
    stray = {f for f in flags if not f.startswith("-")}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if i > 0 and word.startswith("-") and _flag(word) in wanted:
            i += 2 if _takes_value(argv, i) else 1
            continue
        after_option = i > 1 and argv[i - 1].startswith("-") and _takes_value(argv, i - 1)
        if i > 0 and word in stray and not after_option:
            i += 1
            continue
        out.append(word)
        i += 1
    return out


def patched_argv(argv: list[str], patch: Patch) -> list[str]:
    """The command line with ``args_remove`` dropped and ``args_add`` set (a flag already
    there is replaced, not repeated). Added words are literal: ``%`` and ``$`` are escaped."""
    result = remove_flags(argv, patch.args_remove)
    for group in flag_groups(patch.args_add):
        if group[0].startswith("-"):
            result = remove_flags(result, [group[0]])
        result += [escape_literal(word) for word in group]
    return result


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def variable_words(argv: list[str], environment: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """What each ``$VAR``/``${VAR}`` in ``argv`` expands to, as systemd expands ExecStart=: a
    word that is exactly ``$VAR`` becomes the value's words, ``${VAR}`` inside a word one word;
    ``$$`` is a literal ``$``. A variable nothing defines maps to ``()``."""
    found: dict[str, tuple[str, ...]] = {}
    for word in argv:
        for part in word.split("$$"):
            for match in _VARIABLE.finditer(part):
                name = match.group(1) or match.group(2)
                if match.group(2) and part != f"${name}":
                    continue  # braceless inside a word: systemd leaves it as written
                if name in environment:
                    value = environment[name]
                    found[name] = tuple(value.split()) if match.group(2) else (value,)
                else:
                    found.setdefault(name, ())
    return found


def patch_blocker(config: UnitConfig, patch: Patch) -> str | None:
    """Why the flags of ``patch`` cannot be changed exactly from a drop-in, or None.

    A word taken from ``$VAR`` is kept as written when the variable does not hold a flag the
    patch changes (the result is exact); a variable that does, or that nothing defines, or an
    EnvironmentFile= that cannot be read, is a reason to refuse rather than guess."""
    command = config.command
    if command is None:
        return f"{config.name} has no ExecStart= to change; add the flags to your command line"
    if command.through_shell:
        return (
            "ExecStart= runs a shell script, and the server's flags are inside it: change them "
            "in the script"
        )
    unreadable = [f for f in config.environment_files if f.unreadable]
    variables = variable_words(command.argv, config.effective_environment)
    if unreadable and variables:
        env_file = unreadable[0]
        return (
            f"ExecStart= uses ${next(iter(variables))} and EnvironmentFile={env_file.path} "
            f"{env_file.unreadable}: its value is unknown, so the new command line could be wrong"
        )
    touched = {_flag(word) for word in [*patch.args_remove, *patch.args_add] if word[:1] == "-"}
    for name, words in variables.items():
        defined = name in config.effective_environment
        if not defined:
            return (
                f"ExecStart= uses ${name}, which no Environment= or EnvironmentFile= defines "
                "(systemd expands it to nothing): define it, or remove it from ExecStart="
            )
        held = [word for word in words if word.startswith("-") and _flag(word) in touched]
        if held:
            return (
                f"{held[0]} is set inside ${name} ({name}={config.effective_environment[name]}), "
                f"not in ExecStart= itself: change it where {name} is set"
            )
    return None


@dataclass
class RenderedPatch:
    dropin: str | None
    diff: str
    """Unified diff of the effective command line (a flag and its values a line) and
    environment."""
    exec_start: str | None
    note: str | None = None


def render_patch(patch: Patch, config: UnitConfig) -> RenderedPatch:
    """The drop-in for ``patch`` against ``config``, and what it changes."""
    command = config.command
    exec_start = None
    note = None
    before_argv = command.argv if command else []
    after_argv = before_argv
    if patch.args_add or patch.args_remove:
        note = patch_blocker(config, patch)
        if note is None and command is not None:
            after_argv = patched_argv(command.argv, patch)
            exec_start = ExecCommand(command.prefix, after_argv).render()
    before_env = config.effective_environment
    after_env = {k: v for k, v in before_env.items() if k not in patch.env_unset}
    after_env.update(patch.env_set)
    before = [
        *(f"argv: {shlex.join(g)}" for g in flag_groups(before_argv)),  # a flag with its value
        *(f"env: {k}={v}" for k, v in sorted(before_env.items())),
    ]
    after = [
        *(f"argv: {shlex.join(g)}" for g in flag_groups(after_argv)),
        *(f"env: {k}={v}" for k, v in sorted(after_env.items())),
    ]
    import difflib  # only here: a run with no unit to patch does not load it

    diff = "\n".join(difflib.unified_diff(before, after, "before", "after", lineterm="", n=0))
    comments = [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")
    ]
    try:
        dropin = render_dropin(patch, config.name, exec_start=exec_start, notes=_notes(comments))
    except UnsafeDropin as refused:
        return RenderedPatch(None, diff, None, refused.message)
    return RenderedPatch(dropin, diff, exec_start, note)


def _notes(changes: list[str]) -> list[str]:
    if not changes:
        return []
    return ["What this changes in the effective unit:", *(f"  {line}" for line in changes)]


def parse_rendered_exec_start(dropin: str) -> list[str] | None:
    """The argv of the last non-empty ExecStart= in a drop-in (for round-trip checks)."""
    parsed = parse_unit_text(dropin, DROPIN_NAME)
    commands = [s.value for s in parsed.settings if s.key == "ExecStart" and s.value]
    return ExecCommand.parse(commands[-1]).argv if commands else None
