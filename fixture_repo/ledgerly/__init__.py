"""ledgerly: invoices, payments and reports for small businesses, on SQLite."""

__version__ = "0.7.2"
