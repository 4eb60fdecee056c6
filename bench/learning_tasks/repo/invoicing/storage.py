"""Saving invoices to JSON files and loading them back."""

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from invoicing.customers import Customer
from invoicing.errors import StorageError
from invoicing.invoice import Invoice
from invoicing.line_items import LineItem

#: The version of the file format that save_invoice writes and load_invoice reads.
SCHEMA_VERSION = 2


def invoice_to_dict(invoice: Invoice) -> dict[str, Any]:
    """The invoice as plain JSON data; amounts are strings so no precision is lost."""
    customer = invoice.customer
    # TODO: store the customer's currency and credit limit too
    return {
        "version": SCHEMA_VERSION,
        "number": invoice.number,
        "issued": invoice.issued.isoformat(),
        "paid": invoice.paid,
        "customer": {"name": customer.name, "email": customer.email, "region": customer.region},
        "items": [
            {"description": item.description, "quantity": item.quantity, "unit_price": str(item.unit_price)}
            for item in invoice.items
        ],
    }


def invoice_from_dict(data: dict[str, Any]) -> Invoice:
    """The invoice that invoice_to_dict turned into ``data``."""
    version = data.get("version")
    if version != SCHEMA_VERSION:
        # TODO: migrate version 1 files instead of refusing them
        raise StorageError(f"unsupported schema version: {version!r}")
    items = [LineItem(d["description"], d["quantity"], Decimal(d["unit_price"])) for d in data["items"]]
    customer = Customer(**data["customer"])
    return Invoice(data["number"], customer, date.fromisoformat(data["issued"]), items, data["paid"])


def save_invoice(invoice: Invoice, path: Path) -> None:
    """Write the invoice to ``path`` as JSON."""
    # TODO: write to a temporary file and rename it, so a crash cannot leave half a file
    path.write_text(json.dumps(invoice_to_dict(invoice), indent=2) + "\n", encoding="utf-8")


def load_invoice(path: Path) -> Invoice:
    """Read an invoice that save_invoice wrote."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise StorageError(f"{path} is not valid JSON: {error}") from None
    return invoice_from_dict(data)
