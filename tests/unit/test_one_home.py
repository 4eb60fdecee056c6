"""One home per fact (issue 47): each fact below is written once, and every place that needs it reads it there.

The bundled models are rows of the catalogue, the fix's defaults are cortana.yml's, the folders that are not
the project are one set that every walker skips, and a refused tool call says so in a typed field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cortana.config import FixSettings
from cortana.errors import ModelNotFound
from cortana.models import catalogue, embedded
from cortana.repair.run import RepairSettings, configured_fields

ROOT = Path(__file__).resolve().parents[2]

# -- the bundled models -------------------------------------------------------------------------------------------


def test_the_bundled_models_are_the_catalogues_bundled_rows_best_first() -> None:
    bundled = [model for model in catalogue.CATALOGUE.values() if model.bundled]
    assert embedded.BUNDLED_MODELS is catalogue.BUNDLED_MODELS, "one table, not a copy"
    assert list(catalogue.BUNDLED_MODELS.values()) == sorted(bundled, key=lambda model: -model.size)
    assert list(catalogue.BUNDLED_MODELS) == ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"], "the 1.5B is the default"
    for model in bundled:
        assert model.repo is None and model.file and model.file.endswith(".gguf") and model.sha256
        assert model.extra and model.distributions and model.check_margin is not None


def test_each_bundled_rows_packages_are_what_its_extra_installs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for model in catalogue.BUNDLED_MODELS.values():
        assert model.extra is not None
        pinned = [requirement.split("==")[0] for requirement in extras[model.extra] if "==" in requirement]
        assert pinned == list(model.distributions), f"pyproject's [{model.extra}] against {model.name}'s row"


def test_one_resolver_turns_every_kind_of_name_into_a_file(tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    assert embedded.resolve_model_path(str(gguf)) == ("mine", gguf)
    with pytest.raises(ModelNotFound, match=r"not downloaded yet: run `cortana models pull qwen2\.5-coder-7b`"):
        embedded.resolve_model_path("qwen2.5-coder-7b")
    with pytest.raises(ModelNotFound, match=r"Did you mean qwen2\.5-coder-0\.5b.*the path of a \.gguf file"):
        embedded.resolve_model_path("qwen2.5-coder-0.5")
    with pytest.raises(ModelNotFound, match="is not a bundled model"):
        embedded.ensure_model_file("qwen2.5-coder-7b")


# -- the fix's settings -------------------------------------------------------------------------------------------


def test_the_fix_settings_have_one_default_each() -> None:
    assert set(configured_fields()) == {"budget_seconds", "samples", "per_location", "rewrite", "rounds", "test_timeout"}
    assert RepairSettings.from_config(FixSettings()) == RepairSettings(), "cortana.yml's defaults are the workflow's"
    changed = FixSettings(budget_seconds=60, samples=2, rewrite=False)
    chosen = RepairSettings.from_config(changed, seed=7)
    assert (chosen.budget_seconds, chosen.samples, chosen.rewrite, chosen.seed) == (60, 2, False, 7)
