"""Saved logs of several hosts: diagnosed host by host, summed up into fleet findings."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from diagnose.core.fleet import deployment_of, summarize_fleet
from diagnose.core.models import Diagnosis
from diagnose.inputs import journal
from diagnose.inputs.files import LogInput
from diagnose.library import load_library
from diagnose.runs.journal import JournalOptions, diagnose_journal
from tests import journalgen
from tests.conftest import feed, invoke

FLEET = Path("fixtures/fleet")
HEALTHY = "fixtures/incidents/healthy-sglang.journal.txt"  # host gpu-node-07, reached ready
TWO_NODES = [str(FLEET / "node0-store-timeout.journal.txt"), str(FLEET / "node1-oom.journal.txt")]


def _json(args: list[str]) -> tuple[int, dict]:
    result = invoke(["file", *args, "-f", "json"])
    return result.exit_code, json.loads(result.stdout)


def test_hosts_sharing_a_cause_are_one_fleet_finding(in_repo) -> None:
    code, report = _json([HEALTHY, *map(str, sorted(FLEET.glob("gpu-node-2*-oom.journal.txt")))])
    assert code == 1
    fleet = report["fleet"]
    assert [(f["category"], f["role"], f["hosts"]) for f in fleet["findings"]] == [
        ("gpu_oom", "root_cause", ["gpu-node-21", "gpu-node-22"])
    ]
    assert fleet["healthy"] == ["gpu-node-07"]
    states = {h["host"]: (h["state"], h["findings"] == []) for h in report["hosts"]}
    assert states == {
        "gpu-node-07": ("healthy", True),
        "gpu-node-21": ("failed", False),
        "gpu-node-22": ("failed", False),
    }
    # old consumers read the decisive host's report at the top level
    assert fleet["primary_host"] == "gpu-node-21"
    assert report["findings"][0]["category"] == "gpu_oom"


def test_a_node_waiting_for_a_crashed_peer_is_its_symptom(in_repo) -> None:
    code, report = _json(TWO_NODES)
    assert code == 1
    findings = {f["id"]: f for f in report["fleet"]["findings"]}
    primary = findings[report["fleet"]["primary"]]
    assert primary["hosts"] == ["gpu-node-08"]
    assert primary["role"] == "root_cause"
    (waiting,) = [f for f in findings.values() if f is not primary]
    assert (waiting["hosts"], waiting["category"]) == (["gpu-node-07"], "dist_init_hang")
    assert (waiting["role"], waiting["caused_by"]) == ("symptom", primary["id"])
    assert report["primary"] == report["hosts"][1]["primary"]  # gpu-node-08's own primary
    assert report["fleet"]["skew_tolerance_s"] == 30.0
    assert {h["deployment"] for h in report["hosts"]} == {"10.20.0.7:5000"}


def test_clock_skew_beyond_the_gap_leaves_both_as_causes(in_repo) -> None:
    _, report = _json([*TWO_NODES, "--clock-skew", "15m"])
    assert {f["role"] for f in report["fleet"]["findings"]} == {"root_cause"}
    assert report["fleet"]["skew_tolerance_s"] == 900.0


def test_a_node_of_another_deployment_is_not_linked(in_repo, tmp_path: Path) -> None:
    other = tmp_path / "node1-other-deployment.log"
    text = Path(TWO_NODES[1]).read_text()
    other.write_text(
        text.replace("dist_init_addr='10.20.0.7:5000'", "dist_init_addr='10.20.9.9:5000'")
    )
    _, report = _json([TWO_NODES[0], str(other)])
    assert [h["deployment"] for h in report["hosts"]] == ["10.20.0.7:5000", "10.20.9.9:5000"]
    assert {f["role"] for f in report["fleet"]["findings"]} == {"root_cause"}


def test_one_host_keeps_the_single_host_report(in_repo) -> None:
    _, report = _json([TWO_NODES[1]])
    assert "hosts" not in report and "fleet" not in report


def test_text_and_markdown_show_one_row_per_host(in_repo) -> None:
    text = invoke(["file", *TWO_NODES]).stdout
    markdown = invoke(["file", *TWO_NODES, "-f", "markdown"]).stdout
    assert "| gpu-node-07 | symptom |" in markdown and "fix gpu-node-08 first" in markdown
    assert "| gpu-node-08 | failed |" in markdown
    assert "gpu-node-07 │ symptom" in text and "gpu-node-08 │ failed" in text


def test_a_healthy_fleet_has_no_primary(in_repo) -> None:
    code, report = _json([HEALTHY, HEALTHY.replace("healthy-sglang", "healthy-sglang")])
    assert code == 0
    assert "fleet" not in report  # one host named twice is still one host


def test_summary_of_healthy_hosts_names_them_all() -> None:
    report = summarize_fleet({"b": Diagnosis(), "a": Diagnosis()})
    assert report.fleet is not None
    assert (report.fleet.primary, report.fleet.healthy) == (None, ["a", "b"])


# -- journal-remote: one journal file per sending host ---------------------------------------------

needs_journal_remote = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl (apt-get install systemd-journal-remote)",
)


def _remote_directory(directory: Path, fixtures: list[str]) -> Path:
    """What journal-remote writes: one journal file per host, in one directory."""
    directory.mkdir()
    for name in fixtures:
        text = (journalgen.FIXTURES / name).read_text()
        entries = journalgen.entries_from_short(text, journalgen.UNIT, seed=name)
        journalgen.write_journal(entries, directory / f"{Path(name).name.split('.')[0]}.journal")
    return directory


@pytest.fixture(params=["systemd-python", "journalctl"])
def reader(request: pytest.FixtureRequest) -> str:
    """Each journal reader in turn (systemd-python when installed)."""
    if request.param == "systemd-python":
        pytest.importorskip("systemd.journal")
    return str(request.param)


def _three_hosts(tmp_path: Path) -> Path:
    """A journal-remote directory of gpu-node-07 (healthy), gpu-node-21 and -22 (failed)."""
    fixtures = [HEALTHY, *(f"fleet/gpu-node-2{n}-oom.journal.txt" for n in (1, 2))]
    return _remote_directory(tmp_path / "remote", [f.removeprefix("fixtures/") for f in fixtures])


@needs_journal_remote
def test_a_journal_remote_directory_is_diagnosed_host_by_host(tmp_path: Path, reader: str) -> None:
    directory = _three_hosts(tmp_path)
    options = JournalOptions(unit="sglang-qwen", directory=directory, reader=reader, gpu=False)
    report = diagnose_journal(options, [], None, lambda _: None).diagnosis
    assert report.fleet is not None and report.hosts is not None
    assert [(f.category, f.hosts) for f in report.fleet.findings] == [
        ("gpu_oom", ["gpu-node-21", "gpu-node-22"])
    ]
    assert report.fleet.healthy == ["gpu-node-07"]
    assert [h.state for h in report.hosts] == ["healthy", "failed", "failed"]


@needs_journal_remote
def test_a_two_node_journal_names_the_node_that_failed_first(tmp_path: Path) -> None:
    directory = _remote_directory(
        tmp_path / "remote", [f.removeprefix("fixtures/") for f in TWO_NODES]
    )
    result = invoke(
        ["journal", "-u", "sglang-qwen", "-D", str(directory), "-f", "json", "--no-gpu"]
    )
    assert result.exit_code == 1
    fleet = json.loads(result.stdout)["fleet"]
    by_host = {f["hosts"][0]: f for f in fleet["findings"]}
    assert fleet["primary"] == by_host["gpu-node-08"]["id"]
    assert by_host["gpu-node-07"]["role"] == "symptom"
    assert by_host["gpu-node-07"]["caused_by"] == by_host["gpu-node-08"]["id"]


@pytest.mark.parametrize(
    ("args", "deployment"),
    [
        # SGLang prints its arguments as ServerArgs(...); vLLM as a dict of non-default args
        (
            "server_args=ServerArgs(nnodes=2, node_rank=1, dist_init_addr='10.20.0.7:5000')",
            "10.20.0.7:5000",
        ),
        (
            "non-default args: {'nnodes': 2, 'node_rank': 1, 'master_addr': '10.20.0.7', 'master_port': 29501}",
            "10.20.0.7:29501",
        ),
        (
            "non-default args: {'data_parallel_size': 4, 'data_parallel_address': '10.20.0.7'}",
            "10.20.0.7",
        ),
        ("non-default args: {'nnodes': 1, 'master_addr': '127.0.0.1', 'master_port': 29501}", None),
        ("server_args=ServerArgs(nnodes=1, dist_init_addr=None)", None),
    ],
)
def test_the_deployment_is_read_from_either_engines_arguments(
    args: str, deployment: str | None
) -> None:
    line = f"INFO 03-06 10:12:00 [utils.py:326] {args}"
    engine = feed([LogInput.from_text(line + "\n")])
    assert deployment_of(engine.facts) == deployment


@needs_journal_remote
def test_machines_that_share_a_hostname_are_told_apart_by_machine_id(
    tmp_path: Path, reader: str
) -> None:
    directory = tmp_path / "remote"
    directory.mkdir()
    machines = {  # two clones of one image, both named gpu-node, and one other host
        "3f2a1b9c00000000000000000000aaaa": ("incidents/healthy-sglang.journal.txt", "gpu-node"),
        "7c41e2d500000000000000000000bbbb": ("fleet/gpu-node-21-oom.journal.txt", "gpu-node"),
        "9e0f8a7b00000000000000000000cccc": ("fleet/gpu-node-22-oom.journal.txt", None),
    }
    for machine, (fixture, hostname) in machines.items():
        text = (journalgen.FIXTURES / fixture).read_text()
        if hostname is not None:
            text = "\n".join(
                " ".join([*line.split(" ")[:3], hostname, *line.split(" ")[4:]]) if line else line
                for line in text.split("\n")
            )
        entries = journalgen.entries_from_short(text, journalgen.UNIT, seed=machine)
        for entry in entries:
            entry["_MACHINE_ID"] = machine
        journalgen.write_journal(entries, directory / f"remote-{machine[:8]}.journal")
    options = JournalOptions(unit="sglang-qwen", directory=directory, reader=reader, gpu=False)
    report = diagnose_journal(options, [], None, lambda _: None).diagnosis
    assert report.hosts is not None and report.fleet is not None
    assert [(h.host, h.state) for h in report.hosts] == [
        ("gpu-node (machine 3f2a1b9c)", "healthy"),
        ("gpu-node (machine 7c41e2d5)", "failed"),
        ("gpu-node-22", "failed"),  # a name no other machine has keeps its plain label
    ]
    assert [(f.category, f.hosts) for f in report.fleet.findings] == [
        ("gpu_oom", ["gpu-node (machine 7c41e2d5)", "gpu-node-22"])
    ]


@needs_journal_remote
def test_hosts_diagnosed_in_worker_processes_give_the_same_report(tmp_path: Path) -> None:
    directory = _three_hosts(tmp_path)
    reports = []
    for jobs in (1, 2, 3):
        options = JournalOptions(
            unit="sglang-qwen", directory=directory, reader="journalctl", gpu=False, jobs=jobs
        )
        said: list[str] = []
        result = diagnose_journal(options, [], None, said.append)
        reports.append((result.diagnosis.model_dump_json(), said, result.scope.describe()))
    assert reports[0] == reports[1] == reports[2]
    assert json.loads(reports[0][0])["fleet"]["findings"][0]["hosts"] == [
        "gpu-node-21",
        "gpu-node-22",
    ]


@needs_journal_remote
def test_each_host_of_a_directory_is_read_from_its_own_files(tmp_path: Path, reader: str) -> None:
    directory = _three_hosts(tmp_path)
    machine = directory / journalgen.MACHINE_ID  # a journal's own layout: MACHINE_ID/*.journal
    machine.mkdir()
    (directory / "gpu-node-22-oom.journal").rename(machine / "system@0001-0002.journal~")
    (directory / "notes").mkdir()  # neither a journal file nor a machine's directory
    (directory / "corrupt.journal").write_bytes(b"not a journal file\n" * 64)
    said: list[str] = []
    hosts = journal.host_locations(
        journal.JournalLocation(directory=directory), reader, said.append
    )
    # left out, as journalctl leaves it out (it says so itself; systemd-python refuses it)
    assert said == (
        []
        if reader == "journalctl"
        else [
            f"{directory / 'corrupt.journal'}: "
            "cannot open the journal: [Errno 74] Bad message: left out"
        ]
    )
    assert [(h.label, [p.relative_to(directory) for p in where.files]) for h, where in hosts] == [
        ("gpu-node-07", [Path("healthy-sglang.journal")]),
        ("gpu-node-21", [Path("gpu-node-21-oom.journal")]),
        ("gpu-node-22", [machine.relative_to(directory) / "system@0001-0002.journal~"]),
    ]
    assert [(where.host, where.directory) for _, where in hosts] == [
        ("gpu-node-07", None),
        ("gpu-node-21", None),
        ("gpu-node-22", None),
    ]


@needs_journal_remote
def test_progress_names_each_host_on_stderr_never_in_the_report(tmp_path: Path) -> None:
    directory = _three_hosts(tmp_path)
    args = ["journal", "-u", "sglang-qwen", "-D", str(directory), "-f", "json", "--no-gpu"]
    shown = invoke([*args, "--progress", "-j", "1"])
    assert shown.exit_code == 1
    lines = [line for line in shown.stderr.splitlines() if line.startswith("diagnose: host ")]
    assert lines == [
        "diagnose: host 1/3 gpu-node-07: healthy",
        "diagnose: host 2/3 gpu-node-21: failed (model-too-large-for-tp)",
        "diagnose: host 3/3 gpu-node-22: failed (model-too-large-for-tp)",
    ]
    assert "diagnose: host" not in shown.stdout
    assert json.loads(shown.stdout)["fleet"]["healthy"] == ["gpu-node-07"]
    quiet = invoke(args)  # stderr is no terminal here: no progress unless asked
    assert "diagnose: host" not in quiet.stderr
    assert json.loads(quiet.stdout) == json.loads(shown.stdout)


@needs_journal_remote
def test_the_hosts_of_a_run_share_one_loaded_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _three_hosts(tmp_path)
    loads: list[tuple[Path, ...]] = []

    def counted(dirs: tuple[Path, ...]) -> list:
        loads.append(dirs)
        return load_library(dirs)

    monkeypatch.setattr("diagnose.runs.journal.load_library", counted)
    options = JournalOptions(
        unit="sglang-qwen", directory=directory, reader="journalctl", gpu=False, jobs=1
    )
    for _ in range(2):  # a second run loads it again: signatures may have changed meanwhile
        report = diagnose_journal(options, [], None, lambda _: None).diagnosis
        assert report.fleet is not None and len(report.fleet.findings) == 1
    assert loads == [(), ()]


def _rfc3339(usec: str) -> str:
    """A journal time as Loki and Elasticsearch print it: RFC 3339 in UTC, the fraction cut."""
    whole, fraction = divmod(int(usec), 1_000_000)
    stamp = datetime.fromtimestamp(whole, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:06d}".rstrip("0")
    return stamp + (f".{digits}" if digits else "") + "Z"


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("bash") is None, reason="jq")
def test_the_readme_loki_and_elasticsearch_recipes_give_the_saved_logs_report(
    tmp_path: Path, in_repo
) -> None:
    fixtures = [HEALTHY, *map(str, sorted(FLEET.glob("gpu-node-2*-oom.journal.txt")))]
    entries = sorted(
        (
            entry
            for name in fixtures
            for entry in journalgen.entries_from_short(
                Path(name).read_text(), "sglang-qwen.service"
            )
        ),
        key=lambda e: int(e["__REALTIME_TIMESTAMP"]),
    )
    loki, loki_json, hits = [], [], []
    for entry in entries:  # what each store hands back for these entries
        stamp = _rfc3339(entry["__REALTIME_TIMESTAMP"])
        labels = {
            "host": entry["_HOSTNAME"],
            "unit": entry["_SYSTEMD_UNIT"],
            "syslog_identifier": entry["SYSLOG_IDENTIFIER"],
        }
        fields = {k: v for k, v in entry.items() if not k.startswith("__")}
        loki.append({"labels": labels, "line": entry["MESSAGE"], "timestamp": stamp})
        loki_json.append({"labels": labels, "line": json.dumps(fields), "timestamp": stamp})
        source = {
            "@timestamp": stamp,
            "message": entry["MESSAGE"],
            "host": {"hostname": entry["_HOSTNAME"]},
            "systemd": {"unit": entry["_SYSTEMD_UNIT"]},
            "syslog": {"identifier": entry["SYSLOG_IDENTIFIER"]},
            "process": {"pid": int(entry["_PID"])},
        }
        hits.append({"_source": source})
    for name, lines in (("loki", loki), ("loki-json", loki_json)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "es.json").write_text(json.dumps({"hits": {"hits": hits}}))
    readme = Path("README.md").read_text(encoding="utf-8")
    recipes = readme.split("### Feeding it from elsewhere", 1)[1].split("```sh\n")[2]
    recipes = recipes.split("\n```", 1)[0]
    json_line = re.search(r"#   (jq -c .*)", recipes)
    assert json_line, "the README lost its promtail json: true recipe"
    script = f"""
        cd {tmp_path}
        logcli() {{ cat loki.jsonl; }}
        curl() {{ cat es.json; }}
        diagnose() {{  # each report in its own file (a pipeline's last command is a subshell)
            local done=$(ls report-*.json 2>/dev/null | wc -l)
            "{sys.executable}" -m diagnose "$@" -f json > report-$((done + 1)).json
            echo $? >> codes
        }}
        {recipes}
        cat loki-json.jsonl | {json_line.group(1)} | diagnose file -
    """
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert (tmp_path / "codes").read_text().split() == ["1", "1", "1"], run.stderr  # findings
    _, saved = _json(fixtures)
    for number in (1, 2, 3):
        report = json.loads((tmp_path / f"report-{number}.json").read_text())
        assert report["fleet"]["findings"] == saved["fleet"]["findings"]
        assert report["fleet"]["healthy"] == ["gpu-node-07"]
        assert [h["primary"] for h in report["hosts"]] == [h["primary"] for h in saved["hosts"]]
