"""Signed runs: sign a run folder with OpenSSF model signing (`model_signing`), and check its signature.

The signature is `model.sig` in the run folder, a Sigstore bundle. Its signed payload lists every other
file of the folder, results.json included, by relative path with its sha256: a changed, added, removed or
renamed file fails verification. There are two ways to sign:

- with a key: [`sign_run_folder`] (`attncard push --sign-key KEY`), an elliptic-curve private key (P-256,
  P-384 or P-521, PEM). The signer is named by the key's fingerprint, `sha256:<hex>` of its PEM public key,
  which the bundle records as its key hint ([`key_fingerprint`]). Signing and verifying work offline.
- keyless, with Sigstore: `.github/workflows/publish.yml` signs with the workflow's OIDC identity. The signer
  is the identity in the certificate, `https://github.com/<owner>/<repo>/.github/workflows/publish.yml@refs/
  tags/<tag>`, from the issuer `https://token.actions.githubusercontent.com`. Verifying needs Sigstore's
  trust root, which `sigstore` fetches over the network and then caches.

A signature proves something only against a signer the caller trusts. [`verify_run_signature`] given a public
key or an identity verifies the signature and reports `verified=True`. Given neither, it reports the signer
the bundle *claims* with `verified=False`: anyone who can write the file can claim any name there.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import tempfile
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import model_signing
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..record.errors import SignatureError, SigningError, first_line, visible
from ..record.manifest import (
    RESULTS_FILE,
    SIGNATURE_FILE,
    TRANSPORT_FILES,
    TRANSPORT_FOLDERS,
    max_file_bytes,
    sha256_file,
)

# What a transport adds to a run folder, never part of the run (see pipeline.record.manifest).
TRANSPORT_PATHS = (*TRANSPORT_FILES, *TRANSPORT_FOLDERS)
# `require_signer` ending so takes the workflow at any tag: runs published under earlier tags keep verifying.
ANY_TAG = "@refs/tags/*"
# The OIDC issuer of GitHub Actions, whose identity signs in .github/workflows/publish.yml.
GITHUB_ACTIONS_ISSUER = "https://token.actions.githubusercontent.com"
KEY_PREFIX = "sha256:"
_PREDICATE_TYPE = "https://model_signing/signature/v1.0"
# A signature lists a run's dozen files with their digests in a few kB; no model.sig is read past this.
MAX_SIGNATURE_BYTES = max_file_bytes(SIGNATURE_FILE)
# The most characters of a signer model.sig claims (key hint, certificate identity, issuer) that are shown: a
# key fingerprint takes 71, a workflow identity rarely 200.
MAX_CLAIM_CHARS = 300
_CURVES = ("secp256r1", "secp384r1", "secp521r1")  # those model_signing signs with
# Fulcio's certificate extensions naming the OIDC issuer: v2 holds a DER UTF8String, v1 the raw text.
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")


@dataclass(frozen=True)
class SignatureReport:
    """What a run folder's signature says, and whether it was checked.

    Attributes:
        signed: whether the folder has a model.sig.
        method: "key" (an elliptic-curve key), "sigstore" (keyless, a Sigstore certificate); None if unsigned.
        signer: the key's fingerprint `sha256:<hex>`, or the certificate's identity (a workflow URL, an
            e-mail address); "" when unsigned.
        verified: True when the signature was checked against the key or identity asked for and covers
            every file of the run. False when unsigned, or when nothing was asked for: then `signer` is
            only what the bundle claims.
        issuer: the OIDC issuer of a Sigstore certificate; "" otherwise.
        ignored: with `verified`, the files of the folder the signature does not cover and that were ignored:
            a transport's bookkeeping (`.gitattributes`, which every Hub repository has and the Hub writes
            after signing, `.git/`, `.cache/huggingface/`), never loaded and never copied by `download
            --output`. Anyone who can write the folder can change them.

    Example:
        >>> print(SignatureReport(True, "key", key_fingerprint("signing-key.pub"), verified=False))
        signed by key sha256:00ee72ac81e472819da786afad1a08a54f716b66b4000cc5cd968b64eb5dd210
        as model.sig claims, NOT verified: check it against the public key
    """

    signed: bool
    method: Literal["key", "sigstore"] | None
    signer: str
    verified: bool
    issuer: str = ""
    ignored: tuple[str, ...] = ()

    @property
    def who(self) -> str:
        """The signer in words: `key sha256:…`, or `IDENTITY (issuer ISSUER)`."""
        if self.method == "key":
            return f"key {self.signer or '(not named)'}"
        return f"{self.signer or '(no identity)'} (issuer {self.issuer or 'not named'})"

    def __str__(self) -> str:
        if not self.signed:
            return f"unsigned (no {SIGNATURE_FILE})"
        if self.verified:
            ignored = (
                f"; not covered and ignored: {_summary(self.ignored)}, a transport's bookkeeping that "
                "nothing loads"
            )
            return f"signed by {self.who}, verified" + (ignored if self.ignored else "")
        against = "the public key" if self.method == "key" else "the expected identity"
        return f"signed by {self.who} as {SIGNATURE_FILE} claims, NOT verified: check it against {against}"


def sign_run_folder(run_dir: str | Path, private_key: str | Path, *, password: bytes | None = None) -> Path:
    """Signs every file of a run folder with an elliptic-curve key, writing `run_dir/model.sig`.

    The signature covers every file, results.json included, except model.sig itself and the transport's
    `TRANSPORT_PATHS`; an older model.sig is replaced.

    Args:
        run_dir: the run folder written by publish, e.g. `runs/minilm-none-sst2`.
        private_key: a PEM elliptic-curve private key (P-256, P-384 or P-521).
        password: the key's password, if it is encrypted.

    Returns:
        The path of the signature, `run_dir/model.sig`.

    Raises:
        [`SigningError`]: no results.json in `run_dir`, a key that is missing, unreadable, encrypted without
            the right password or not elliptic-curve, or a folder that cannot be hashed (a symlink in it).

    Example:
        >>> sign_run_folder("runs/tiny-gpt2-none-sst2", "signing-key.pem")
        PosixPath('runs/tiny-gpt2-none-sst2/model.sig')
    """
    run_dir, private_key = Path(run_dir), Path(private_key)
    if not (run_dir / RESULTS_FILE).is_file():
        raise SigningError(
            f"{run_dir}: no {RESULTS_FILE}, so not a run folder; sign a folder written by publish"
        )
    check_private_key(private_key, password)
    hashing = model_signing.hashing.Config().set_ignored_paths(
        paths=[SIGNATURE_FILE, *TRANSPORT_PATHS], ignore_git_paths=False
    )
    signature = run_dir / SIGNATURE_FILE
    try:
        model_signing.signing.Config().use_elliptic_key_signer(
            private_key=private_key,
            password=password,  # type: ignore[arg-type]  # model_signing says str; cryptography takes bytes
        ).set_hashing_config(hashing).sign(run_dir, signature)
    except (OSError, ValueError) as error:
        raise SigningError(
            f"{run_dir}: could not be signed ({first_line(error)}); fix it and sign again"
        ) from error
    return signature


class SignerOptions(typing.TypedDict, total=False):
    """Who a run must be signed by: keyword arguments shared by the download family
    ([`pipeline.verify.download.DownloadOptions`]) and `attncard summary --hub`. Each defaults to None.

    Keys:
        require_signer: refuse a run unless model.sig is a Sigstore signature by this identity (e.g. the
            publish workflow, `https://github.com/ORG/REPO/.github/workflows/publish.yml@refs/tags/v1`), or
            by this workflow at any tag when it ends in `@refs/tags/*` (see [`verify_run_signature`]).
        signer_issuer: the OIDC issuer of `require_signer` (default: GitHub Actions').
        require_key: refuse a run unless model.sig is a signature by this public key (PEM). Without
            `require_signer` or `require_key`, a signature that is there is reported, not verified.
    """

    require_signer: str | None
    signer_issuer: str | None
    require_key: str | os.PathLike | None


def signer_options(options: Mapping[str, object]) -> SignerOptions:
    """The [`SignerOptions`] among a command's keyword `options` (each None when not given).

    Example:
        >>> signer_options({"require_key": None, "revision": "v1"})
        {'require_signer': None, 'signer_issuer': None, 'require_key': None}
    """
    return typing.cast(SignerOptions, {key: options.get(key) for key in SignerOptions.__annotations__})


def verify_run_signature(
    folder: str | Path,
    *,
    public_key: str | Path | None = None,
    identity: str | None = None,
    oidc_issuer: str | None = None,
    ignore: tuple[str, ...] = TRANSPORT_PATHS,
    absent: Mapping[str, str] | None = None,
) -> SignatureReport:
    """Checks a run folder's model.sig against a public key or a Sigstore identity, and names its signer.

    - No model.sig: reported unsigned, or refused when a key or identity was given.
    - model.sig and a key or identity: the signature must verify, be made by that key or identity, and list
      every file of the folder with its sha256 (files under `ignore` aside); reported `verified=True`.
    - model.sig and neither: the signer the bundle claims (key hint, certificate identity and issuer), with
      `verified=False`; nothing is checked, the name may be forged.

    Args:
        folder: the run folder, e.g. what `snapshot_download` returned.
        public_key: the signer's PEM elliptic-curve public key, for a run signed with a key.
        identity: the signer's Sigstore identity, for a keyless run; for publish.yml,
            `https://github.com/<owner>/<repo>/.github/workflows/publish.yml@refs/tags/<tag>`. Ending in
            `@refs/tags/*`, it takes the workflow at any tag: the identity the certificate names must be
            that workflow at a tag, and the signature is then verified against that exact identity (a
            leaderboard reads runs published under many tags). No other wildcard is read.
        oidc_issuer: the issuer of `identity` (default: GitHub Actions', `GITHUB_ACTIONS_ISSUER`).
        ignore: paths, relative to `folder`, that are not part of the run (default: the transport's
            `.gitattributes`, `.git/` and `.cache/huggingface/`).
        absent: files of the run left out of `folder` (the weights of a cards copy), by path, each with the
            sha256 the signature must give it: results.json's manifest's, results.json being signed itself.

    Returns:
        [`SignatureReport`]: signed or not, how, by whom, and whether that was verified.

    Raises:
        [`SignatureError`]: a key or identity was given and the run is unsigned, signed by another signer, or
            its signature does not verify or misses a file; model.sig is not a model-signing bundle; or the
            public key or Sigstore's trust root cannot be read.

    Example:
        >>> signature = sign_run_folder("runs/tiny-gpt2-none-sst2", "signing-key.pem")
        >>> print(verify_run_signature("runs/tiny-gpt2-none-sst2", public_key="signing-key.pub"))
        signed by key sha256:00ee72ac81e472819da786afad1a08a54f716b66b4000cc5cd968b64eb5dd210, verified
    """
    folder = Path(folder)
    if public_key is not None and identity is not None:
        raise SignatureError(
            "give a public key or a Sigstore identity to check a signature against, not both"
        )
    check_signer_identity(identity)
    issuer = oidc_issuer or GITHUB_ACTIONS_ISSUER
    # A key is named by its fingerprint and file name, never its path: messages reach published leaderboards.
    wanted = (
        f"key {key_fingerprint(public_key)} ({Path(public_key).name})"
        if public_key is not None
        else f"{identity}"
        if identity
        else None
    )
    if not (folder / SIGNATURE_FILE).is_file():
        if wanted:
            raise SignatureError(
                f"{folder}: the run is unsigned (no {SIGNATURE_FILE}), but a signature by {wanted} is "
                "required; do not use it, or ask its publisher to sign it"
            )
        return SignatureReport(signed=False, method=None, signer="", verified=False)
    with (folder / SIGNATURE_FILE).open("rb") as handle:
        raw = handle.read(MAX_SIGNATURE_BYTES + 1)
    if len(raw) > MAX_SIGNATURE_BYTES:
        raise SignatureError(
            f"{folder}: {SIGNATURE_FILE} holds more than {MAX_SIGNATURE_BYTES >> 20} MiB, far more than a "
            "signature of a run's files takes; it is not one: do not use this run, or sign it again"
        )
    claimed, signed_files = _read_bundle(raw, folder / SIGNATURE_FILE)
    if wanted is None:
        return claimed
    if identity is not None and identity.endswith(ANY_TAG):
        # The certificate's own identity, if it is this workflow at some tag; verified exactly below.
        identity = _at_any_tag(identity, claimed.signer)
    if public_key is not None:
        expected = SignatureReport(True, "key", key_fingerprint(public_key), verified=True)
    else:
        expected = SignatureReport(True, "sigstore", str(identity), verified=True, issuer=issuer)
    if dataclasses.replace(claimed, verified=True) != expected:
        required = expected.who + (f" ({Path(public_key).name})" if public_key is not None else "")
        raise SignatureError(
            f"{folder}: {SIGNATURE_FILE} names {claimed.who} as its signer, but a signature by {required} is "
            "required; do not use this run"
        )
    config = _verifier(public_key, identity, issuer)
    hashing = (_AbsentFilesHashing(absent) if absent else model_signing.hashing.Config()).set_ignored_paths(
        paths=[SIGNATURE_FILE, *ignore], ignore_git_paths=False
    )
    with tempfile.TemporaryDirectory() as scratch:
        signature = Path(scratch) / SIGNATURE_FILE
        signature.write_bytes(raw)  # verify exactly the bytes read above
        try:  # any failure, whatever raises it, means the signature does not hold
            config.set_hashing_config(hashing.set_allow_symlinks(True)).verify(folder, signature)
        except Exception as error:
            differences = _differences(folder, signed_files, ignore, absent or {})
            reason = "; ".join(differences[:3]) or first_line(error)
            raise SignatureError(
                f"{folder}: {SIGNATURE_FILE} does not verify against {wanted} ({reason}); do not use this run"
            ) from error
    unsigned = sorted(set(_run_files(folder, ignore)) - set(signed_files))
    if unsigned:  # the signer may have excluded paths (model_signing honours its ignore_paths)
        raise SignatureError(
            f"{folder}: {', '.join(unsigned)} not covered by {SIGNATURE_FILE}; do not use this run, or "
            "remove the files if you added them"
        )
    return dataclasses.replace(expected, ignored=tuple(_ignored_files(folder, ignore)))


class _AbsentFilesHashing(model_signing.hashing.Config):
    """model_signing's hashing of a folder, with the files it lacks added at the sha256 given for each: the
    signature is checked over the whole run while only part of it was fetched. A file that is there is
    hashed as always."""

    def __init__(self, absent: Mapping[str, str]):
        super().__init__()
        self._absent = dict(absent)

    def hash(self, model_path, *, files_to_hash=None) -> model_signing.manifest.Manifest:
        hashed = super().hash(model_path, files_to_hash=files_to_hash)
        serialization = model_signing.manifest.SerializationType.from_args(hashed.serialization_type)
        descriptors = list(hashed.resource_descriptors())
        items = [serialization.new_item(item.identifier, item.digest) for item in descriptors]
        if descriptors:  # model_signing does not export its Digest: the type of a digest it made
            digest = type(descriptors[0].digest)
            items += [
                serialization.new_item(path, digest("sha256", bytes.fromhex(sha256)))
                for path, sha256 in sorted(self._absent.items())
                if not (Path(model_path) / path).exists()
            ]
        return model_signing.manifest.Manifest(hashed.model_name, items, serialization)


def key_fingerprint(public_key: str | Path) -> str:
    """The fingerprint of a public key as model.sig records it: `sha256:` and the hex sha256 of its PEM.

    Args:
        public_key: a PEM elliptic-curve public key.

    Returns:
        `sha256:<64 hex digits>`, what [`SignatureReport`] names a key signer by.

    Raises:
        [`SignatureError`]: the file is missing or not a PEM public key.

    Example:
        >>> key_fingerprint("signing-key.pub")
        'sha256:00ee72ac81e472819da786afad1a08a54f716b66b4000cc5cd968b64eb5dd210'
    """
    try:
        key = serialization.load_pem_public_key(Path(public_key).read_bytes())
    except (OSError, ValueError, UnsupportedAlgorithm) as error:
        raise SignatureError(
            f"{public_key}: not a readable PEM public key ({first_line(error)}); pass the signer's public "
            "key (`openssl ec -in KEY.pem -pubout` makes it from the private key)"
        ) from error
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return KEY_PREFIX + hashlib.sha256(pem).hexdigest()


def _at_any_tag(pattern: str, claimed: str) -> str:
    """The identity to verify for a `…@refs/tags/*` pattern: the claimed one when it is the pattern's workflow
    at a tag, else the pattern itself (which no certificate names, so the check below refuses the run).

    Example:
        >>> _at_any_tag("https://github.com/o/r/.github/workflows/publish.yml@refs/tags/*",
        ...             "https://github.com/o/r/.github/workflows/publish.yml@refs/tags/v2")
        'https://github.com/o/r/.github/workflows/publish.yml@refs/tags/v2'
    """
    prefix = pattern[: -len("*")]
    tag = claimed[len(prefix) :] if claimed.startswith(prefix) else ""
    return claimed if tag and "*" not in tag else pattern


def check_signer_identity(identity: str | None) -> None:
    """Refuses a `require_signer` with a wildcard anywhere but a trailing `@refs/tags/*`, in one line."""
    if identity is not None and "*" in identity.removesuffix(ANY_TAG):
        raise SignatureError(
            f"{identity}: a signer identity takes no wildcard but a trailing {ANY_TAG} (this workflow at any "
            "tag); give the workflow's identity, e.g. https://github.com/ORG/REPO/.github/workflows/"
            f"publish.yml{ANY_TAG}"
        )


def _verifier(
    public_key: str | Path | None, identity: str | None, issuer: str
) -> model_signing.verifying.Config:
    """model_signing's verifier for a key, or for a Sigstore identity (which loads Sigstore's trust root)."""
    if public_key is not None:
        return model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public_key)
    try:
        return model_signing.verifying.Config().use_sigstore_verifier(
            identity=str(identity), oidc_issuer=issuer
        )
    except Exception as error:
        raise SignatureError(
            f"could not load Sigstore's trust root ({first_line(error)}); verifying a keyless signature "
            "needs the network once (sigstore caches it): connect and try again"
        ) from error


def check_private_key(path: Path, password: bytes | None = None) -> None:
    """Raises a one-line [`SigningError`] for a key model_signing cannot sign with."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password)
    except FileNotFoundError:
        raise SigningError(
            f"{path}: no such key file; pass the PEM elliptic-curve private key to sign with"
        ) from None
    except (OSError, TypeError, ValueError, UnsupportedAlgorithm) as error:
        raise SigningError(
            f"{path}: not a usable PEM private key ({first_line(error)}); check the file and its password"
        ) from error
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in _CURVES:
        raise SigningError(
            f"{path}: model signing needs an elliptic-curve key on P-256, P-384 or P-521; make one with "
            "`openssl ecparam -name prime256v1 -genkey -noout -out KEY.pem`"
        )


def _read_bundle(raw: bytes, where: Path) -> tuple[SignatureReport, dict[str, str]]:
    """The signer a bundle claims (`verified=False`) and the files it lists (path -> sha256), unchecked."""
    try:
        bundle = json.loads(raw)
        material = bundle["verificationMaterial"]
        statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
        kind, predicate = statement["predicateType"], statement["predicate"]
        method = (predicate["serialization"]["method"], predicate["serialization"].get("hash_type"))
        files = {
            item["name"]: item["digest"] for item in predicate["resources"] if item["algorithm"] == "sha256"
        }
        if "publicKey" in material:
            hint = material["publicKey"].get("hint", "")
            claimed = SignatureReport(True, "key", KEY_PREFIX + hint if hint else "", verified=False)
        else:
            certificate = material.get("certificate") or material["x509CertificateChain"]["certificates"][0]
            claimed = _certificate_claim(
                x509.load_der_x509_certificate(base64.b64decode(certificate["rawBytes"]))
            )
    except RecursionError:  # json's parser on nesting deeper than Python's recursion limit
        raise SignatureError(
            f"{where}: not a model-signing signature (its JSON is nested too deeply to read); do not use "
            "this run, or sign it again"
        ) from None
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise SignatureError(
            f"{where}: not a model-signing signature (cannot read {first_line(error)}); sign the run again"
        ) from error
    if kind != _PREDICATE_TYPE:
        raise SignatureError(f"{where}: its payload is a {kind}, not a {_PREDICATE_TYPE}; sign the run again")
    if method != ("files", "sha256") or len(files) != len(predicate["resources"]):
        raise SignatureError(
            f"{where}: signed with model_signing's {'/'.join(map(str, method))} serialization; attncard "
            "checks per-file sha256 signatures (model_signing's default): sign the run again without sharding"
        )
    # What the bundle claims is shown (download prints it) and may be forged: a mirror can add model.sig even
    # to a run pinned by its tag. Escape-sequence, line-break and bidi characters are made visible and the
    # length bounded, so that a claim can neither hide "NOT verified" nor forge a line of its own.
    shown = dataclasses.replace(
        claimed,
        signer=visible(claimed.signer, MAX_CLAIM_CHARS),
        issuer=visible(claimed.issuer, MAX_CLAIM_CHARS),
    )
    return shown, files


def _certificate_claim(certificate: x509.Certificate) -> SignatureReport:
    """The identity (first URI or e-mail name) and OIDC issuer a Sigstore certificate names, unchecked."""
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        identities = names.get_values_for_type(x509.UniformResourceIdentifier)
        identities += names.get_values_for_type(x509.RFC822Name)
    except x509.ExtensionNotFound:
        identities = []
    issuer = ""
    for oid in (_ISSUER_V2, _ISSUER_V1):
        try:
            value = certificate.extensions.get_extension_for_oid(oid).value.value
        except x509.ExtensionNotFound:
            continue
        issuer = _der_text(value) if oid == _ISSUER_V2 else value.decode()
        break
    return SignatureReport(
        True, "sigstore", identities[0] if identities else "", verified=False, issuer=issuer
    )


def _der_text(value: bytes) -> str:
    """The text of a DER UTF8String: tag 0x0C, a length (short or long form), the bytes."""
    length, start = value[1], 2
    if length & 0x80:
        start = 2 + (length & 0x7F)
        length = int.from_bytes(value[2:start], "big")
    return value[start : start + length].decode()


def _run_files(folder: Path, ignore: tuple[str, ...]) -> list[str]:
    """The folder's files by POSIX path, without model.sig and the paths under `ignore`."""
    skipped = [path.strip("/") for path in (SIGNATURE_FILE, *ignore)]
    names = (path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return sorted(name for name in names if not any(name == s or name.startswith(s + "/") for s in skipped))


def _ignored_files(folder: Path, ignore: tuple[str, ...]) -> list[str]:
    """The folder's files under `ignore` (a transport's bookkeeping), by POSIX path."""
    skipped = [path.strip("/") for path in ignore]
    names = (path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return sorted(name for name in names if any(name == s or name.startswith(s + "/") for s in skipped))


def _summary(paths: tuple[str, ...]) -> str:
    """Files named one by one at the top of the folder, counted per transport folder (`.git/ (3 files)`)."""
    folders = {folder: 0 for folder in TRANSPORT_FOLDERS}
    names = []
    for path in paths:
        folder = next((folder for folder in folders if path.startswith(folder + "/")), None)
        if folder is None:
            names.append(path)
        else:
            folders[folder] += 1
    names += [
        f"{folder}/ ({count} file{'s' if count > 1 else ''})" for folder, count in folders.items() if count
    ]
    return ", ".join(names)


def _differences(
    folder: Path, signed: dict[str, str], ignore: tuple[str, ...], absent: Mapping[str, str]
) -> list[str]:
    """How the folder differs from the files a signature lists: missing, added or changed files (a file
    left out, in `absent`, by its given sha256)."""
    present = _run_files(folder, ignore)
    problems = [
        f"{name}: signed but missing" for name in sorted(signed) if name not in present and name not in absent
    ]
    problems += [
        f"{name}: sha256 given by {RESULTS_FILE} differs from the signed one"
        for name, sha256 in sorted(absent.items())
        if name not in present and signed.get(name) != sha256
    ]
    problems += [f"{name}: not signed (added after signing)" for name in present if name not in signed]
    problems += [
        f"{name}: sha256 differs from the signed one"
        for name in present
        if name in signed and sha256_file(folder / name) != signed[name]
    ]
    return problems


__all__ = [
    "ANY_TAG",
    "GITHUB_ACTIONS_ISSUER",
    "MAX_SIGNATURE_BYTES",
    "TRANSPORT_PATHS",
    "SignatureReport",
    "SignerOptions",
    "check_signer_identity",
    "key_fingerprint",
    "sign_run_folder",
    "signer_options",
    "verify_run_signature",
]
