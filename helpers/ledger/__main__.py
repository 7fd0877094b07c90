"""``python -m helpers.ledger``: :func:`helpers.ledger.cli.main`."""
from .cli import main

raise SystemExit(main())
