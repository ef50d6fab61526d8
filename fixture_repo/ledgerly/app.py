"""Wiring: one :class:`App` holds the connection, the repositories and the services.

The CLI builds one per command, the HTTP server one per process (sharing the connection
between request threads is fine with ``check_same_thread=False`` and SQLite's own locking).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ledgerly.config import Settings, load_settings
from ledgerly.db import connect, init_db
from ledgerly.repository import CustomerRepository, DiscountRepository, InvoiceRepository, PaymentRepository
from ledgerly.services.invoicing import InvoiceService
from ledgerly.services.payments import PaymentService
from ledgerly.services.reminders import ReminderService


@dataclass
class App:
    settings: Settings
    conn: sqlite3.Connection
    customers: CustomerRepository
    invoices: InvoiceRepository
    payments: PaymentRepository
    discounts: DiscountRepository
    invoicing: InvoiceService
    payment_service: PaymentService
    reminders: ReminderService

    @classmethod
    def open(cls, db_path: str | None = None, settings: Settings | None = None) -> "App":
        """Open (and migrate) the database and wire everything to it."""
        settings = settings or load_settings()
        conn = connect(db_path or settings.db_path)
        init_db(conn)
        customers = CustomerRepository(conn)
        invoices = InvoiceRepository(conn)
        payments = PaymentRepository(conn)
        discounts = DiscountRepository(conn)
        invoicing = InvoiceService(settings, customers, invoices, payments, discounts)
        return cls(
            settings=settings,
            conn=conn,
            customers=customers,
            invoices=invoices,
            payments=payments,
            discounts=discounts,
            invoicing=invoicing,
            payment_service=PaymentService(invoices, payments, invoicing),
            reminders=ReminderService(customers, invoices, invoicing, settings.timezone),
        )

    def close(self) -> None:
        self.conn.close()
