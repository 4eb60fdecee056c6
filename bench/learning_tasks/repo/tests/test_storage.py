import json
from pathlib import Path

import pytest
from helpers import make_invoice
from invoicing.errors import StorageError
from invoicing.storage import load_invoice, save_invoice


def test_round_trip(tmp_path: Path) -> None:
    invoice = make_invoice(quantity=4, unit_price="2.50")
    save_invoice(invoice, tmp_path / "invoice.json")
    loaded = load_invoice(tmp_path / "invoice.json")
    assert loaded == invoice
    assert loaded.total() == invoice.total()


def test_old_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "number": "INV-00001"}))
    with pytest.raises(StorageError, match="unsupported schema version"):
        load_invoice(path)


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(StorageError, match="not valid JSON"):
        load_invoice(path)
