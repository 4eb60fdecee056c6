"""Invoices and credit notes."""
