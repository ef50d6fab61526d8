"""Read-only reports over the ledger. Nothing here writes to the database."""
