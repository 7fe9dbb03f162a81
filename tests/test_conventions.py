"""A language is its catalogs plus one strings file (tools/conventions.py): a fake third
language, added that way only, gets its notebooks and its site."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tools import conventions
from tools.authoring import i18n
from tools.lessons import TOC, lesson_notebooks
from tools.publishing import build_site

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of the translations, with ``xx``: the Chinese catalogs and words under a
    new code and name (what a translator starting a language would copy)."""
    strings = tmp_path / "strings"
    shutil.copytree(conventions.STRINGS_DIR, strings)
    words = conventions.strings("zh")
    words["language_name"], words["lesson"]["html_lang"] = "Fakish", "x-fake"
    (strings / "xx.json").write_text(json.dumps(words, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(conventions, "STRINGS_DIR", strings)
    translations = tmp_path / "translations"
    shutil.copytree(ROOT / "translations" / "zh", translations / "zh")
    shutil.copytree(ROOT / "translations" / "zh", translations / "xx")
    for catalog in (translations / "xx").glob("*.json"):
        data = json.loads(catalog.read_text(encoding="utf-8"))
        data["language"] = "xx"
        catalog.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return translations


def test_a_third_language_is_a_catalog_and_a_strings_file(
    fake_language: Path, tmp_path: Path
) -> None:
    # Rule: no tool names the languages; they come from the strings files.
    assert conventions.codes() == ["en", "xx", "zh"]
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in lesson_notebooks():
        shutil.copy(path, notebooks / path.name)
    shutil.copy(ROOT / TOC, tmp_path / TOC)
    args = ["--notebooks", str(notebooks), "--translations", str(fake_language), "--lang", "xx"]
    assert i18n.main([*args, "build"]) == 0
    assert sorted(p.name for p in (notebooks / "xx").glob("*.ipynb")) == sorted(
        p.name for p in notebooks.glob("*.ipynb")
    )

    site = tmp_path / "site"
    build_site.build_site(notebooks, site, log=lambda _: None, translations=fake_language)
    page = (site / "xx" / "01_tensors.html").read_text(encoding="utf-8")
    assert 'lang="x-fake"' in page
    assert "Fakish" in (site / "index.html").read_text(encoding="utf-8")  # the switcher
    assert (site / "zh" / "01_tensors.html").is_file()  # the others are still built
