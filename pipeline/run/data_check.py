"""Whether a GLUE task can be read here, checked with the standard library alone.

`make demo` runs this file with the system Python before it builds `.venv` (minutes of installs), so that a
machine with neither the GLUE files nor the Hub is told so at once, in one line, rather than after the build:

    python3 pipeline/run/data_check.py --task sst2 --folder SST-2 --files train.tsv dev.tsv

The task is read from `GLUE_DIR` when it is set (a folder of the GLUE TSV files, as `--data-dir` takes it),
else from the Hub's `nyu-mll/glue` at `HF_ENDPOINT` (https://huggingface.co by default). The check says no
only where the run would fail: a `GLUE_DIR` without the task's files, `HF_HUB_OFFLINE` set without
`GLUE_DIR`, or a Hub that cannot be connected to. An answer of any kind from the Hub, an error status or a TLS
certificate this Python does not trust included, is left for the run itself to judge.

It imports nothing of attncard, nor anything outside the standard library; `pipeline/run/data.py` finds a
task's folder with [`task_folder`].
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

HUB_DATASET_ID = "nyu-mll/glue"  # as pipeline/scoring/tasks.py's HUB_DATASET_ID
DEFAULT_ENDPOINT = "https://huggingface.co"
# huggingface_hub's reading of a boolean environment variable (constants.ENV_VARS_TRUE_VALUES).
TRUE_VALUES = {"1", "ON", "YES", "TRUE"}
# Long enough for a slow connection to answer, short enough that an offline machine is told at once.
HUB_TIMEOUT_S = 5.0


def task_folder(glue_dir: Path, folder: str, task: str) -> Path | None:
    """The task's folder inside a GLUE download: `folder` as GLUE ships it (`SST-2`), the task's name
    (`sst2`), or `folder` in lower case (`sst-2`); None when there is none.

    Example:
        >>> task_folder(Path("glue"), "SST-2", "sst2")
        PosixPath('glue/SST-2')
    """
    for candidate in (glue_dir / folder, glue_dir / task, glue_dir / folder.lower()):
        if candidate.is_dir():
            return candidate
    return None


def glue_dir_problem(glue_dir: Path, task: str, folder: str, files: Sequence[str]) -> str | None:
    """What keeps the task's files from being read in `glue_dir`, or None when each of `files` is there.

    Example:
        >>> import tempfile
        >>> glue_dir_problem(Path(tempfile.mkdtemp()), "sst2", "SST-2", ["train.tsv", "dev.tsv"])
        "no folder 'SST-2' or 'sst2' for task sst2"
    """
    if not glue_dir.is_dir():
        return "not a folder" if glue_dir.exists() else "data folder not found"
    found = task_folder(glue_dir, folder, task)
    if found is None:
        return f"no folder '{folder}' or '{task}' for task {task}"
    missing = [name for name in files if not (found / name).is_file()]
    if missing:
        return f"{found.name}/ has no {', '.join(missing)}"
    return None


def hub_problem(endpoint: str, timeout_s: float = HUB_TIMEOUT_S) -> str | None:
    """Why the Hub at `endpoint` cannot be connected to, or None when it answers at all.

    It asks for `nyu-mll/glue`'s information, as the run does first. Only a failure to connect (no name
    resolution, refused, unreachable, no answer within `timeout_s`) is a problem.

    Example:
        >>> hub_problem("http://127.0.0.1:9")
        'connection refused'
    """
    url = f"{endpoint.rstrip('/')}/api/datasets/{HUB_DATASET_ID}"
    request = urllib.request.Request(url, headers={"User-Agent": "attncard-data-check"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # the Hub answered; what it said is the run's to judge
    except urllib.error.URLError as error:
        reason = error.reason
    except OSError as error:  # a timeout while reading the answer, a reset connection
        reason = error
    if isinstance(reason, ssl.SSLError):
        return None  # connected; this Python's certificates may not be those huggingface_hub trusts
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(reason, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return str(getattr(reason, "strerror", None) or reason)


def data_problem(
    task: str, folder: str, files: Sequence[str], environ: dict[str, str] | None = None
) -> str | None:
    """The one-line message saying why `task` cannot be read here, or None when it can (as far as is known
    before the run). `environ` defaults to `os.environ`.

    Example:
        >>> import tempfile
        >>> data_problem("sst2", "SST-2", ["train.tsv", "dev.tsv"], {"GLUE_DIR": tempfile.mkdtemp()})
        "GLUE_DIR=/...: no folder 'SST-2' or 'sst2' for task sst2; set GLUE_DIR to ..."
    """
    environ = os.environ if environ is None else environ
    layout = ", ".join(f"{folder}/{name}" for name in files)
    where = (
        f"set GLUE_DIR to a folder of the GLUE TSV files ({layout}), e.g. `make demo GLUE_DIR=/path/to/glue`"
    )
    glue_dir = environ.get("GLUE_DIR") or None  # empty is unset, as pipeline/run/data.py reads it
    if glue_dir is not None:
        problem = glue_dir_problem(Path(glue_dir).expanduser(), task, folder, files)
        if problem is None:
            return None
        hub = f"unset GLUE_DIR to read {HUB_DATASET_ID} from the Hub"
        return f"GLUE_DIR={glue_dir}: {problem}; {where}, or {hub}"
    reads = f"GLUE {task} is read from GLUE_DIR or from the Hub ({HUB_DATASET_ID})"
    if environ.get("HF_HUB_OFFLINE", "").strip().upper() in TRUE_VALUES:
        return f"GLUE_DIR is not set and HF_HUB_OFFLINE is set: {reads}; {where}"
    endpoint = environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    problem = hub_problem(endpoint)
    if problem is not None:
        return f"GLUE_DIR is not set and the Hub ({endpoint}) cannot be reached: {problem}; {reads}; {where}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 when the task can be read, else 2 after one line `error: ...` on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True, help="the task's name, e.g. sst2")
    parser.add_argument("--folder", required=True, help="its folder in the GLUE download, e.g. SST-2")
    parser.add_argument("--files", nargs="+", required=True, help="the files the run reads, e.g. train.tsv")
    args = parser.parse_args(argv)
    problem = data_problem(args.task, args.folder, args.files)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
