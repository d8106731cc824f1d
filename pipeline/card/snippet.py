"""What the card tells a reader to run: the usage snippet (Python that loads the run with attncard's verified
loader and classifies one row), where it loads the run from, the install lines of the attncard and the
attention-module package that made the run, and the command that reproduces it. Each is built again from
results.json's names, never copied from it.
"""

from __future__ import annotations

import re

from ..record.results import Results
from ..record.run_names import reproduce_command


def base_model_is_local(results: Results) -> bool:
    """Whether the run's base model was a local folder, which results.json names only by its folder name and
    the sha256 of its weights: whoever loads the run must bring that folder (`base_model=`).

    Its model id is a folder name, without the `/` of every Hub id (`minilm` records its Hub id); its `name`
    alone cannot tell, as a folder may be named like an alias (`gpt2`).
    """
    return results.model.revision.startswith("sha256:") and "/" not in results.model.model_id


def usage_snippet(results: Results, location: str, example: list[str], base_model: str | None = None) -> str:
    """Python that loads this checkpoint with attncard's verified loader and classifies one example.

    Args:
        results: the run (a FAIL run needs `allow_failed=True` to load at all).
        location: the Hub repository id, or the run folder.
        example: the text(s) of one row, one per text column of the task.
        base_model: for a run whose base model was a local folder (see [`base_model_is_local`]), the folder
            the snippet passes as `base_model=`: the real one to run the snippet here, while the card
            shows the default `./<folder name>`, as the recorded command names it. Unused otherwise.

    The card gives the install commands once, above it ([`install_line`], [`module_install_line`]).

    Example:
        >>> print(usage_snippet(results, "attncard/tiny-gpt2-none-sst2", ["a gorgeous movie ."]))
        from attncard import load_verified
        <BLANKLINE>
        verified = load_verified('attncard/tiny-gpt2-none-sst2', base_model='./gpt2')  # checks every ...
        inputs = verified.tokenizer(['a gorgeous movie .'], return_tensors="pt")
        label_id = int(verified.model(**inputs).logits.argmax(-1))
        print(verified.model.config.id2label[label_id])
        <BLANKLINE>
    """
    arguments = [repr(location)]
    if base_model_is_local(results):
        arguments.append(f"base_model={(base_model or f'./{results.model.model_id}')!r}")
    if results.verification.status.value == "FAIL":
        arguments.append("allow_failed=True")
    texts = ", ".join(repr([text]) for text in example)
    return (
        "from attncard import load_verified\n"
        "\n"
        f"verified = load_verified({', '.join(arguments)})  # checks every file's sha256 and the status\n"
        f'inputs = verified.tokenizer({texts}, return_tensors="pt")\n'
        "label_id = int(verified.model(**inputs).logits.argmax(-1))\n"
        "print(verified.model.config.id2label[label_id])\n"
    )


# Where a recorded usage snippet loads the run from: the argument of its `load_verified(...)` line.
_USAGE_LOCATION_RE = re.compile(r"^verified = load_verified\('([A-Za-z0-9._/-]{1,512})'", re.MULTILINE)


def run_folder_location(repo_name: str) -> str:
    """How the usage snippet of a run not on the Hub names its run folder: `./<name>`, in the folder that
    holds it, never by the path --output gave, which would publish the publisher's folders (an absolute
    --output names their home). Runs published before name the folder by that path, and keep verifying.

    Example:
        >>> run_folder_location("tiny-gpt2-none-sst2")
        './tiny-gpt2-none-sst2'
    """
    return f"./{repo_name}"


def usage_location(results: Results) -> str | None:
    """Where the run's recorded usage snippet loads it from, when that is the run itself: its Hub repository,
    or its folder: `./<name>` ([`run_folder_location`]), or in runs published before, the path publish was
    given (`runs/<name>`, relative to the folder publish ran in, or absolute); None when the snippet loads
    anything else, or there is no snippet.

    Example:
        >>> usage_location(results)
        'loopback-user/tiny-gpt2-none-sst2'
    """
    match = _USAGE_LOCATION_RE.search(results.usage.code) if results.usage is not None else None
    if match is None:
        return None
    location = match.group(1)
    if results.repo_id is not None:
        return location if location == results.repo_id else None
    parts = location.removeprefix("/").split("/")
    return location if parts[-1] == results.repo_name and all(parts) else None


def usage_where(results: Results, location: str) -> str:
    """What the card says under its usage snippet: where the snippet loads the run from and what the loader
    checks.

    Example:
        >>> print(usage_where(results, results.repo_id))  # published as loopback-user/tiny-gpt2-none-sst2
        `load_verified` downloads `loopback-user/tiny-gpt2-none-sst2` from the Hub, checks every file ...
    """
    if results.repo_id is not None:
        where = f"`load_verified` downloads `{location}` from the Hub,"
    elif location == run_folder_location(results.repo_name):
        where = (
            f"This run is not on the Hub: the snippet loads its run folder `{location}`: run it in the "
            "folder that holds the run folder. `load_verified`"
        )
    else:  # a run published before `run_folder_location`: by the path --output gave
        relative = "" if location.startswith("/") else ", relative to the folder `publish` ran in"
        where = (
            f"This run is not on the Hub: the snippet loads its run folder `{location}`{relative}. "
            "`load_verified`"
        )
    base = (
        f" `base_model=` names the folder of the base model `{results.model.model_id}`, which the run does "
        "not hold: pass yours."
        if base_model_is_local(results)
        else ""
    )
    return (
        f"{where} checks every file against the sha256 manifest in `results.json`, refuses a FAIL "
        f"checkpoint, rebuilds the base model with the `{results.module.name}` module and loads the adapter "
        f"(safetensors only).{base}"
    )


def card_usage_code(results: Results) -> str | None:
    """The usage snippet the card shows: attncard's own, built again from the run's names, its location
    ([`usage_location`]) and the first evaluated row, never copied from results.json. None when the
    snippet cannot be built (no location of the run's own, or no row); then it is not shown at all."""
    location = usage_location(results)
    if location is None or not results.dataset.samples:
        return None
    return usage_snippet(results, location, list(results.dataset.samples[0].texts.values()))


def reproduce_commands(results: Results) -> list[str]:
    """The commands that may reproduce a run, built again from its recorded names (see
    [`reproduce_command`]): with `--repo-id` when it names one, else without a name and with `--name`, as
    a name given equal to the default leaves no trace elsewhere.

    Example:
        >>> results.command in reproduce_commands(results)
        True
    """
    model = f"./{results.model.model_id}" if base_model_is_local(results) else results.model.name
    names = [None] if results.repo_id else [None, results.repo_name]
    return [
        reproduce_command(
            model,
            results.module.name,
            results.dataset.task,
            results.training.hyperparameters,
            data_from_folder=bool(results.dataset.files),
            repo_id=results.repo_id,
            name=name,
        )
        for name in names
    ]


def install_line(results: Results) -> str:
    """Card template 1's install command: the `pip install` of the attncard that made the run, pinned to the
    commit results.json records (or to its version when no commit was recorded). Frozen with that version's
    cards; card template 2 builds its lines with [`attncard_install_lines`].

    Example:
        >>> install_line(results)
        'pip install "attncard @ git+https://github.com/attncard/attncard@...'
    """
    environment = results.environment
    commit, dirty = environment.git_commit.removesuffix("+dirty"), environment.git_commit.endswith("+dirty")
    if environment.attncard_repository and commit != "unknown":
        line = f'pip install "attncard @ git+{environment.attncard_repository}@{commit}"'
        return line + ("  # the run had uncommitted changes on top of this commit" if dirty else "")
    if environment.attncard_version != "unknown":
        return f'pip install "attncard=={environment.attncard_version}"'
    return "pip install attncard"


def module_install_line(results: Results) -> str:
    """Card template 1's second install command, for a run whose module comes from a package other than
    attncard: the `pip install` of that package at the recorded version; "" for a built-in module. Frozen
    with that version's cards; card template 2 builds it with [`module_install_lines`].

    Example:
        >>> module_install_line(results)  # a run of the built-in `none`
        ''
        >>> results.module.name = "sliding_window"  # as a run of the example plugin records it
        >>> results.module.package, results.module.package_version = "attncard-sliding-window", "0.1.0"
        >>> module_install_line(results)
        'pip install "attncard-sliding-window==0.1.0"  # the attention module sliding_window'
    """
    module = results.module
    if module.package in ("", "attncard"):
        return ""
    return f'pip install "{module.package}=={module.package_version}"  # the attention module {module.name}'


# The attention-module packages kept in attncard's own repository, by package name, and their folder there:
# installable from the commit of attncard a run records, as pip installs a package from a folder of a git
# repository (`#subdirectory=`). Any other package is installed by its name and version.
REPOSITORY_PLUGINS = {"attncard-sliding-window": "examples/sliding_window"}


def _recorded_commit(results: Results) -> tuple[str, bool]:
    """The attncard commit results.json records without its "+dirty", and whether it had "+dirty"; the commit
    is "" when none was recorded or no repository is named to fetch it from."""
    environment = results.environment
    commit = environment.git_commit.removesuffix("+dirty")
    if not environment.attncard_repository or commit == "unknown":
        return "", False
    return commit, environment.git_commit.endswith("+dirty")


def attncard_install_lines(results: Results) -> list[str]:
    r"""Card template 2's install lines for the attncard that made the run, each one that installs it today:
    from its repository at the recorded commit; without a recorded commit, its release on PyPI by version,
    and where PyPI has none, where else the run says it may come from (a comment: the run cannot name the
    exact source).

    Example:
        >>> attncard_install_lines(results)
        ['pip install "attncard @ git+https://github.com/attncard/attncard@...']
        >>> results.environment.git_commit = "unknown"  # as an install from a wheel records it
        >>> print("\n".join(attncard_install_lines(results)))
        # The run recorded attncard 0.1.0 but no commit: its release on PyPI, or where PyPI has none, ...
        pip install "attncard==0.1.0"
    """
    environment = results.environment
    repository, version = environment.attncard_repository, environment.attncard_version
    commit, dirty = _recorded_commit(results)
    if commit:
        line = f'pip install "attncard @ git+{repository}@{commit}"'
        return [line + ("  # the run had uncommitted changes on top of this commit" if dirty else "")]
    source = f"attncard {version} from {repository}" if repository else f"attncard {version} where you got it"
    if version != "unknown":
        return [
            f"# The run recorded attncard {version} but no commit: its release on PyPI, or where PyPI has "
            f"none, {source}",
            f'pip install "attncard=={version}"',
        ]
    if repository:
        return [
            "# The run recorded no version or commit of attncard: this installs its newest commit",
            f'pip install "attncard @ git+{repository}"',
        ]
    return ["# The run recorded no version, commit or repository of the attncard that made it"]


def module_install_lines(results: Results) -> list[str]:
    r"""Card template 2's install lines for the package of the run's attention module; none for a built-in
    module. A package kept in attncard's repository (`REPOSITORY_PLUGINS`) is installed from there at the
    commit the run records; any other by its name and recorded version, from PyPI, or where its authors
    publish it: the run records the package, not where it came from. Either way the loader refuses a module
    whose source is not the one the run recorded (its sha256).

    Example:
        >>> results.module.name = "sliding_window"  # as a run of the example plugin records it
        >>> results.module.package, results.module.package_version = "attncard-sliding-window", "0.1.0"
        >>> print("\n".join(module_install_lines(results)))
        pip install "attncard-sliding-window @ git+https://github.com/attncard/attncard@...#subdirectory=...
    """
    module = results.module
    if module.package in ("", "attncard"):
        return []
    commit, _ = _recorded_commit(results)
    folder = REPOSITORY_PLUGINS.get(module.package)
    if folder and commit:
        url = f"git+{results.environment.attncard_repository}@{commit}#subdirectory={folder}"
        return [f'pip install "{module.package} @ {url}"  # the attention module {module.name}']
    return [
        f"# The attention module {module.name} comes from the package {module.package} "
        f"{module.package_version}; the run did not record where it came from: from PyPI, or where its "
        "authors publish it (the loader checks its source against the run's sha256)",
        f'pip install "{module.package}=={module.package_version}"',
    ]


def install_commands(results: Results) -> str:
    """The card's install block: the lines of the card template version the run records (1 for none).

    Example:
        >>> print(install_commands(results))  # a run of the built-in `none`, with a recorded commit
        pip install "attncard @ git+https://github.com/attncard/attncard@...
    """
    if results.card_template in (None, 1):
        return "\n".join(filter(None, (install_line(results), module_install_line(results))))
    return "\n".join([*attncard_install_lines(results), *module_install_lines(results)])
