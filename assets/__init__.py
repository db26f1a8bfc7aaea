"""The asset graph: one subpackage per artifact family, thin Dagster assets over plain functions.

Dagster marks four APIs the graph relies on as beta (an output's data version, observable source
assets, per-partition data versions, single-run backfill policies) and prints a notice at every use,
in every run. The notices say nothing a user can act on, so they are silenced here by their exact
text, and nothing else is.
"""

import re
import warnings

for _beta_api in (
    "Parameter `data_version` of initializer `Output.__init__`",
    "Function `observable_source_asset`",
    "Class `DataVersionsByPartition`",
    "Parameter `backfill_policy` of function `asset`",
    "Parameter `backfill_policy` of function `multi_asset`",
):
    warnings.filterwarnings("ignore", message=re.escape(_beta_api) + " is currently in beta")
