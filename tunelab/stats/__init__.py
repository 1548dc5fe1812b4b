"""Statistics for tuning studies: pure functions, tidy DataFrame in, tidy DataFrame out.

Every function takes ``data, dv, between`` (a long frame, the metric column, the knob column),
never modifies ``data``, and returns a DataFrame with the documented column names. Input problems
raise :class:`tunelab.errors.DataError`. :func:`screen` combines them into the verdict table.

Examples
--------
>>> import pandas as pd
>>> from tunelab.stats import anova_oneway, tukey_hsd
>>> df = pd.DataFrame({"k": list("aaabbbccc"), "y": [1.0, 2, 3, 2, 3, 4, 6, 7, 8]})
>>> anova_oneway(df, "y", "k").columns.tolist()
['source', 'ss', 'df', 'ms', 'F', 'p', 'eta2', 'omega2']
"""
from tunelab.stats._validate import check_input, sorted_levels
from tunelab.stats.assumptions import group_summary, homoscedasticity, normality, sd_ratio
from tunelab.stats.effects import MAX_N_BOOT, MIN_N_BOOT, check_bootstrap, cohens_d, pct_change
from tunelab.stats.equivalence import tost
from tunelab.stats.multiplicity import adjust
from tunelab.stats.omnibus import anova_factorial, anova_oneway, kruskal, lenth_effects, welch_anova
from tunelab.stats.posthoc import compact_letters, dunn, games_howell, to_matrix, tukey_hsd
from tunelab.stats.power import achieved_power, replicates_needed
from tunelab.stats.oneway import recommend
from tunelab.stats.screen_data import design_kind
from tunelab.stats.screen_design import RoundLooks, ScreenDesign
from tunelab.stats.screen_result import ScreenResult, schema
from tunelab.stats.screening import screen
from tunelab.stats.rounds import SPENDING, look_alphas, pending_levels, screen_in_rounds, spent_alpha
from tunelab.stats.workloads import share_improved, workload_improvements

__all__ = [
    "check_input", "sorted_levels", "check_bootstrap", "MIN_N_BOOT", "MAX_N_BOOT",
    "normality", "homoscedasticity", "group_summary", "sd_ratio",
    "anova_oneway", "welch_anova", "kruskal", "anova_factorial", "lenth_effects",
    "tukey_hsd", "games_howell", "dunn", "to_matrix", "compact_letters",
    "cohens_d", "pct_change",
    "adjust",
    "tost",
    "replicates_needed", "achieved_power",
    "screen", "ScreenResult", "RoundLooks", "ScreenDesign", "design_kind", "recommend", "schema",
    "screen_in_rounds", "pending_levels", "look_alphas", "spent_alpha", "SPENDING",
]
