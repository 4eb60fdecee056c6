"""The exceptions of the invoicing package; all derive from InvoicingError."""


class InvoicingError(Exception):
    """Base class of every error the invoicing package raises on purpose."""


class UnknownRegionError(InvoicingError):
    """A customer's region has no tax rate."""


class CreditError(InvoicingError):
    """A customer may not be invoiced: over their credit limit, or on hold."""


class StorageError(InvoicingError):
    """An invoice file cannot be read: not JSON, or a schema version this code does not support."""
