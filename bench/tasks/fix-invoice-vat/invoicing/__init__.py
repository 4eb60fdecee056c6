"""Invoices with VAT, in whole cents."""
