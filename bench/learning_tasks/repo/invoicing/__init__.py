"""Invoices for a small wholesale business: line items, discounts, tax, due dates, reports."""

__version__ = "0.3.0"
