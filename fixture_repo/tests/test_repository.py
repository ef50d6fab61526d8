import pytest

from ledgerly.repository import Conflict, NotFound
from ledgerly.testing import demo_app, empty_app


def test_add_and_get_customer():
    app = empty_app()
    customer = app.customers.add("Ann Lee", "ann@Example.com", "gb")
    assert app.customers.get(customer.id).email == "ann@example.com"
    assert app.customers.get(customer.id).country == "GB"


def test_duplicate_email_is_a_conflict():
    app = empty_app()
    app.customers.add("Ann Lee", "ann@example.com")
    with pytest.raises(Conflict):
        app.customers.add("Ann Again", "ann@example.com")


def test_soft_deleted_customer_is_hidden():
    app = demo_app()
    with pytest.raises(NotFound):
        app.customers.get(5)
    assert app.customers.get(5, include_deleted=True).name == "Stark Supplies"


def test_search_by_name():
    app = demo_app()
    assert [c.name for c in app.customers.search("glob")] == ["Globex Ltd"]


def test_last_sequence_per_year():
    app = demo_app()
    assert app.invoices.last_sequence("INV", 2024) == 7
    assert app.invoices.last_sequence("INV", 2023) == 1
