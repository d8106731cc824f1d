"""Downloading, checking and reloading a published run: from a folder and from a loopback Hub.

The run is a tiny GPT-2 trained for a few steps on a small SST-2 folder (built once for this module); it
is pushed to `LoopbackHub` the way publishing will push it: `create_repo`, then one `create_commit` that
adds every file of the run folder.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi, constants

from attncard.modules import module_provenance
from attncard.pipeline.cli import main
from attncard.pipeline.publish.push import push_tag
from attncard.pipeline.record.errors import (
    DataError,
    HubUnreachableError,
    IncompatibleRunError,
    IntegrityError,
    RepoNotFoundError,
    ResultsError,
    RevisionNotFoundError,
    UnknownSchemaError,
    UnsafeFormatError,
)
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.record.results import Results
from attncard.pipeline.run.data import load_task
from attncard.pipeline.scoring.metrics import predictions_sha256
from attncard.pipeline.verify.download import DownloadOptions, download_verified, load_verified, predict
from attncard.pipeline.verify.reverify import reverify
from conftest import HUB_TOKEN, HUB_USER, TINY_GPT2_REPO, commit_run_folder, write_sst2_folder
from hub_server import LoopbackHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = HUB_TOKEN
USER = HUB_USER
REPO = TINY_GPT2_REPO


@pytest.fixture
def published(hub: LoopbackHub, tiny_gpt2_run) -> str:
    """The tiny run pushed to the hub as publishing does it; tagged `v1`. Returns the commit sha."""
    run_dir, _ = tiny_gpt2_run
    commit = commit_run_folder(hub.endpoint, REPO, run_dir)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_tag(REPO, tag="v1", revision=commit)
    return commit


def copy_run(run_dir: Path, tmp_path: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """A copy of the run folder, its results.json edited by `edit` (results.json is not in the manifest)."""
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    if edit is not None:
        path = copy / "results.json"
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data, indent=2))
    return copy


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("error: ")
    return err


# ------------------------------------------------------------------------------------------------------------
# Local folders


def test_local_folder_reproduces_the_recorded_predictions(gpt2_base, tiny_gpt2_run) -> None:
    run_dir, glue = tiny_gpt2_run
    rng_before = torch.get_rng_state()
    verified = load_verified(run_dir, base_model=gpt2_base)
    assert torch.equal(torch.get_rng_state(), rng_before)  # nothing seeded, the caller's state untouched
    assert (verified.folder, verified.repo_id, verified.revision) == (run_dir.resolve(), None, None)
    assert not verified.model.training
    assert verified.tokenizer.padding_side == "right"
    assert verified.tokenizer.pad_token == verified.tokenizer.eos_token  # a GPT-2 tokenizer has no pad token
    assert verified.base_parameters == verified.results.parameters.before

    predictions = predict(verified, load_task("sst2", glue))
    assert len(predictions) == verified.results.verification.n == 40
    assert predictions_sha256(predictions) == verified.results.metrics.predictions_sha256
    # A different random state while loading changes nothing: every random initial value is overwritten.
    torch.manual_seed(12345)
    again = load_verified(run_dir, base_model=gpt2_base)
    assert predict(again, load_task("sst2", glue)) == predictions


def test_extra_files_are_refused_but_not_the_hubs_gitattributes(
    gpt2_base, tiny_gpt2_run, tmp_path: Path
) -> None:
    run_dir, _ = tiny_gpt2_run
    copy = copy_run(run_dir, tmp_path)
    (copy / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (copy / ".cache" / "huggingface").mkdir(parents=True)
    (copy / ".cache" / "huggingface" / "download.metadata").write_text("x")
    assert load_verified(copy, base_model=gpt2_base).results.repo_name == "tiny-gpt2-none-sst2"
    # An unlisted file could change the model: the tokenizer loader reads special_tokens_map.json by name.
    (copy / "special_tokens_map.json").write_text('{"pad_token": "a"}')
    with pytest.raises(IntegrityError, match=r"special_tokens_map\.json is not in the manifest"):
        load_verified(copy, base_model=gpt2_base)


def test_unknown_schema_version_is_refused(gpt2_base, tiny_gpt2_run, tmp_path: Path) -> None:
    copy = copy_run(tiny_gpt2_run[0], tmp_path, lambda data: data.update(schema_version=999))
    with pytest.raises(
        UnknownSchemaError, match=r"schema version 999; this attncard reads versions 2, 3 and 4: upgrade"
    ):
        load_verified(copy, base_model=gpt2_base)
    assert issubclass(UnknownSchemaError, ResultsError)


def test_a_status_edited_to_fail_contradicts_the_recorded_counts(gpt2_base, tiny_gpt2_run, tmp_path) -> None:
    # The gate recomputes the status from the counts; a run that really is FAIL is refused unless allowed
    # (tests/checks/test_hostile_runs.py forges one).
    def fail(data: dict) -> None:
        data["verification"]["status"] = "FAIL"

    copy = copy_run(tiny_gpt2_run[0], tmp_path, fail)
    for allow_failed in (False, True):
        with pytest.raises(IntegrityError, match=r"verification\.status is 'FAIL' but 'PASS_NO_COMPRESSION'"):
            load_verified(copy, allow_failed=allow_failed, base_model=gpt2_base)


class _Trap:
    """Unpickling this creates the file `marker`: proof that a pickle was opened."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_pickle_adapter_is_refused_unopened(
    gpt2_base, tiny_gpt2_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "unpickled"
    copy = copy_run(tiny_gpt2_run[0], tmp_path)
    (copy / "adapter_model.safetensors").unlink()
    (copy / "adapter_model.bin").write_bytes(pickle.dumps(_Trap(marker)))
    results = json.loads((copy / "results.json").read_text())
    manifest = results["manifest"]
    del manifest["adapter_model.safetensors"]
    manifest["adapter_model.bin"] = sha256_file(copy / "adapter_model.bin")  # as a publisher of .bin would
    (copy / "results.json").write_text(json.dumps(results))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(torch, "load", no_unpickling)
    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    with pytest.raises(UnsafeFormatError, match=r"adapter_model\.bin is a pickle file, .*did not open it"):
        load_verified(copy, base_model=gpt2_base)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("module", "with_its_source", "message"),
    [
        ("linformer", False, "module 'linformer', which this attncard does not have"),
        # The record still holds the source sha256 of `none`: the module installed here is another.
        ("adaptive_span", False, r"'adaptive_span' installed here \(attncard .*\) is not the one the run"),
        # The adapter has no span parameters: they would keep their initial values.
        ("adaptive_span", True, r"adapter_config\.json does not save adaptive_span, the trained parameters"),
    ],
)
def test_a_module_the_adapter_does_not_fit_is_refused(
    gpt2_base, tiny_gpt2_run, tmp_path: Path, module, with_its_source, message
) -> None:
    def rename(data: dict) -> None:
        data["module"]["name"] = module
        if with_its_source:
            data["module"]["source_sha256"] = module_provenance(module).source_sha256

    copy = copy_run(tiny_gpt2_run[0], tmp_path, rename)
    with pytest.raises(IncompatibleRunError, match=message):
        load_verified(copy, base_model=gpt2_base)


def test_reverify_matches_and_catches_an_edited_accuracy(
    gpt2_base, tiny_gpt2_run, tmp_path: Path, capsys
) -> None:
    run_dir, glue = tiny_gpt2_run
    assert main(["verify", str(run_dir), "--data-dir", str(glue), "--base-model", str(gpt2_base)]) == 0
    out = capsys.readouterr().out
    assert "MATCH: " in out and "recorded PASS_NO_COMPRESSION" in out

    # An accuracy edited alone contradicts the recorded counts and is refused before loading (exit 2);
    # tests/checks/test_hostile_runs.py shows a consistently forged run caught by re-evaluation (exit 1).
    def better(data: dict) -> None:
        data["metrics"]["accuracy"] = data["verification"]["accuracy"] = 0.987654

    copy = copy_run(run_dir, tmp_path, better)
    with pytest.raises(IntegrityError, match=r"accuracy is 0\.987654 but 0\.875 when recomputed"):
        reverify(copy, data_dir=glue, base_model=gpt2_base)
    assert main(["verify", str(copy), "--data-dir", str(glue), "--base-model", str(gpt2_base)]) == 2
    assert "contradicts itself" in capsys.readouterr().err


def test_reverify_refuses_other_data(gpt2_base, tiny_gpt2_run, tmp_path: Path) -> None:
    run_dir, _ = tiny_gpt2_run
    other = write_sst2_folder(tmp_path / "other-glue", dev_repeats=4)
    with pytest.raises(DataError, match=r"\(sha256:.*, 32 rows\) are not the data the run was evaluated on"):
        reverify(run_dir, data_dir=other, base_model=gpt2_base)


@pytest.mark.slow
def test_hub_repo_loads_by_branch_tag_and_commit(
    gpt2_base, hub, published: str, tiny_gpt2_run, fresh_cache
) -> None:
    _, glue = tiny_gpt2_run
    data = load_task("sst2", glue)
    for revision in (None, "main", "v1", published):
        verified = load_verified(
            REPO, revision, endpoint=hub.endpoint, token=TOKEN, cache_dir=fresh_cache(), base_model=gpt2_base
        )
        assert (verified.repo_id, verified.revision) == (REPO, published)
        # The Hub's own .gitattributes is in the snapshot, outside the manifest, and accepted.
        assert (verified.folder / ".gitattributes").is_file()
        assert predictions_sha256(predict(verified, data)) == verified.results.metrics.predictions_sha256
    check = reverify(REPO, "v1", data_dir=glue, endpoint=hub.endpoint, base_model=gpt2_base)
    assert check.matches and check.revision == published, check.problems


@pytest.mark.slow
def test_tampered_file_on_the_server(gpt2_base, hub, published: str, fresh_cache) -> None:
    cache = fresh_cache()
    load_verified(REPO, endpoint=hub.endpoint, cache_dir=cache, base_model=gpt2_base)
    good = hub.read_file(REPO, "config.json")
    hub.tamper(REPO, "config.json", good.replace(b'"n_layer": 2', b'"n_layer": 1'))
    # The cache holds one copy per (commit, file): a cache that has this commit keeps the published bytes.
    assert (
        load_verified(REPO, endpoint=hub.endpoint, cache_dir=cache, base_model=gpt2_base).revision
        == published
    )
    with pytest.raises(IntegrityError) as caught:
        load_verified(REPO, endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)
    actual, expected = sha256(hub.read_file(REPO, "config.json")), sha256(good)
    assert str(caught.value).startswith(
        f"{REPO}@{published[:12]}: config.json has sha256 {actual[:12]}… but the manifest expects "
        f"{expected[:12]}…: the file changed after publishing; do not use this checkpoint"
    )


def test_results_json_changed_under_its_run_tag(
    gpt2_base, hub, published: str, tiny_gpt2_run, fresh_cache
) -> None:
    run_dir, _ = tiny_gpt2_run
    tag = push_tag(run_dir)
    HfApi(endpoint=hub.endpoint, token=TOKEN).create_tag(REPO, tag=tag, revision=published)
    assert (
        load_verified(
            REPO, tag, endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base
        ).revision
        == published
    )
    # The manifest inside results.json covers every other file; the tag's digest covers results.json.
    data = json.loads(hub.read_file(REPO, "results.json"))
    data["metrics"]["accuracy"] = 1.0
    hub.tamper(REPO, "results.json", json.dumps(data, indent=2).encode())
    with pytest.raises(IntegrityError, match=f"is not the file the tag {tag} was made for: it changed after"):
        load_verified(REPO, tag, endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)


def test_missing_file_on_the_server(gpt2_base, hub, published: str, fresh_cache) -> None:
    hub.delete_file_silently(REPO, "tokenizer.json")
    with pytest.raises(IntegrityError, match=r"tokenizer\.json is missing \(the manifest expects sha256 "):
        load_verified(REPO, endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)


def test_missing_repo_and_revision(gpt2_base, hub, published: str, fresh_cache) -> None:
    with pytest.raises(RepoNotFoundError, match=f"no repository '{USER}/missing' on {hub.endpoint}"):
        load_verified(f"{USER}/missing", endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)
    with pytest.raises(
        RevisionNotFoundError, match=f"{REPO} on {hub.endpoint} has no branch, tag or commit 'v9'"
    ):
        load_verified(REPO, "v9", endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)
    with pytest.raises(RevisionNotFoundError, match="has no branch, tag or commit '0123456789"):
        load_verified(
            REPO, "0123456789" * 4, endpoint=hub.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base
        )


def test_offline_or_unreachable_without_a_cached_copy(
    gpt2_base, hub, published: str, fresh_cache, monkeypatch
) -> None:
    cache = fresh_cache()
    endpoint = hub.endpoint
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        HubUnreachableError, match=rf"HF_HUB_OFFLINE is set and {REPO} is not in the local cache"
    ):
        load_verified(REPO, endpoint=endpoint, cache_dir=cache, base_model=gpt2_base)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    load_verified(REPO, endpoint=endpoint, cache_dir=cache, base_model=gpt2_base)
    hub.stop()
    with pytest.raises(
        HubUnreachableError, match=f"could not reach {endpoint} \\(ConnectError\\) and {REPO} is not in"
    ):
        load_verified(REPO, endpoint=endpoint, cache_dir=fresh_cache(), base_model=gpt2_base)
    # A copy cached earlier still loads when the Hub cannot be reached, and is checked all the same.
    assert load_verified(REPO, endpoint=endpoint, cache_dir=cache, base_model=gpt2_base).revision == published


def test_download_command(gpt2_base, hub, published: str, tiny_gpt2_run, tmp_path: Path, capsys) -> None:
    run_dir, _ = tiny_gpt2_run
    output = tmp_path / "downloaded"
    assert (
        main(["download", REPO, "--revision", "v1", "--hub-endpoint", hub.endpoint, "--output", str(output)])
        == 0
    )
    captured = capsys.readouterr()
    assert captured.out.strip() == str(output)
    # (stderr also carries huggingface_hub's progress bar)
    accuracy = Results.load(run_dir).metrics.accuracy
    assert (
        f"PASS_NO_COMPRESSION: {REPO}@{published[:12]}, accuracy {accuracy:.4f} on 40 rows;" in captured.err
    )
    assert sorted(p.name for p in output.iterdir()) == sorted(p.name for p in run_dir.iterdir())
    assert load_verified(output, base_model=gpt2_base).results.metrics.accuracy == accuracy
    capsys.readouterr()

    assert main(["download", f"{USER}/missing", "--hub-endpoint", hub.endpoint]) == 2
    assert "no repository" in one_line_error(capsys)
    assert main(["download", REPO, "--hub-endpoint", hub.endpoint, "--output", str(output)]) == 2
    assert "is not an empty folder" in one_line_error(capsys)


def test_the_download_family_shares_one_options_type_and_refuses_a_misspelt_key(tiny_gpt2_run) -> None:
    """download_verified, load_verified and reverify take the keys of DownloadOptions, fetch_run those of
    HubOptions; a misspelt one is a TypeError, as for any keyword argument, before anything is fetched."""
    from attncard.pipeline.hub.fetch import HubOptions, fetch_run
    from attncard.pipeline.verify.reverify import reverify

    assert set(typing.get_type_hints(HubOptions)) < set(typing.get_type_hints(DownloadOptions))
    for function in (download_verified, load_verified, reverify):
        unexpected = rf"{function.__name__}\(\) got an unexpected keyword argument 'endpont'"
        with pytest.raises(TypeError, match=unexpected):
            function(tiny_gpt2_run[0], endpont="http://127.0.0.1:9")
    with pytest.raises(
        TypeError, match=r"fetch_run\(\) got an unexpected keyword argument 'expected_sha256'"
    ):
        fetch_run("org/name", expected_sha256="0" * 64)
