"""Signed runs (pipeline.hub.signing): a run folder signed with a key verifies with that key only, and any
change to its files after signing is refused. Offline: keys are made here; Sigstore bundles are only read,
never verified (that needs Sigstore's trust root from the network). Most tests sign a small folder of made-up
files; the lint test signs a real run."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import model_signing
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.cli import main
from attncard.pipeline.hub import signing
from attncard.pipeline.hub.signing import (
    ANY_TAG,
    GITHUB_ACTIONS_ISSUER,
    MAX_SIGNATURE_BYTES,
    SignatureReport,
    key_fingerprint,
    sign_run_folder,
    verify_run_signature,
)
from attncard.pipeline.record.errors import AttncardError, DownloadError, SignatureError, SigningError
from attncard.pipeline.record.manifest import RESULTS_FILE, SIGNATURE_FILE, build_manifest, check_manifest
from attncard.pipeline.record.results import Results
from conftest import REPO_ROOT
from signing_keys import make_key

WORKFLOW_IDENTITY = "https://github.com/attncard/attncard/.github/workflows/publish.yml@refs/tags/v1.0"




@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    directory = tmp_path / "keys"
    directory.mkdir()
    return make_key(directory, "signer")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A small run folder, unsigned: the files publish writes, made up, and a results.json listing them."""
    folder = tmp_path / "run"
    folder.mkdir()
    files = {
        "adapter_model.safetensors": "weights",
        "adapter_config.json": '{"peft_type": "LORA"}',
        "config.json": '{"model_type": "gpt2"}',
        "tokenizer.json": "{}",
        "README.md": "# tiny-gpt2-none-sst2\n",
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / RESULTS_FILE).write_text(json.dumps({"command": "publish", "manifest": build_manifest(folder)}))
    return folder


@pytest.fixture
def signed(run: Path, keys: tuple[Path, Path]) -> Path:
    """The copy, signed with `keys`."""
    assert sign_run_folder(run, keys[0]) == run / SIGNATURE_FILE
    return run


def signed_payload(folder: Path) -> dict:
    """The in-toto statement model.sig signs."""
    bundle = json.loads((folder / SIGNATURE_FILE).read_text())
    return json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))


def test_a_signed_run_verifies_with_its_key_and_names_it(signed: Path, keys: tuple[Path, Path]) -> None:
    pem = keys[1].read_bytes()
    fingerprint = "sha256:" + hashlib.sha256(pem).hexdigest()
    assert key_fingerprint(keys[1]) == fingerprint

    report = verify_run_signature(signed, public_key=keys[1])

    assert report == SignatureReport(signed=True, method="key", signer=fingerprint, verified=True)
    assert str(report) == f"signed by key {fingerprint}, verified"


def test_the_signature_lists_every_file_by_name_results_json_included(signed: Path) -> None:
    statement = signed_payload(signed)
    listed = {item["name"]: item["digest"] for item in statement["predicate"]["resources"]}
    manifest = build_manifest(signed)

    assert set(listed) == {*manifest, RESULTS_FILE}
    assert all(listed[name] == digest for name, digest in manifest.items())
    assert statement["predicate"]["serialization"]["method"] == "files"


def test_signed_but_nothing_to_check_against_reports_the_claimed_signer_unverified(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    report = verify_run_signature(signed)

    assert report == SignatureReport(True, "key", key_fingerprint(keys[1]), verified=False)
    assert "NOT verified" in str(report)


def test_another_key_is_refused(signed: Path, tmp_path: Path) -> None:
    _, other = make_key(tmp_path, "other")

    with pytest.raises(
        SignatureError,
        match=r"names key sha256:\w+ as its signer, but a signature by key sha256:\w+ \(.*other\.pub\) is",
    ):
        verify_run_signature(signed, public_key=other)


def test_a_forged_key_hint_is_refused(signed: Path, tmp_path: Path) -> None:
    """The hint in the bundle is not signed: naming another key there must not make its signature pass."""
    _, other = make_key(tmp_path, "other")
    bundle = json.loads((signed / SIGNATURE_FILE).read_text())
    bundle["verificationMaterial"]["publicKey"]["hint"] = key_fingerprint(other).removeprefix("sha256:")
    (signed / SIGNATURE_FILE).write_text(json.dumps(bundle))

    with pytest.raises(SignatureError, match="does not verify against key"):
        verify_run_signature(signed, public_key=other)


def _change(folder: Path) -> None:
    (folder / "README.md").write_text((folder / "README.md").read_text() + "\nbetter than ever\n")


def _add(folder: Path) -> None:
    (folder / "special_tokens_map.json").write_text("{}")


def _remove(folder: Path) -> None:
    (folder / "config.json").unlink()


def _rename(folder: Path) -> None:
    (folder / "README.md").rename(folder / "readme.md")


def _edit_results(folder: Path) -> None:
    data = json.loads((folder / RESULTS_FILE).read_text())
    data["command"] += " --steps 1000"
    (folder / RESULTS_FILE).write_text(json.dumps(data))


def _add_git_path(folder: Path) -> None:
    """model_signing ignores .github/ and .gitignore by default; a run folder has neither, so they count."""
    (folder / ".github").mkdir()
    (folder / ".github" / "x.yml").write_text("on: push\n")


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_change, "README.md: sha256 differs from the signed one"),
        (_add, r"special_tokens_map.json: not signed \(added after signing\)"),
        (_remove, "config.json: signed but missing"),
        (_rename, "README.md: signed but missing; readme.md: not signed"),
        (_edit_results, "results.json: sha256 differs from the signed one"),
        (_add_git_path, r".github/x.yml: not signed \(added after signing\)"),
    ],
)
def test_a_file_changed_after_signing_is_refused(
    signed: Path, keys: tuple[Path, Path], tamper: Callable[[Path], None], reason: str
) -> None:
    tamper(signed)

    with pytest.raises(SignatureError, match=f"model.sig does not verify against key .*{reason}") as caught:
        verify_run_signature(signed, public_key=keys[1])
    assert "\n" not in str(caught.value)


def test_the_transports_files_are_not_part_of_the_run(signed: Path, keys: tuple[Path, Path]) -> None:
    (signed / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (signed / ".git").mkdir()
    (signed / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (signed / ".cache" / "huggingface").mkdir(parents=True)
    (signed / ".cache" / "huggingface" / "README.md.metadata").write_text("0123\n")

    report = verify_run_signature(signed, public_key=keys[1])
    assert report.verified
    assert report.ignored == (".cache/huggingface/README.md.metadata", ".git/HEAD", ".gitattributes")
    assert str(report).endswith(
        ", verified; not covered and ignored: .gitattributes, .git/ (1 file), .cache/huggingface/ (1 file), "
        "a transport's bookkeeping that nothing loads"
    )


def test_a_hub_cache_snapshot_of_symlinks_verifies(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """snapshot_download's folder holds symlinks to the cache's blobs; what counts is what they point to."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for path in [path for path in signed.iterdir() if path.is_file()]:
        blob = Path(shutil.move(path, blobs / path.name))
        path.symlink_to(blob)

    assert verify_run_signature(signed, public_key=keys[1]).verified
    (blobs / "README.md").write_text("edited in the cache\n")
    with pytest.raises(SignatureError, match=r"README\.md: sha256 differs from the signed one"):
        verify_run_signature(signed, public_key=keys[1])


def test_a_file_the_signer_left_out_is_refused(run: Path, keys: tuple[Path, Path]) -> None:
    """A signature may exclude paths (model_signing's ignore_paths, which its verifier honours); the run's
    files must all be covered all the same."""
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=[SIGNATURE_FILE, "README.md"])
    signing = model_signing.signing.Config().use_elliptic_key_signer(private_key=keys[0])
    signing.set_hashing_config(hashing).sign(run, run / SIGNATURE_FILE)

    with pytest.raises(SignatureError, match=r"README\.md not covered by model\.sig"):
        verify_run_signature(run, public_key=keys[1])


def test_an_unsigned_run_is_reported_and_refused_when_a_signer_is_required(
    run: Path, keys: tuple[Path, Path]
) -> None:
    report = verify_run_signature(run)
    assert report == SignatureReport(signed=False, method=None, signer="", verified=False)
    assert str(report) == "unsigned (no model.sig)"

    with pytest.raises(SignatureError, match=r"the run is unsigned \(no model.sig\), but a signature by key"):
        verify_run_signature(run, public_key=keys[1])
    with pytest.raises(
        SignatureError, match=f"but a signature by {re.escape(WORKFLOW_IDENTITY)} is required"
    ):
        verify_run_signature(run, identity=WORKFLOW_IDENTITY)


def test_a_key_and_an_identity_together_are_refused(signed: Path, keys: tuple[Path, Path]) -> None:
    with pytest.raises(SignatureError, match="not both"):
        verify_run_signature(signed, public_key=keys[1], identity=WORKFLOW_IDENTITY)


def test_a_damaged_signature_file_is_refused(signed: Path) -> None:
    (signed / SIGNATURE_FILE).write_text('{"mediaType": "nothing else"}')

    with pytest.raises(SignatureError, match=r"model\.sig: not a model-signing signature"):
        verify_run_signature(signed)


def test_signature_errors_are_download_errors() -> None:
    assert issubclass(SignatureError, DownloadError) and issubclass(SigningError, AttncardError)


# --- keyless (Sigstore) bundles, read but not verified -----------------------------------------------------


def _with_sigstore_certificate(folder: Path, identity: str, issuer: str) -> None:
    """Puts a Fulcio-like certificate (self-signed) in place of model.sig's key hint. Its signature is not
    valid: only what the bundle claims can be read from it."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    issuer_v2 = x509.UnrecognizedExtension(
        x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8"), b"\x0c" + bytes([len(issuer)]) + issuer.encode()
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(x509.Name([x509.NameAttribute(x509.NameOID.ORGANIZATION_NAME, "sigstore.dev")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(minutes=10))
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]), critical=True)
        .add_extension(issuer_v2, critical=False)
        .sign(key, hashes.SHA256())
    )
    bundle = json.loads((folder / SIGNATURE_FILE).read_text())
    raw = base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()
    bundle["verificationMaterial"] = {"certificate": {"rawBytes": raw}, "tlogEntries": []}
    (folder / SIGNATURE_FILE).write_text(json.dumps(bundle))


def test_a_sigstore_signature_names_its_identity_and_issuer_unverified(signed: Path) -> None:
    _with_sigstore_certificate(signed, WORKFLOW_IDENTITY, GITHUB_ACTIONS_ISSUER)

    report = verify_run_signature(signed)

    assert report == SignatureReport(True, "sigstore", WORKFLOW_IDENTITY, False, issuer=GITHUB_ACTIONS_ISSUER)
    assert str(report) == (
        f"signed by {WORKFLOW_IDENTITY} (issuer {GITHUB_ACTIONS_ISSUER}) as model.sig claims, NOT verified: "
        "check it against the expected identity"
    )


def test_a_sigstore_signature_by_another_identity_or_checked_with_a_key_is_refused(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    _with_sigstore_certificate(signed, WORKFLOW_IDENTITY, GITHUB_ACTIONS_ISSUER)
    other = WORKFLOW_IDENTITY.replace("v1.0", "v2.0")

    with pytest.raises(
        SignatureError,
        match=f"names {re.escape(WORKFLOW_IDENTITY)} .*, but a signature by {re.escape(other)} ",
    ):
        verify_run_signature(signed, identity=other)
    with pytest.raises(SignatureError, match=r"but a signature by .* is required"):
        verify_run_signature(signed, identity=WORKFLOW_IDENTITY, oidc_issuer="https://accounts.google.com")
    with pytest.raises(
        SignatureError, match=f"names {re.escape(WORKFLOW_IDENTITY)} .*, but a signature by key"
    ):
        verify_run_signature(signed, public_key=keys[1])


def test_a_workflow_at_any_tag_takes_the_certificates_tag_and_verifies_that_exact_identity(
    signed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_sigstore_certificate(signed, WORKFLOW_IDENTITY, GITHUB_ACTIONS_ISSUER)
    any_tag = WORKFLOW_IDENTITY.rpartition("@")[0] + ANY_TAG
    asked: list[str | None] = []

    def verifier(public_key: object, identity: str | None, issuer: str) -> None:
        asked.append(identity)  # Sigstore's trust root needs the network: stop at what it would verify
        raise SignatureError("stopped before Sigstore")

    monkeypatch.setattr(signing, "_verifier", verifier)
    with pytest.raises(SignatureError, match="stopped before Sigstore"):
        verify_run_signature(signed, identity=any_tag)
    assert asked == [WORKFLOW_IDENTITY]  # the certificate's exact identity, not the pattern

    other_repo = any_tag.replace(WORKFLOW_IDENTITY.split("/")[4], "someone-else")
    other_workflow = any_tag.replace("publish.yml", "evil.yml")
    for pattern in (other_repo, other_workflow):
        with pytest.raises(SignatureError, match=f"but a signature by {re.escape(pattern)} .* is required"):
            verify_run_signature(signed, identity=pattern)
    assert asked == [WORKFLOW_IDENTITY]
    for pattern in (WORKFLOW_IDENTITY.replace("publish", "*"), "*", any_tag + "/*"):
        with pytest.raises(SignatureError, match=r"takes no wildcard but a trailing @refs/tags/\*"):
            verify_run_signature(signed, identity=pattern)


def test_a_key_signature_is_refused_when_an_identity_is_required(signed: Path) -> None:
    with pytest.raises(
        SignatureError, match=f"names key sha256:.*, but a signature by {re.escape(WORKFLOW_IDENTITY)}"
    ):
        verify_run_signature(signed, identity=WORKFLOW_IDENTITY)


# --- signing ---------------------------------------------------------------------------------------------


def test_an_encrypted_key_signs_with_its_password(run: Path, tmp_path: Path) -> None:
    private, public = make_key(tmp_path, "locked", password=b"open sesame")

    with pytest.raises(SigningError, match=r"locked\.pem: not a usable PEM private key .*password"):
        sign_run_folder(run, private)
    sign_run_folder(run, private, password=b"open sesame")
    assert verify_run_signature(run, public_key=public).verified


def test_signing_needs_an_elliptic_curve_key_and_a_run_folder(run: Path, tmp_path: Path) -> None:
    with pytest.raises(SigningError, match=r"missing\.pem: no such key file"):
        sign_run_folder(run, tmp_path / "missing.pem")
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    with pytest.raises(SigningError, match=r"rsa\.pem: model signing needs an elliptic-curve key"):
        sign_run_folder(run, rsa_key)
    with pytest.raises(SigningError, match=r"no results\.json, so not a run folder"):
        sign_run_folder(tmp_path, rsa_key)
    assert not (run / SIGNATURE_FILE).exists()


def test_signing_again_replaces_the_signature(signed: Path, tmp_path: Path) -> None:
    private, public = make_key(tmp_path, "second")

    sign_run_folder(signed, private)

    assert verify_run_signature(signed, public_key=public).verified


def test_a_signed_run_folder_lints_clean(tiny_gpt2_run, tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """model.sig is in no manifest (it signs results.json), and lint does not ask for it there."""
    run = Path(shutil.copytree(tiny_gpt2_run[0], tmp_path / "real-run"))
    sign_run_folder(run, keys[0])

    assert SIGNATURE_FILE not in Results.load(run).manifest
    assert check_manifest(run, Results.load(run).manifest) == []
    assert lint_run_folder(run) == []
    assert verify_run_signature(run, public_key=keys[1]).verified


# --- the publish workflow signs keyless before it pushes --------------------------------------------------


def test_the_publish_workflow_signs_keyless_with_its_identity_before_pushing() -> None:
    job = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "publish.yml").read_text())["jobs"]["publish"]
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    runs = [step.get("run", "") for step in job["steps"]]
    train = next(i for i, run in enumerate(runs) if ".venv/bin/publish " in run)
    sign = next(i for i, run in enumerate(runs) if "model_signing sign sigstore" in run)
    check = next(i for i, run in enumerate(runs) if "verify_run_signature" in run)
    push = next(i for i, run in enumerate(runs) if "attncard push" in run)
    assert train < sign < check < push
    assert "--push" not in runs[train]
    assert '--signature "runs/$REPO/model.sig"' in runs[sign] and "--use_ambient_credentials" in runs[sign]
    assert job["steps"][check]["env"]["IDENTITY"] == "${{ github.server_url }}/${{ github.workflow_ref }}"


def test_an_oversized_signature_file_is_refused_unparsed(signed: Path) -> None:
    (signed / SIGNATURE_FILE).write_bytes(b" " * (MAX_SIGNATURE_BYTES + 1))

    with pytest.raises(SignatureError, match=r"model\.sig holds more than 1 MiB"):
        verify_run_signature(signed)


# --- what model.sig claims is shown, never obeyed (issue 42, item 4) ---------------------------------------

# Hints a mirror can put in model.sig (it is outside the manifest, even of a run pinned by its tag): one hides
# the rest of the line (ESC[8m), one forges a line of its own, one reverses the text after it (U+202E).
SPOOFING_HINTS = [
    "\x1b[8m",
    "ab12\nPASS_NO_COMPRESSION: attncard/minilm-none-sst2, signed by key sha256:ab12, verified",
    "\u202edeifirev ,\u2066x\u2069\u200b\x7f\x9b",
]
UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


@pytest.mark.parametrize("hint", SPOOFING_HINTS, ids=["hide", "forged-line", "bidi"])
def test_a_key_hint_is_shown_escaped_on_one_bounded_line(signed: Path, hint: str) -> None:
    bundle = json.loads((signed / SIGNATURE_FILE).read_text())
    bundle["verificationMaterial"]["publicKey"]["hint"] = hint + "f" * 5000
    (signed / SIGNATURE_FILE).write_text(json.dumps(bundle))

    shown = str(verify_run_signature(signed))

    assert not UNSHOWABLE.search(shown), ascii(shown)
    assert shown.endswith("as model.sig claims, NOT verified: check it against the public key"), shown
    assert len(shown) < 450  # bounded: a hint cannot push "NOT verified" out of sight
    assert ("\\x1b[8m" in shown) if hint == "\x1b[8m" else True


def test_a_certificate_identity_is_shown_escaped(signed: Path) -> None:
    # A certificate's URI is ASCII: its escape sequences and line breaks (the hints above cover bidi).
    _with_sigstore_certificate(signed, "https://x/\x1b[2K\nevil", "https://issuer/\x1b[8my")

    shown = str(verify_run_signature(signed))

    assert not UNSHOWABLE.search(shown), ascii(shown)
    assert "https://x/\\x1b[2K\\nevil (issuer https://issuer/\\x1b[8my)" in shown


def test_download_prints_a_spoofing_hint_escaped(
    tiny_gpt2_run, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """`attncard download` of a run whose model.sig holds such hints: one line on stderr, nothing hidden."""
    run = Path(shutil.copytree(tiny_gpt2_run[0], tmp_path / "run"))
    sign_run_folder(run, keys[0])
    bundle = json.loads((run / SIGNATURE_FILE).read_text())
    bundle["verificationMaterial"]["publicKey"]["hint"] = "".join(SPOOFING_HINTS)
    (run / SIGNATURE_FILE).write_text(json.dumps(bundle))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["download", str(run)])

    assert code == 0, err.getvalue()
    assert err.getvalue().count("\n") == 1 and not UNSHOWABLE.search(err.getvalue().rstrip("\n"))
    assert err.getvalue().rstrip("\n").endswith("NOT verified: check it against the public key")
