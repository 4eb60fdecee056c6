"""A small shop: orders, receipts and a daily report."""
