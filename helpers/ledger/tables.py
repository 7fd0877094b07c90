"""A notebook's result table (:class:`ResultTable`): kept next to its claims, sealed like them
(:func:`helpers.ledger.notebook.record_table`) and shown in docs/claims.md."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .fields import check_notebook

_TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class ResultTable:
    """A notebook's result table (e.g. notebook 06's Table 3 by gold length), kept next to its claims and shown in
    ``docs/claims.md`` between ``<!-- table:<notebook>_<name>:begin ... -->`` and ``<!-- table:<notebook>_<name>:end -->``.
    Every cell is a string the notebook formatted (a value with its interval); ``note`` says what the intervals are
    and n."""

    notebook: str
    name: str
    title: str
    header: tuple
    rows: tuple
    note: str = ""

    def __post_init__(self):
        check_notebook(self.notebook)
        if not isinstance(self.name, str) or not _TABLE_NAME.fullmatch(self.name):
            raise ValueError(f"name={self.name!r} must be lower-case letters, digits and '_', starting with a letter "
                             "(it names the file runs/claims/<profile>/<notebook>_<name>.json and the docs/claims.md markers)")
        for field in ("title", "note"):
            if not isinstance(getattr(self, field), str):
                raise ValueError(f"{field}={getattr(self, field)!r} must be a string")
        if not self.title.strip():
            raise ValueError(f"title={self.title!r} must be a non-empty string")
        if isinstance(self.header, str) or not isinstance(self.header, Sequence) or not self.header:
            raise ValueError(f"header={self.header!r} must be a non-empty list of column names")
        for index, column in enumerate(self.header):
            if not isinstance(column, str) or not column.strip():
                raise ValueError(f"header[{index}]={column!r} must be a non-empty string")
        if isinstance(self.rows, str) or not isinstance(self.rows, Sequence) or not self.rows:
            raise ValueError(f"rows={self.rows!r} must be a non-empty list of rows")
        for index, row in enumerate(self.rows):
            if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != len(self.header):
                raise ValueError(f"rows[{index}]={row!r} must be a list of {len(self.header)} cells, one per header "
                                 f"column {list(self.header)}")
            for column, cell in enumerate(row):
                if not isinstance(cell, str):
                    raise ValueError(f"rows[{index}][{column}]={cell!r} must be a string (format the value and its "
                                     "interval in the notebook's helper)")
        object.__setattr__(self, "header", tuple(self.header))
        object.__setattr__(self, "rows", tuple(tuple(row) for row in self.rows))

    @property
    def key(self) -> str:
        return f"{self.notebook}_{self.name}"

    def to_json(self) -> dict:
        return {"notebook": self.notebook, "name": self.name, "title": self.title, "header": list(self.header),
                "rows": [list(row) for row in self.rows], "note": self.note}
