-- ledgerly schema, version 3 (see ledgerly/db.py for migrations from older versions)
-- Amounts are integer cents. Dates are ISO-8601 text (YYYY-MM-DD), timestamps are UTC ISO-8601.

CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS customers (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    email       TEXT    NOT NULL,
    country     TEXT    NOT NULL DEFAULT 'US',
    created_at  TEXT    NOT NULL,
    deleted_at  TEXT
);

CREATE UNIQUE INDEX IF NOT EXISTS idx_customers_email ON customers (email);

CREATE TABLE IF NOT EXISTS invoices (
    id           INTEGER PRIMARY KEY,
    number       TEXT    UNIQUE,
    customer_id  INTEGER NOT NULL REFERENCES customers (id),
    status       TEXT    NOT NULL DEFAULT 'draft'
                 CHECK (status IN ('draft', 'issued', 'paid', 'void')),
    currency     TEXT    NOT NULL,
    issued_on    TEXT,
    due_on       TEXT,
    discount_code TEXT,
    notes        TEXT    NOT NULL DEFAULT '',
    created_at   TEXT    NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_invoices_status ON invoices (status);

CREATE TABLE IF NOT EXISTS line_items (
    id               INTEGER PRIMARY KEY,
    invoice_id       INTEGER NOT NULL REFERENCES invoices (id) ON DELETE CASCADE,
    position         INTEGER NOT NULL,
    description      TEXT    NOT NULL,
    quantity         TEXT    NOT NULL,
    unit_price_cents INTEGER NOT NULL,
    tax_rate         TEXT    NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_line_items_invoice ON line_items (invoice_id);

CREATE TABLE IF NOT EXISTS payments (
    id            INTEGER PRIMARY KEY,
    invoice_id    INTEGER NOT NULL REFERENCES invoices (id),
    amount_cents  INTEGER NOT NULL CHECK (amount_cents > 0),
    method        TEXT    NOT NULL DEFAULT 'transfer',
    received_at   TEXT    NOT NULL,
    reference     TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE IF NOT EXISTS discount_codes (
    code         TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('percent', 'fixed')),
    value        TEXT    NOT NULL,
    active       INTEGER NOT NULL DEFAULT 1
);
