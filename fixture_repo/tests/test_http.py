from ledgerly.http.server import dispatch
from ledgerly.testing import demo_app


def test_health():
    assert dispatch(demo_app(), "GET", "/health") == (200, {"status": "ok"})


def test_get_invoice():
    status, payload = dispatch(demo_app(), "GET", "/invoices/1")
    assert status == 200
    assert payload["number"] == "INV-2024-0001"
    assert payload["totals"]["total"] == "1685.50"


def test_unknown_route_and_method():
    app = demo_app()
    assert dispatch(app, "GET", "/nope")[0] == 404
    assert dispatch(app, "DELETE", "/invoices")[0] == 405


def test_create_customer_validates():
    app = demo_app()
    status, payload = dispatch(app, "POST", "/customers", {"name": "", "email": "x@example.com"})
    assert status == 400
    assert "name" in payload["error"]
