"""The docs site as a reader on a narrow window sees it: the Quick start page, built by mkdocs with this
site's theme, Markdown extensions and extra stylesheets (mkdocs.yml), laid out by headless Chromium at 600 px.
No line of a code block runs on past the block's edge (a command's comment was cut off there), and a code
name in a table's first column stays on one line (`attncard[gpu` / `]`).

The page is built alone, in a site of its own, so that the test takes seconds rather than the whole site's
minute; `make docs` builds every page with any warning an error.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import HEADLESS_CHROMIUM, REPO_ROOT

CHROMIUM_FLAGS = [*HEADLESS_CHROMIUM, "--window-size=600,2000"]
# Run in the page once it is laid out; the DOM dump shows what it found.
LAYOUT_SCRIPT = """
<script>
window.addEventListener("load", () => {
  const codeBlocks = [...document.querySelectorAll(".md-typeset pre > code")];
  const names = [...document.querySelectorAll(".md-typeset td:first-child code")];
  document.body.dataset.layout = JSON.stringify({
    code_blocks: codeBlocks.length,
    cut_off: codeBlocks
      .filter((code) => code.scrollWidth > code.clientWidth + 1)
      .map((code) => code.textContent),
    names: names.length,
    broken: names.filter((code) => code.getClientRects().length > 1).map((code) => code.textContent),
  });
});
</script>
"""


def mkdocs_config() -> dict:
    """mkdocs.yml, its `!relative` tag read as the folder it names."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!relative", lambda loader, node: str(REPO_ROOT))
    return yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=Loader)


@pytest.mark.slow  # mkdocs builds a page
@pytest.mark.integration  # Chromium
def test_the_quick_start_fits_a_narrow_window(tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (`make tools` installs it where apt-get may)")
    config = mkdocs_config()
    assert config["extra_css"], "mkdocs.yml names no extra stylesheet"
    docs = tmp_path / "docs"
    docs.mkdir()
    # The page's own links go to pages this site does not have: left as they are, not checked here.
    page = (REPO_ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    (docs / "index.md").write_text(page, encoding="utf-8")
    for stylesheet in config["extra_css"]:
        (docs / stylesheet).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / "docs" / stylesheet, docs / stylesheet)
    site_config = {
        "site_name": config["site_name"],
        "theme": config["theme"],
        "extra_css": config["extra_css"],
        "markdown_extensions": [
            extension
            for extension in config["markdown_extensions"]
            if not (isinstance(extension, dict) and "pymdownx.snippets" in extension)
        ],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(site_config), encoding="utf-8")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--quiet", "--site-dir", "site"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    built = tmp_path / "site" / "index.html"
    built.write_text(built.read_text(encoding="utf-8").replace("</body>", LAYOUT_SCRIPT + "</body>"))

    dump = subprocess.run(
        [browser, *CHROMIUM_FLAGS, "--virtual-time-budget=5000", "--dump-dom", built.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    found = re.search(r'data-layout="([^"]*)"', dump)
    assert found is not None, dump[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert layout["code_blocks"] >= 4 and layout["names"] >= 4, layout  # the install lines, the extras
    assert layout["cut_off"] == [], "lines cut off at the edge of a code block"
    assert layout["broken"] == [], "a name in a table's first column breaks across lines"
