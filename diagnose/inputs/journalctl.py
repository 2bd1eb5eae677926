"""``journalctl -o json`` in a subprocess: the journal reader when systemd-python is not
installed, loaded only then."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator

from diagnose.core.errors import UserError
from diagnose.inputs import journal
from diagnose.inputs.journal import BOOT_ID_FORM, Entry, JournalLocation, Keep

JSON_REALTIME = re.compile(rb'"__REALTIME_TIMESTAMP":"(\d+)"')


def in_bounds(stamp: int, since: int | None, until: int | None) -> bool:
    return (since is None or stamp >= since) and (until is None or stamp <= until)


class JournalctlBackend:
    """``journalctl -o json`` in a subprocess, with the same matches on its command line."""

    name = "journalctl"

    def __init__(self, location: JournalLocation, journalctl: str = "journalctl") -> None:
        found = shutil.which(journalctl)
        if found is None:
            raise UserError(
                "journalctl is not installed, and neither is systemd-python",
                help="install systemd (journalctl), or pip install 'diagnose[journald]'",
            )
        self.journalctl = found
        self.location = location
        self.skipped = 0
        self.last_skipped_us: int | None = None

    def _base(self) -> list[str]:
        command = [self.journalctl, "--no-pager", "-q"]
        command += [f"--file={f}" for f in self.location.files]
        if self.location.directory is not None:
            command.append(f"--directory={self.location.directory}")
        return command

    def entries(
        self,
        groups: list[list[str]],
        since: int | None,
        until: int | None,
        reverse: bool,
        fields: Iterable[str],
        keep: Keep | None = None,
    ) -> Iterator[Entry]:
        command = [*self._base(), "-o", "json", "--all", "--output-fields=" + ",".join(fields)]
        self.skipped, self.last_skipped_us = 0, None
        if since is not None:
            command.append(f"--since=@{since // 1_000_000}")
        if until is not None:
            command.append(f"--until=@{until // 1_000_000 + 1}")
        if reverse:
            command.append("--reverse")
        for i, group in enumerate(groups):
            if i:
                command.append("+")
            command += self.location.matches(group)
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        assert process.stdout is not None
        finished = False
        try:
            lines: Iterable[bytes] = process.stdout
            if keep is not None:
                lines = self._kept(process.stdout, keep)
            for line in lines:
                if not line.strip():
                    continue
                entry = json.loads(line)
                stamp = int(entry.get("__REALTIME_TIMESTAMP", "0"))
                if reverse and since is not None and stamp < since:
                    break
                if not reverse and until is not None and stamp > until:
                    break
                if in_bounds(stamp, since, until):
                    yield entry
            else:
                finished = True
        finally:
            if not finished:
                process.kill()
            process.stdout.close()
            error = (
                process.stderr.read().decode("utf-8", "replace").strip() if process.stderr else ""
            )
            code = process.wait()
            if process.stderr:
                process.stderr.close()
        if finished and code not in (0, 1):  # 1: no entries matched (older journalctl)
            raise UserError(
                f"journalctl failed (exit {code}): {error or 'no message'}",
                help="check --file/-D, and that you may read the journal (sudo, systemd-journal)",
            )

    def _kept(self, lines: Iterable[bytes], keep: Keep) -> Iterator[bytes]:
        """The JSON lines ``keep`` chooses, judged a batch at a time on their raw text."""
        batch: list[bytes] = []
        for line in lines:
            batch.append(line)
            if len(batch) == journal.BATCH:  # read at run time: a test makes batches small
                yield from self._judge(batch, keep)
                batch = []
        if batch:
            yield from self._judge(batch, keep)

    def _judge(self, batch: list[bytes], keep: Keep) -> Iterator[bytes]:
        chosen = keep(batch)
        self.skipped += len(batch) - len(chosen)
        if len(chosen) < len(batch):
            stamp = JSON_REALTIME.search(batch[-1])
            self.last_skipped_us = int(stamp.group(1)) if stamp else self.last_skipped_us
        for index in chosen:
            yield batch[index]

    def machines(self) -> tuple[list[tuple[str, str]], list[str]]:
        names = self._field_values("_HOSTNAME")
        ids = self._field_values("_MACHINE_ID")
        if len(ids) == 1 and len(names) == 1:  # journal-remote's file of one host
            return [(names[0], ids[0])], names
        machines = []
        for machine in ids:
            last_entry = ["-n", "1", "-o", "json", "--output-fields=_HOSTNAME"]
            newest = subprocess.run(
                [*self._base(), *last_entry, f"_MACHINE_ID={machine}"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            name = json.loads(newest).get("_HOSTNAME") if newest.startswith("{") else None
            if isinstance(name, str):
                machines.append((name, machine))
        return machines, names

    def _field_values(self, name: str) -> list[str]:
        result = subprocess.run(
            [*self._base(), f"--field={name}"], capture_output=True, text=True, check=False
        )
        return sorted({line.strip() for line in result.stdout.splitlines() if line.strip()})

    def boots(self) -> list[str]:
        try:
            result = subprocess.run(
                [*self._base(), "--list-boots"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=LIST_BOOTS_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise UserError(
                f"journalctl --list-boots did not answer within {LIST_BOOTS_TIMEOUT_S}s",
                help="pass -b BOOT_ID, or check journald: systemctl status systemd-journald",
            ) from None
        boots = []
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and BOOT_ID_FORM.match(parts[1]):
                boots.append(parts[1])
        return boots


LIST_BOOTS_TIMEOUT_S = 60
