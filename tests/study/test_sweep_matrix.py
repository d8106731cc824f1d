"""The matrix of `attncard sweep` against hostile input (issue 42): a YAML alias bomb is refused at load time
in a short message, a name with a line break or another control character cannot forge a line of the sweep's
report, values quoted in an error are shown with their control characters visible and cut short, and a run's
resources must be finite and within what a node can have; on Ray, a run that no node of the cluster can hold
is refused before anything is submitted."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.study.matrix import MatrixError, RunResources, read_matrix
from attncard.pipeline.study.plan import SweepRun
from conftest import write_sst2_folder

DENSE = "model: minilm, module: none, task: sst2, steps: 2"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _refused(tmp_path: Path, text: str) -> str:
    """The message of the MatrixError that reading `text` as a matrix raises."""
    with pytest.raises(MatrixError) as raised:
        read_matrix(_write(tmp_path, text))
    return str(raised.value)


def _alias_bomb(levels: int = 7) -> str:
    """The billion laughs in YAML, as a row's steps: each level a list of nine aliases of the one before; an
    error that quotes the steps (as `steps [...] is not a whole number` did) expands them all, 9**levels
    times "lol" (the 452-byte bomb of issue 42 had 9 levels; 7 keep the code before the fix at seconds)."""
    levels_text = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        levels_text.append(f"&{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "runs:\n  - {model: minilm, module: none, task: sst2, steps: [" + ", ".join(levels_text) + "]}\n"


# --- YAML aliases and the file's size ----------------------------------------------------------------------


def test_a_yaml_alias_bomb_is_refused_quickly_in_a_short_message(tmp_path):
    text = _alias_bomb()
    assert len(text) < 600
    started = time.monotonic()
    message = _refused(tmp_path, text)
    assert time.monotonic() - started < 2
    assert len(message) < 300 and "\n" not in message, message[:1000]
    assert message.startswith(f"{tmp_path / 'matrix.yaml'}:2: ") and "aliases" in message, message


@pytest.mark.parametrize(
    "text",
    [
        "seeds: &s [0, 1]\nruns:\n  - {" + DENSE + "}\n",  # an anchor alone
        "seeds: [0]\nruns:\n  - &row {" + DENSE + "}\n  - *row\n",  # an alias of a row
    ],
)
def test_any_anchor_or_alias_is_refused(tmp_path, text):
    message = _refused(tmp_path, text)
    assert "YAML anchors and aliases (&name, *name) are not accepted in a matrix" in message, message


@pytest.mark.parametrize("depth", [17, 100_000])
def test_a_matrix_nested_deeper_than_any_matrix_is_refused_in_a_short_message(tmp_path, depth):
    """PyYAML builds nested nodes by recursion: 100,000 brackets ended in a RecursionError traceback."""
    message = _refused(tmp_path, "runs:\n  - {" + DENSE + ", seeds: " + "[" * depth + "]" * depth + "}\n")
    assert message.startswith(f"{tmp_path / 'matrix.yaml'}:2: ") and len(message) < 300, message[:1000]
    assert "nests deeper than 16 levels" in message, message


def test_a_matrix_file_larger_than_the_cap_is_refused_before_it_is_parsed(tmp_path):
    text = "runs:\n  - {" + DENSE + "}\n" + "#" * (2**20) + "\n"
    message = _refused(tmp_path, text)
    assert "is larger than 1 MiB" in message and len(message) < 300, message


def test_the_command_line_prints_the_alias_bomb_in_one_short_line(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    argv = ["sweep", str(_write(tmp_path, _alias_bomb())), "--data-dir", str(write_sst2_folder(tmp_path))]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--output", str(tmp_path / "runs")])
    assert code == 2 and err.getvalue().count("\n") == 1 and len(err.getvalue()) < 300, err.getvalue()[:500]
    assert not (tmp_path / "runs").exists()


# --- names and quoted values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "shown"),
    [
        (
            '{model: "org/model\\nran      forged-run: PASS, accuracy 1.0000", module: none, task: sst2}',
            "model",
        ),
        ('{model: minilm, module: "none\\r", task: sst2}', "module"),
        ('{model: minilm, module: none, task: "sst2\\u2028x"}', "task"),
        ('{model: "org/a\\tb", module: none, task: sst2}', "model"),
        ('{model: "org/a\\x1b[2Jb", module: none, task: sst2}', "model"),
    ],
)
def test_a_name_with_a_control_character_is_refused_naming_the_row(tmp_path, row, shown):
    message = _refused(tmp_path, f"runs:\n  - {{{DENSE}}}\n  - {row}\n")
    assert message.startswith(f"{tmp_path / 'matrix.yaml'}:3: row 2: {shown} ")
    assert "is not one line of printable text" in message and message.isprintable(), message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("runs:\n  - {" + DENSE + ', "bad\\nkey": 1}\n', "unknown key 'bad\\nkey'"),
        ("runs:\n  - {" + DENSE + ', steps: "2\\n3"}\n', "steps '2\\n3' is not a whole number"),
        ('seeds: ["0\\n1"]\nruns:\n  - {' + DENSE + "}\n", "'0\\n1' is not a whole number"),
        ("runs:\n  - {" + DENSE + ', resources: {cpus: "x\\ny"}}\n', "cpus 'x\\ny' is not a number"),
        ("runs:\n  - {" + DENSE + ', steps: "' + "9" * 5000 + '"}\n', "steps '9999"),
    ],
)
def test_a_value_quoted_in_an_error_shows_its_control_characters_and_is_cut_short(tmp_path, text, message):
    shown = _refused(tmp_path, text)
    assert message in shown and shown.isprintable() and len(shown) < 300, shown[:1000]


def test_a_long_name_is_refused_in_a_short_message(tmp_path):
    message = _refused(tmp_path, "runs:\n  - {model: minilm, module: " + "x" * 100_000 + ", task: sst2}\n")
    assert "module 'xxxx" in message and "is longer than 512 characters" in message and len(message) < 300


# --- resources ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ("{memory_gib: 1.0e+300}", "memory_gib 1e+300 is more than a node has (at most 65536)"),
        ("{cpus: 1000000}", "cpus 1000000 is more than a node has (at most 4096)"),
        ("{gpus: 1000}", "gpus 1000 is more than a node has (at most 64)"),
        ("{cpus: .inf}", "cpus inf is not a number more than 0"),
        ("{memory_gib: .nan}", "memory_gib nan is not a number more than 0"),
    ],
)
def test_resources_beyond_any_node_are_refused_in_the_matrix(tmp_path, resources, message):
    shown = _refused(tmp_path, f"runs:\n  - {{{DENSE}, resources: {resources}}}\n")
    assert shown.startswith(f"{tmp_path / 'matrix.yaml'}:2: row 1: resources: ") and message in shown, shown


def test_run_resources_check_their_bounds_too():
    with pytest.raises(AttncardError, match=r"^resources memory_gib 1e\+300 is more than a node has"):
        RunResources(memory_gib=1.0e300)
    assert RunResources(cpus=2, memory_gib=8).ray_options() == {
        "num_cpus": 2,
        "num_gpus": 0,
        "memory": 8 * 2**30,
    }


def _run(name: str = "m-none-sst2-seed0", **resources: float) -> SweepRun:
    return SweepRun("m", "m", "none", "sst2", 2, 0, name, RunResources(**resources))


NODES = [
    {"CPU": 16.0, "memory": 32 * 2**30, "node:10.0.0.1": 1.0},
    {"CPU": 4.0, "GPU": 1.0, "memory": 8 * 2**30},
]


def test_a_run_some_node_holds_is_accepted():
    from attncard.pipeline.study.sweep_ray import check_nodes_hold

    check_nodes_hold(
        [_run(cpus=16, memory_gib=32), _run(cpus=4, gpus=1, memory_gib=8), _run(gpus=0.5)], NODES
    )


@pytest.mark.parametrize(
    ("resources", "asked"),
    [
        ({"cpus": 1000}, "1000 CPUs, 0 GPUs"),
        ({"cpus": 8, "gpus": 1}, "8 CPUs, 1 GPUs"),  # each exists, on different nodes
        ({"memory_gib": 64}, "1 CPUs, 0 GPUs, 64 GiB of memory"),
        ({"gpus": 2}, "1 CPUs, 2 GPUs"),
    ],
)
def test_a_run_no_single_node_holds_is_refused_naming_the_run_and_the_largest_node(resources, asked):
    from attncard.pipeline.study.sweep_ray import check_nodes_hold

    with pytest.raises(AttncardError) as raised:
        check_nodes_hold([_run(), _run("m-big-sst2-seed0", **resources)], NODES)
    message = str(raised.value)
    assert message.startswith(f"m-big-sst2-seed0: asks for {asked}") and "\n" not in message, message
    largest = "at most 16 CPUs, 1 GPUs, 32 GiB of memory each"
    assert f", more than any one node of the Ray cluster has ({largest})" in message, message
