"""The frozen schemas (2 and 3, which no attncard writes any more): the tasks their runs may record, and the
commits and versions of attncard that wrote them. A run relabelled with an older schema to escape a newer rule
is refused here.
"""

from __future__ import annotations

from .environment import EnvironmentRecord
from .errors import UnknownSchemaError
from .text import COMMIT_RE

# The tasks a run of each frozen schema (no attncard writes it any more) may record. Schemas 2 and 3 evaluated
# one split of every task; MNLI, gated on both of its validation splits from schema 4 on (`second_split`), is
# in neither, whatever a run says: a run cannot claim an older schema to escape its second gate. Frozen with
# the schemas, never extended (tests/record/test_results_schema.py checks them against the tasks).
FROZEN_SCHEMA_TASKS = {
    2: ("sst2", "cola", "mrpc", "qqp", "rte", "qnli"),
    3: ("sst2", "cola", "mrpc", "qqp", "rte", "qnli"),
}
# The commits of attncard that wrote each frozen schema (and schema 1, which no attncard reads any more), by
# their first 12 hex digits, generated once from `git log` (tests/record/test_results_schema.py checks them
# against the repository's history). A frozen schema gets no new commit: a run claiming one records one of
# these.


def _prefixes(text: str) -> frozenset[str]:
    return frozenset(text.split())


FROZEN_SCHEMA_COMMITS = {
    1: _prefixes(
        "0011e2986872 009e21ed0950 04470fd9f28d 07c57ce5d341 10ba174a2f8b 1350922c0dd2 153a6817ae3f "
        "1763579c9caf 1e9285d586c5 1faa02ceb7fe 24d90129a004 2b5290a984f6 2f1570800646 3375353b498c "
        "389875de68bb 3ca4087216da 4095f93c719d 4221b58754c4 490310c84b64 4c6225799e6a 4d45cc861fee "
        "522aa1b6758b 532f5507af69 54459b73a9f6 59fc8b5a81d0 5ad91325e36d 5db97810d9d8 63763a3e29e5 "
        "6448576195e2 64a03f0a8337 66629c40494f 77913be135d1 787b9e3b27e5 79b4585ad1b1 7e42bfeb9a3e "
        "826f37e69620 83a91bab8e0d 85e4936a2b2d 8969d89b8282 936bb95f1b8c 94060eee2ba8 95519875672c "
        "965f267e161e 9cdaf2c652f5 a1fb2a2047ff a6c588ce24ac ac44ae68a3e3 ad4b0a94a6d8 b16d49176533 "
        "b76747b24d64 b9d924d3a403 bd1e3da8b7e3 c611c52a4a7a d81d5772e045 d9d30baafdd7 da546c07fb65 "
        "dc016037227d de0537f94109 e0171fe35eba e3841204b19d e700e4be5e5f e8f27fef2167 ea847e4f1d54 "
        "ee8355e43f03 efa9fa995c89 fb74bdabef9d"
    ),
    2: _prefixes(
        "038ec2c640c6 03d614264084 046d12aff113 0815ed058c8a 09c1c218673e 0c29d99d6ea2 0c2e3b2d3c5d "
        "0f1805668bc8 10b18d5cc4d5 1282be2273d9 1499d9f9a912 163bde1248aa 19aadb1cb123 1caf413a6c62 "
        "1cc605db38db 1cddbc47d38f 1d12002be0a3 212a94e99128 213445d53a78 21aca60b7e82 2422e39afd0a "
        "264c41941f48 2a09a72b4ece 2b28ff1253e7 2b4548254e58 2b644938855c 2bc6ce967e10 2def7435434e "
        "2fed8dbf4a14 3006eb3be92e 30108914dc41 3077affe5d6d 31aeccc69df3 3490d99d2796 37273661b47c "
        "37f626fb1d4a 3a3141e5bacd 3d4cdc3d8d16 3ec0de14c7f3 3ef10b2f2baf 400fab98f14c 402988899791 "
        "40792969af8b 40ad4ff891cb 44066b8706f0 4585c510e8bc 46044ef8cc5c 47554fa2805e 48cd4c63ec39 "
        "4985ba112bfe 4aa598c16c31 4bae73c387cf 4dac935db014 4e5734d96ef0 4edda3caeab4 52ff09836f61 "
        "53ea54df9895 5481ceeb4c44 55a296899d97 55dc43fab947 55e83f5c9ff6 566caa2efa53 57c94fc7ea4e "
        "593f72e939b9 5946030c41d5 6093492c3540 63d28f89e4f9 6406b1feed65 644e581da3fa 64a6589ae407 "
        "672c6702f919 6770d79b41e6 6a2795f0fe76 6c189e3bc4f5 6dc4b7bf7994 722b64a29199 75a262b77493 "
        "763894889c60 7649501d52b0 79074fca012c 79552dab8f56 7a24871e526d 7afb0b58557c 7c54f782f3a8 "
        "7e032d6b7247 7fd7f2e9f77b 81ebfc9a0956 8242a337c9e2 827e74990233 83ae3d834371 8751393e6ae7 "
        "88bfb019e39a 8c3e86798aa5 8e5e970a9aca 92889f6ae21f 92dcaac404bd 98de9ad7c334 99df691521be "
        "9c4e5155186d 9c68f679948a 9d12dfe8fa40 9e2ac14c75e9 a17030a4f4e5 a19c8ff54645 a1f2257a941d "
        "a2d4f406e045 a33a5449a0b9 a3ec5e4b2f22 a415490a072a a60e72710db1 a61dce4a48f7 aa673a491b94 "
        "ab1a8e16de18 ab8ea9bf940d ac5e8366cdb6 acf27ad2ed26 ad665e8d78dc ae97fa87e5ef af4cc931e316 "
        "b1cd09421679 b22e3fdfac73 b253436669a5 b31f6df5e4b5 b336dec48880 b3a6c116b748 b3dad7caf166 "
        "b524ebae16a2 b54c44def905 b7790cca97c1 b788ca2f376b b8d4d759151f bab42a417f7f bc8bd2de87cf "
        "bca1435da6b9 bf16cd9061e4 bfe857612c62 c0d21e19e384 c1fe9e125c5b c4fc06d66f94 c54404cc0b6c "
        "c598d1202769 c6ac6004fc4e c71a2aee8a65 c91c6f5d597b cbd4c7842ca1 cbd4f90798d4 cc31c50f6e26 "
        "d79d1b26e2ad db1ec10a69b2 dc98cc06f493 dcaeec6b55a2 dcc04c0d3bc0 df2dfce5d1b0 e11fb1d2cda0 "
        "e2c8f459de33 e7b1f1f29850 e7f4b3c78051 e815c2d684b6 e8754ad685bf e9f2b2dfa771 eae31b429818 "
        "ebd2e460bc92 ecde16401611 ef6cbd3a85e1 efaf106b698d f19fbce23947 f2efb1c3265c f3d1d63fdcfd "
        "f8271fe8f4a9 f8a9b42ee07a fb5d87fa2318 fcda6115d093 fd16df72dd69 fec9a0863efb ff478273324e "
        "ff6dcd6bfe9b"
    ),
    3: _prefixes(
        "00b53a0b7f85 033b1becee2b 0a32aa508542 0f6761a4e40c 1159a41dbd55 13392f38c7e4 14f53441aaa4 "
        "15aa70e8b8ec 16b8abe3b85c 2008d6106f7d 223628eee0a0 259e7c78a72d 2bd76e69791b 2c11b179dae7 "
        "351ce6065613 36e08ecff1d6 3edc287bdd0d 3fcef54d135d 411d0f88cfaf 435a4c962884 49e40f4bdbf5 "
        "4f7d3488d483 50c9d892b8ee 5425af12982e 7485c2dd7ed7 75cdacba06e1 77cd134d598b 78c2d86fc02d "
        "78dc46e79a41 793f1fca429d 7d2d5b3ee4d1 838521393b7b 8f605bbcfd94 aae5a3f39b0a b0618029555b "
        "b56a29c98aa6 b5fe7afa4c7f b85c7eb7af46 bf6512547140 c5f840f65cda c88904d8500a cc8b100b824e "
        "d0ac36cebe40 d1192ec5ad3f d38713d27ff6 d398891a51a1 d6831e3563a8 ed795fd246d6 f060f2f72218 "
        "f2dd31f61249 f3df6e5ab0d8 f4267f3d7587 f8eb4c5bddfd fb3376be46bc fdd10712616b"
    ),
}
# The attncard version of every commit above: pyproject.toml's, which never changed while they were made.
FROZEN_SCHEMA_ATTNCARD_VERSIONS = ("0.1.0",)


def check_frozen_provenance(version: int, environment: EnvironmentRecord) -> None:
    """A run of a frozen schema records an attncard that wrote it: one of the commits that wrote that schema
    or an earlier one (a run upgraded by tests/scripts/rerender_cards.py keeps the commit that wrote it), at
    the version those commits had. A run relabelled with an older schema to escape a newer rule is refused
    here unless its provenance is forged too; the rules of `FROZEN_SCHEMA_TASKS` stand either way.

    Raises:
        UnknownSchemaError: the commit or the version is not one that wrote schema `version`.
    """
    written = set().union(*(FROZEN_SCHEMA_COMMITS[v] for v in FROZEN_SCHEMA_COMMITS if v <= version))
    commit = environment.git_commit.removesuffix("+dirty")
    # Listed by their first 12 hex digits: the commit begins with one of them.
    if not COMMIT_RE.fullmatch(commit) or not commit.startswith(tuple(written)):
        raise UnknownSchemaError(
            f"results.json: environment.git_commit is {environment.git_commit!r}, which is no commit of "
            f"attncard that wrote schema {version} or an earlier one: the run claims a schema its attncard "
            "did not write, do not use this checkpoint"
        )
    if environment.attncard_version not in FROZEN_SCHEMA_ATTNCARD_VERSIONS:
        raise UnknownSchemaError(
            f"results.json: environment.attncard_version is {environment.attncard_version!r}, but schema "
            f"{version} was written by attncard {', '.join(FROZEN_SCHEMA_ATTNCARD_VERSIONS)} only: the run "
            "claims a schema its attncard did not write, do not use this checkpoint"
        )


__all__ = [
    "FROZEN_SCHEMA_ATTNCARD_VERSIONS",
    "FROZEN_SCHEMA_COMMITS",
    "FROZEN_SCHEMA_TASKS",
    "check_frozen_provenance",
]
