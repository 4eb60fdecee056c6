"""A household ledger: entries, a statement, and a CSV export."""
