"""A tiny project and golden task for the sim tests (independent of fixture_repo/)."""

from __future__ import annotations

from pathlib import Path

from warden.bench.tasks import GoldenTask, SimEdit, SimPlan
from warden.select.memory import MemoryRule, render_memory

MODULES = ("orders", "customers", "inventory", "reports", "shipping", "util")
_FILLER = "\n".join(f"# note {i}: this module keeps its helpers small and documented." for i in range(120))

MONEY = f'''"""Money helpers."""
{_FILLER}


def to_cents(amount):
    return int(amount * 100)


def from_cents(cents):
    return cents / 100


def add_tax(cents, rate):
    return cents + int(cents * rate)
{_FILLER}
'''


def make_project(root: Path) -> Path:
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "money.py").write_text(MONEY)
    for name in MODULES:
        (root / "shop" / f"{name}.py").write_text(f'"""The {name} module."""\n{_FILLER}\n\n'
                                                  f"def {name}_count(items):\n    return len(items)\n")
    (root / "tests" / "test_money.py").write_text(
        "from shop.money import add_tax, to_cents\n\n\n"
        "def test_rounding():\n    assert to_cents(0.29) == 29\n\n\n"
        "def test_tax_rounds_half_up():\n    assert add_tax(105, 0.1) == 116\n")
    # The task's check is a plain script (fast: no pytest start-up); the agent's tests are pytest.
    (root / "check_money.py").write_text(
        "import sys\nfrom shop.money import add_tax, to_cents\n"
        "ok = to_cents(0.29) == 29 and add_tax(105, 0.1) == 116\n"
        "print('ok' if ok else 'FAILED: money rounding')\nsys.exit(0 if ok else 1)\n")
    (root / "tests" / "test_orders.py").write_text(
        "from shop.orders import orders_count\n\n\ndef test_count():\n    assert orders_count([1, 2]) == 2\n")
    return root


TWO_EDIT_TASK = GoldenTask(
    id="money-01", agent="backend",
    prompt="to_cents(0.29) returns 28 and add_tax truncates; make money rounding exact.",
    success_check="python check_money.py",
    timeout_s=60,
    sim=SimPlan(
        locate="def to_cents", target="shop/money.py", related=("shop/orders.py", "shop/util.py"),
        edits=(SimEdit("shop/money.py", "return int(amount * 100)", "return int(round(amount * 100))"),
               SimEdit("shop/money.py", "return cents + int(cents * rate)",
                       "return cents + int(cents * rate + 0.5)")),
        test_command="python -m pytest -q tests/test_money.py"))

AGENT_MD = "You are a backend engineer. Fix what the user asks in this project."


def system_prompt(*rules: str) -> str:
    memory = render_memory("backend", [MemoryRule(i + 1, body) for i, body in enumerate(rules)], 1)
    return AGENT_MD + "\n\n" + memory
