from ledgerly.cli import main


def test_init_and_add_customer(tmp_path, capsys):
    db = str(tmp_path / "ledger.sqlite3")
    assert main(["--db", db, "init"]) == 0
    assert main(["--db", db, "customers", "add", "Ann Lee", "ann@example.com"]) == 0
    assert "customer 1 created" in capsys.readouterr().out


def test_refusal_exits_1(tmp_path, capsys):
    db = str(tmp_path / "ledger.sqlite3")
    assert main(["--db", db, "invoices", "show", "42"]) == 1
    assert "invoice 42 not found" in capsys.readouterr().err
