"""A Hub server this project did not write: olah, serving git repositories over the Hub's API.

olah (PyPI `olah`, MIT) is a self-hosted Hugging Face mirror. Besides proxying the real Hub, it serves the
git repositories found under its `mirrors-path` as Hub model repositories: repo info, refs, tree,
paths-info and `/resolve` with `ETag` and `X-Repo-Commit`, Git LFS files included (a pointer in git, the
object in `.git/lfs/objects`). Run offline, that is a second, independent implementation of the download
half of the protocol, so `load_verified` and `attncard verify` are tested against a server whose answers
we did not choose. olah has no upload API: the push half is tested against `LoopbackHub` (hub_server.py),
and a pushed repository is copied into olah's mirror folder as a real git repository
(`OlahHub.commit`), where `git` itself computes the blob and tree ids that our server had reported.

olah runs in a virtual environment of its own (`.tools/olah`, made on first use), since it pins its own
web stack; it is started as a subprocess bound to 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[2]
OLAH_VERSION = "0.5.4"
OLAH_ENV = REPO_ROOT / ".tools" / "olah"

# Git, run with no user or system configuration: no hooks, signing or LFS filters of the machine's.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "attncard tests",
    "GIT_AUTHOR_EMAIL": "tests@attncard.invalid",
    "GIT_COMMITTER_NAME": "attncard tests",
    "GIT_COMMITTER_EMAIL": "tests@attncard.invalid",
}


def olah_python() -> Path:
    """The Python of `.tools/olah`, with olah `OLAH_VERSION` installed there first if it is not.

    Raises RuntimeError with pip's last lines when it cannot be installed (pip needs PyPI).
    """
    python = OLAH_ENV / "bin" / "python"
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('olah'))"]
    if python.is_file():
        found = subprocess.run(probe, capture_output=True, text=True, check=False)
        if found.returncode == 0 and found.stdout.strip() == OLAH_VERSION:
            return python
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(OLAH_ENV)],
        [str(python), "-m", "pip", "install", "--quiet", f"olah=={OLAH_VERSION}"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise RuntimeError(f"could not install olah=={OLAH_VERSION} into {OLAH_ENV}: {tail}")
    return python


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=folder,
        env={**os.environ, **_GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {folder}: {done.stderr.strip()}")
    return done.stdout


def lfs_pointer(data: bytes) -> bytes:
    """The Git LFS pointer file that git holds in place of `data` (the format of git-lfs's spec v1)."""
    sha256 = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()


class OlahHub:
    """An olah server on 127.0.0.1, offline, serving the git repositories under `root/mirrors`.

    Example:
        >>> with OlahHub(tmp_path) as olah:
        ...     sha = olah.commit("org/name", {"config.json": b"{}"})
        ...     snapshot_download("org/name", endpoint=olah.endpoint)
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.port = 0
        self._process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> OlahHub:
        python = olah_python()
        (self.root / "mirrors" / "models").mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        address = f"127.0.0.1:{self.port}"
        config = self.root / "olah.toml"
        config.write_text(
            "[basic]\n"
            'host = "127.0.0.1"\n'
            f"port = {self.port}\n"
            f'mirror-netloc = "{address}"\n'
            f'mirror-lfs-netloc = "{address}"\n'
            f'repos-path = "{self.root / "cache"}"\n'
            f'mirrors-path = ["{self.root / "mirrors"}"]\n'
            "[accessibility]\n"
            "offline = true\n"
        )
        log = (self.root / "olah.log").open("wb")
        # olah must not look for the real Hub, nor reach it through a proxy.
        env = {
            name: value
            for name, value in os.environ.items()
            if not (name.upper().startswith("HF_") or name.upper().endswith("_PROXY"))
        }
        env.update(NO_PROXY="127.0.0.1", no_proxy="127.0.0.1", HF_HUB_OFFLINE="1")
        self._process = subprocess.Popen(
            [str(python), "-m", "olah.server", "--config", str(config)],
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"olah exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                # uvicorn listens once the application has started.
                socket.create_connection(("127.0.0.1", self.port), timeout=2.0).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"olah did not answer on {self.endpoint} in {timeout:.0f} s") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> OlahHub:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 20) -> str:
        path = self.root / "olah.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.is_file() else ""

    # ------------------------------------------------------------------------------ repositories

    def repo_folder(self, repo_id: str) -> Path:
        return self.root / "mirrors" / "models" / repo_id

    def commit(
        self, repo_id: str, files: Mapping[str, bytes], *, lfs: Collection[str] = (), message: str = "update"
    ) -> str:
        """Makes the head of `main` hold exactly `files` (paths in `lfs` as Git LFS files); returns the sha.

        The first call makes the repository. Each call is one git commit on top of the last one.
        """
        folder = self.repo_folder(repo_id)
        if not (folder / ".git").is_dir():
            folder.mkdir(parents=True)
            _git(folder, "init", "--quiet", "--initial-branch=main")
        else:
            _git(folder, "rm", "-r", "--quiet", "--ignore-unmatch", "--", ".")
        for path, data in files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in lfs:
                sha256 = hashlib.sha256(data).hexdigest()
                obj = folder / ".git" / "lfs" / "objects" / sha256[:2] / sha256[2:4] / sha256
                obj.parent.mkdir(parents=True, exist_ok=True)
                obj.write_bytes(data)
                data = lfs_pointer(data)
            target.write_bytes(data)
        _git(folder, "add", "--all", ".")
        _git(folder, "commit", "--quiet", "--allow-empty", "--message", message)
        return self.head(repo_id)

    def delete_all(self) -> None:
        """Removes every repository from the mirror folder."""
        shutil.rmtree(self.root / "mirrors" / "models")
        (self.root / "mirrors" / "models").mkdir()

    def head(self, repo_id: str, revision: str = "main") -> str:
        return _git(self.repo_folder(repo_id), "rev-parse", f"{revision}^{{commit}}").strip()

    def tag(self, repo_id: str, tag: str, revision: str = "main") -> None:
        _git(self.repo_folder(repo_id), "tag", tag, revision)

    def git_ids(self, repo_id: str, revision: str = "main") -> dict[str, str]:
        """`{path: object id}` that git computed for every file and folder of `revision`."""
        listing = _git(self.repo_folder(repo_id), "ls-tree", "-r", "-t", "--full-tree", revision)
        ids = {}
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            ids[path] = meta.split()[2]
        return ids
