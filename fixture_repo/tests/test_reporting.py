from ledgerly.reporting.queries import monthly_revenue, payments_between
from ledgerly.testing import demo_app


def test_monthly_revenue_lists_all_months():
    months = monthly_revenue(demo_app().conn, 2024)
    assert [m["month"] for m in months][:3] == ["2024-01", "2024-02", "2024-03"]
    assert len(months) == 12
    february = months[1]
    assert february["payments"] == 2
    assert february["paid_cents"] == 168550


def test_payments_between_is_inclusive():
    from datetime import date

    rows = payments_between(demo_app().conn, date(2024, 2, 1), date(2024, 2, 10))
    assert [r["amount_cents"] for r in rows] == [100000, 68550]
