"""Command-line interface: ``ledgerly <group> <command> [options]``.

Every command opens the database named by ``--db`` or ``LEDGERLY_DB``, migrating it first.
Exit status: 0 on success, 1 when the operation was refused, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from decimal import Decimal
from typing import Callable, Sequence

from ledgerly import __version__
from ledgerly.app import App
from ledgerly.config import ConfigError, load_settings
from ledgerly.db import DatabaseError, table_counts
from ledgerly.money import MoneyError, format_money
from ledgerly.reporting import aging, export, queries
from ledgerly.repository import Conflict, NotFound
from ledgerly.services.discounts import DiscountError
from ledgerly.services.invoicing import InvoiceError, LineInput
from ledgerly.services.payments import PaymentError
from ledgerly.utils.dates import local_date, parse_date, utcnow
from ledgerly.utils.pagination import PaginationError
from ledgerly.utils.text import render_table, truncate

REFUSALS = (NotFound, Conflict, InvoiceError, PaymentError, DiscountError, MoneyError, PaginationError, ValueError)


def _open(args: argparse.Namespace) -> App:
    return App.open(args.db)


def _print(args: argparse.Namespace, data: object, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


# ---------------------------------------------------------------- general


def cmd_init(args: argparse.Namespace) -> int:
    app = _open(args)
    print(f"database ready at {args.db or app.settings.db_path}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    app = _open(args)
    counts = table_counts(app.conn)
    _print(args, counts, "\n".join(f"{name:<16} {count:>8}" for name, count in counts.items()))
    return 0


# ---------------------------------------------------------------- customers


def cmd_customers_add(args: argparse.Namespace) -> int:
    app = _open(args)
    customer = app.customers.add(args.name, args.email, args.country)
    _print(args, customer.to_dict(), f"customer {customer.id} created: {customer.name} <{customer.email}>")
    return 0


def cmd_customers_list(args: argparse.Namespace) -> int:
    app = _open(args)
    page = app.customers.list(page=args.page, per_page=args.per_page or app.settings.page_size)
    rows = [[str(c.id), truncate(c.name, 32), c.email, c.country] for c in page.items]
    footer = f"\npage {page.page} of {page.pages} ({page.total} customers)"
    _print(args, page.to_dict(lambda c: c.to_dict()), render_table(["id", "name", "email", "country"], rows) + footer)
    return 0


def cmd_customers_search(args: argparse.Namespace) -> int:
    app = _open(args)
    found = app.customers.search(args.term)
    rows = [[str(c.id), c.name, c.email] for c in found]
    _print(args, [c.to_dict() for c in found], render_table(["id", "name", "email"], rows))
    return 0


def cmd_customers_delete(args: argparse.Namespace) -> int:
    app = _open(args)
    app.customers.soft_delete(args.id)
    print(f"customer {args.id} deleted (its invoices are kept)")
    return 0


# ---------------------------------------------------------------- invoices


def _parse_line(text: str) -> LineInput:
    """``"description;quantity;unit price[;tax rate]"``."""
    parts = [part.strip() for part in text.split(";")]
    if len(parts) not in (3, 4):
        raise ValueError(f"a line is 'description;quantity;unit price[;tax rate]', got {text!r}")
    return LineInput(parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else None)


def cmd_invoices_create(args: argparse.Namespace) -> int:
    app = _open(args)
    invoice = app.invoicing.create_draft(
        args.customer, [_parse_line(line) for line in args.line], args.currency, args.notes or ""
    )
    _print(args, app.invoicing.summary(invoice.id), f"draft invoice {invoice.id} created")
    return 0


def cmd_invoices_add_line(args: argparse.Namespace) -> int:
    app = _open(args)
    invoice = app.invoicing.add_line(args.id, _parse_line(args.line))
    print(f"invoice {invoice.id} now has {len(invoice.lines)} lines")
    return 0


def cmd_invoices_show(args: argparse.Namespace) -> int:
    app = _open(args)
    summary = app.invoicing.summary(args.id)
    currency = summary["currency"]
    lines = [
        f"Invoice {summary['number'] or '(draft)'}  status: {summary['status']}",
        f"customer {summary['customer_id']}  issued {summary['issued_on'] or '-'}  due {summary['due_on'] or '-'}",
        "",
    ]
    rows = [
        [str(line["position"]), truncate(line["description"], 40), line["quantity"],
         format_money(Decimal(line["unit_price"]), currency), line["tax_rate"]]
        for line in summary["lines"]
    ]
    lines.append(render_table(["#", "description", "qty", "unit price", "tax"], rows))
    totals = summary["totals"]
    lines.append("")
    for key in ("subtotal", "discount", "tax", "total"):
        lines.append(f"{key:>10}: {format_money(Decimal(totals[key]), currency)}")
    lines.append(f"{'paid':>10}: {format_money(Decimal(summary['paid']), currency)}")
    lines.append(f"{'balance':>10}: {format_money(Decimal(summary['balance_due']), currency)}")
    _print(args, summary, "\n".join(lines))
    return 0


def cmd_invoices_list(args: argparse.Namespace) -> int:
    from ledgerly.models import InvoiceStatus

    app = _open(args)
    status = InvoiceStatus(args.status) if args.status else None
    page = app.invoices.list(page=args.page, per_page=args.per_page or app.settings.page_size, status=status)
    rows = [
        [str(i.id), i.number or "-", str(i.customer_id), i.status.value, i.due_on.isoformat() if i.due_on else "-"]
        for i in page.items
    ]
    footer = f"\npage {page.page} of {page.pages} ({page.total} invoices)"
    _print(args, page.to_dict(lambda i: i.to_dict()),
           render_table(["id", "number", "customer", "status", "due"], rows) + footer)
    return 0


def cmd_invoices_issue(args: argparse.Namespace) -> int:
    app = _open(args)
    day = parse_date(args.date) if args.date else None
    invoice = app.invoicing.issue(args.id, issued_on=day)
    print(f"invoice {invoice.id} issued as {invoice.number}, due {invoice.due_on}")
    return 0


def cmd_invoices_void(args: argparse.Namespace) -> int:
    app = _open(args)
    app.invoicing.void(args.id, args.reason or "")
    print(f"invoice {args.id} voided")
    return 0


def cmd_invoices_discount(args: argparse.Namespace) -> int:
    app = _open(args)
    invoice = app.invoicing.apply_discount(args.id, None if args.remove else args.code)
    print(f"invoice {invoice.id} discount: {invoice.discount_code or 'none'}")
    return 0


# ---------------------------------------------------------------- payments


def cmd_pay(args: argparse.Namespace) -> int:
    app = _open(args)
    payment = app.payment_service.record(args.invoice, args.amount, args.method, args.reference or "")
    invoice = app.invoices.get(args.invoice)
    _print(args, payment.to_dict(), f"payment {payment.id} recorded; invoice {invoice.id} is {invoice.status.value}")
    return 0


def cmd_refund(args: argparse.Namespace) -> int:
    app = _open(args)
    app.payment_service.refund(args.payment)
    print(f"payment {args.payment} refunded")
    return 0


# ---------------------------------------------------------------- reports


def cmd_report_revenue(args: argparse.Namespace) -> int:
    app = _open(args)
    data = queries.revenue_by_customer(app.conn, args.year)
    rows = [[str(d["customer_id"]), d["name"], str(d["invoices"]),
             format_money(Decimal(d["paid_cents"]) / 100, app.settings.currency)] for d in data]
    _print(args, data, render_table(["id", "customer", "invoices", "paid"], rows))
    return 0


def cmd_report_monthly(args: argparse.Namespace) -> int:
    app = _open(args)
    data = queries.monthly_revenue(app.conn, args.year)
    rows = [[d["month"], str(d["payments"]), format_money(Decimal(d["paid_cents"]) / 100, app.settings.currency)]
            for d in data]
    _print(args, data, render_table(["month", "payments", "paid"], rows))
    return 0


def cmd_report_aging(args: argparse.Namespace) -> int:
    app = _open(args)
    as_of = parse_date(args.as_of) if args.as_of else local_date(utcnow(), app.settings.timezone)
    report = aging.aging_report(app.invoicing, as_of)
    _print(args, report, aging.render_aging(report, app.settings.currency))
    return 0


def cmd_report_top(args: argparse.Namespace) -> int:
    app = _open(args)
    data = queries.top_customers(app.conn, args.limit)
    rows = [[str(d["customer_id"]), d["name"], format_money(Decimal(d["paid_cents"]) / 100)] for d in data]
    _print(args, data, render_table(["id", "customer", "paid"], rows))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    app = _open(args)
    if args.output == "-":
        count = export.write_csv(app.invoicing, sys.stdout, args.drafts)
    else:
        with open(args.output, "w", encoding="utf-8", newline="") as handle:
            count = export.write_csv(app.invoicing, handle, args.drafts)
        print(f"{count} invoices written to {args.output}", file=sys.stderr)
    return 0


def cmd_remind(args: argparse.Namespace) -> int:
    app = _open(args)
    reminders = app.reminders.due_reminders(utcnow())
    for reminder in reminders:
        print(f"--- to {reminder.customer_email} ({reminder.level}, {reminder.days_overdue} days)")
        print(reminder.text)
    if not reminders:
        print("no reminders due today")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from ledgerly.http.server import serve

    app = _open(args)
    serve(app, args.host or app.settings.host, args.port or app.settings.port)
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ledgerly", description="Invoices, payments and reports.")
    parser.add_argument("--version", action="version", version=f"ledgerly {__version__}")
    parser.add_argument("--db", help="database file (default: $LEDGERLY_DB or ledgerly.sqlite3)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(subparsers, name: str, func: Callable[[argparse.Namespace], int], help_text: str, json_flag: bool = False):
        command = subparsers.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(func=func)
        if json_flag:
            command.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return command

    add(sub, "init", cmd_init, "create or migrate the database")
    add(sub, "status", cmd_status, "row counts per table", json_flag=True)

    customers = sub.add_parser("customers", help="manage customers").add_subparsers(dest="action", required=True)
    c = add(customers, "add", cmd_customers_add, "add a customer", json_flag=True)
    c.add_argument("name")
    c.add_argument("email")
    c.add_argument("--country", default="US", help="two-letter country code")
    c = add(customers, "list", cmd_customers_list, "list customers", json_flag=True)
    c.add_argument("--page", type=int, default=1)
    c.add_argument("--per-page", type=int)
    c = add(customers, "search", cmd_customers_search, "find customers by name or e-mail", json_flag=True)
    c.add_argument("term")
    c = add(customers, "delete", cmd_customers_delete, "hide a customer (invoices are kept)")
    c.add_argument("id", type=int)

    invoices = sub.add_parser("invoices", help="manage invoices").add_subparsers(dest="action", required=True)
    c = add(invoices, "create", cmd_invoices_create, "create a draft invoice", json_flag=True)
    c.add_argument("customer", type=int)
    c.add_argument("--line", action="append", required=True, help="'description;quantity;unit price[;tax rate]'")
    c.add_argument("--currency")
    c.add_argument("--notes")
    c = add(invoices, "add-line", cmd_invoices_add_line, "add a line to a draft")
    c.add_argument("id", type=int)
    c.add_argument("line")
    c = add(invoices, "show", cmd_invoices_show, "show an invoice with totals", json_flag=True)
    c.add_argument("id", type=int)
    c = add(invoices, "list", cmd_invoices_list, "list invoices", json_flag=True)
    c.add_argument("--status", choices=["draft", "issued", "paid", "void"])
    c.add_argument("--page", type=int, default=1)
    c.add_argument("--per-page", type=int)
    c = add(invoices, "issue", cmd_invoices_issue, "number and issue a draft")
    c.add_argument("id", type=int)
    c.add_argument("--date", help="issue date YYYY-MM-DD (default: today)")
    c = add(invoices, "void", cmd_invoices_void, "void an invoice without payments")
    c.add_argument("id", type=int)
    c.add_argument("--reason")
    c = add(invoices, "discount", cmd_invoices_discount, "set or remove a draft's discount code")
    c.add_argument("id", type=int)
    c.add_argument("code", nargs="?")
    c.add_argument("--remove", action="store_true")

    c = add(sub, "pay", cmd_pay, "record a payment against an issued invoice", json_flag=True)
    c.add_argument("invoice", type=int)
    c.add_argument("amount")
    c.add_argument("--method", default="transfer", choices=["transfer", "card", "cash", "cheque"])
    c.add_argument("--reference")
    c = add(sub, "refund", cmd_refund, "remove a payment recorded by mistake")
    c.add_argument("payment", type=int)

    report = sub.add_parser("report", help="reports").add_subparsers(dest="action", required=True)
    c = add(report, "revenue", cmd_report_revenue, "payments per customer for a year", json_flag=True)
    c.add_argument("--year", type=int, default=date.today().year)
    c = add(report, "monthly", cmd_report_monthly, "payments per month for a year", json_flag=True)
    c.add_argument("--year", type=int, default=date.today().year)
    c = add(report, "aging", cmd_report_aging, "open balances by days overdue", json_flag=True)
    c.add_argument("--as-of", help="date YYYY-MM-DD (default: today)")
    c = add(report, "top", cmd_report_top, "best customers by payments", json_flag=True)
    c.add_argument("--limit", type=int, default=10)

    c = add(sub, "export", cmd_export, "export invoices as CSV")
    c.add_argument("--output", "-o", default="-", help="file name, or - for standard output")
    c.add_argument("--drafts", action="store_true", help="include draft invoices")
    add(sub, "remind", cmd_remind, "print the payment reminders due today")
    c = add(sub, "serve", cmd_serve, "run the JSON HTTP API")
    c.add_argument("--host")
    c.add_argument("--port", type=int)
    return parser


def command_paths(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """Every command as typed after ``ledgerly``: ``["init", "customers add", ...]``."""
    parser = parser or build_parser()
    paths: list[str] = []

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    path = f"{prefix} {name}".strip()
                    if any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                        walk(child, path)
                    else:
                        paths.append(path)

    walk(parser, "")
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        load_settings()
        return args.func(args)
    except (ConfigError, DatabaseError) as exc:
        print(f"ledgerly: {exc}", file=sys.stderr)
        return 2
    except REFUSALS as exc:
        print(f"ledgerly: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
