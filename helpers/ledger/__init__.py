"""The claims ledger: every paper number, ours beside it with a 95% interval, n and a verdict.

A *claim* is declared once, in its paper package's table (``helpers.papers.<package>.report.CLAIMS``, a dict of
:class:`Declared`), and measured by the notebook: :meth:`Declared.measured` joins the two into one row
(:class:`Claim`): which notebook measured it, which paper states it and where, the claim, the paper's value, ours, a
95% interval with the way it was obtained and n, and one verdict word, computed by :func:`verdict_of` under one
symmetric rule:

- ``reproduced``: our interval lies on the paper's side, and ``check`` names the tests that rule out our own bug;
- ``not reproduced``: our interval lies on the other side, the check is there, and (for a trained row) training was
  shown to have stopped improving (:func:`helpers.metrics.stopped_improving`, an equivalence test);
- ``inconclusive``: anything else, with its reason (:func:`reason_of`: a confound, no check, another hardware regime,
  a baseline not shown to beat what the paper says it beats, one training seed, training not shown to have stopped,
  a design that cannot detect the paper's effect, an interval that straddles).

Each notebook's summary cell calls :func:`record` (and :func:`record_table` for a result table), which writes
``runs/claims/<profile>/<notebook>.json``, sealed. ``scripts/reproduce.py`` (``make reproduce``) then calls
:func:`gather`, which merges the cpu-profile rows into the committed ledger ``claims/ledger_cpu.json`` and its result
tables into ``claims/tables_cpu.json``, and regenerates the claims table and result tables in ``docs/claims.md`` and
the headline in ``README.md`` (between their markers), so neither can disagree with the run. A seed study
(``scripts/study.py``) combines each notebook's per-seed files under a sequential plan fixed before it starts.
``python -m helpers.ledger --check`` says whether the generated blocks are the ones the committed files give;
``--render`` rewrites them from the committed files alone.

One module per concern:

- :mod:`.fields`: the fields a row and its declaration share, validated once; kinds, verdict words, small forms;
- :mod:`.design`: what the design can say, counted from the rows (docs/ledger.md's block, the headline's lines);
- :mod:`.rows`: the row, :class:`Claim`, and the verdict rule with the one reason a row is inconclusive;
- :mod:`.declared`: the declarations, :class:`Declared`, and every paper's table joined;
- :mod:`.tables`: a notebook's result table, :class:`ResultTable`;
- :mod:`.files`: where the ledger's files live, how they are read, their digests;
- :mod:`.provenance`: where claims come from, and the checks that keep them out of a ledger they do not belong in;
- :mod:`.notebook`: what a notebook calls: :func:`parameters`, :func:`record`, :func:`record_table`, :func:`table`;
- :mod:`.sequential` and :mod:`.study`: the sequential plan, and a seed study's rows combined under it;
- :mod:`.gathering`: the notebooks' files merged into the committed ledger;
- :mod:`.render`: the docs' generated blocks; :mod:`.audit`: the ``--check`` audits; :mod:`.cli`: the command.
"""
from __future__ import annotations

from .audit import carried_notebooks, provenance_problems, stale_notebooks, undeclared_rows
from .cli import main
from .declared import Declared, declare, declared_claims, missing_checks
from .fields import (DECIDED, DEFINITION, DEFINITION_VERDICTS, EXACT, FINDING, KINDS, MEASUREMENT, PAPERS, REFERENCE,
                     SEED_PAPERS, SHARED_FIELDS, STRAW_BASELINES, STUDY_MIN_SEEDS, VERDICTS, check_ids, curve,
                     figure_path)
from .files import (CLAIMS_DOC, LEDGER_PROFILE, LEDGER_PROFILES, README, ProvenanceError, check_digest, claims_dir,
                    content_digest, ledger_code, ledger_path, read_changes, read_provenance, read_rows, read_table,
                    read_tables, study_dir, tables_path)
from .gathering import compare_with_ledger, finish_interrupted_gather, gather, verdict_changes
from .notebook import (Parameters, StaleResultsError, check_shown, current_parameters, parameters, record,
                       record_table, table)
from .provenance import check_provenance, expected_parameters, notebook_settings, seed_fingerprint
from .render import (CLAIMS_BEGIN, CLAIMS_END, DESIGN_BEGIN, DESIGN_END, design_block, GPU_BEGIN, GPU_END, HEADLINE_BEGIN, HEADLINE_END, TABLE_BEGIN,
                     TABLE_END, TABLE_PLACEHOLDER, counts, docs_are_current, headline, render_committed,
                     render_docs, render_headline, render_markdown, render_table, stale_docs, tally,
                     what_the_design_can_say)
from .rows import Claim, Reason, interval_decides, reason_of, verdict_of, what_blocks_no
from .sequential import SequentialPlan
from .study import (combine_seeds, combine_study, examples_grow_by_row, record_study, seed_prediction_interval, seed_range_report,
                    study_seed_is_done)
from .tables import ResultTable
