"""Settings shared by the modules of the invoicing package."""

#: Days a customer has to pay an invoice after it is issued.
PAYMENT_TERMS_DAYS = 30

#: A customer with this many overdue invoices is put on hold: no new invoices until they pay.
MAX_OVERDUE_INVOICES = 3

#: Invoice numbers look like ``INV-00042``: the prefix, a dash and the sequence number in this many digits.
INVOICE_PREFIX = "INV"
NUMBER_WIDTH = 5

#: The currency of amounts when a customer has none of their own.
DEFAULT_CURRENCY = "EUR"
