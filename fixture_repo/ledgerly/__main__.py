"""``python -m ledgerly`` runs the command-line interface."""

from ledgerly.cli import main

raise SystemExit(main())
