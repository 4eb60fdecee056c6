"""A small shop: carts and receipts."""
