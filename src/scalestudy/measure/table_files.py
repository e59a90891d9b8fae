"""The names of a study's tables (data/STUDY/tables/) and the conventions their writers and
readers share: the analysis writes most of them, the performance model writes those beside or
about its predictions and reads the rank-share tables, and neither imports the other for a name.
"""

RUNS_FILE = "runs.csv"
SUMMARY_FILE = "summary.csv"
COLLECTIVES_FILE = "collectives.csv"
COLLECTIVES_SUMMARY_FILE = "collectives_summary.csv"
UNPLANNED_FILE = "unplanned_runs.csv"
PREDICTIONS_FILE = "predictions.csv"  # only for studies with predicted runs (scalestudy.perfmodel)
# only for studies with the model beside their measurements (`model_beside`; scalestudy.perfmodel.beside)
MODEL_BESIDE_FILE = "model_beside.csv"
# only for prediction studies: each claim with each uncertain input at its low and high value, C3's step
# term by term, and what each claim rests on with C3's search (scalestudy.perfmodel.sensitivity)
SENSITIVITY_FILE, C3_TERMS_FILE, CLAIM_BASIS_FILE = "claim_sensitivity.csv", "c3_terms.csv", "claim_basis.json"
TABLE_FILES = (RUNS_FILE, SUMMARY_FILE, COLLECTIVES_FILE, COLLECTIVES_SUMMARY_FILE, UNPLANNED_FILE)

# a kept seed made with a check weakened (runs.csv `weakened`, measure.rawlog.weakened_checks): the
# configuration's summary note starts with it; figures, claims and `scalestudy audit --strict` say so
WEAKENED_NOTE = "made with a check weakened"


def weakened_kind(text: str) -> str:
    """Which check a weakened run's sentence (or its summary note "...: seed N: sentence") names,
    without its detail: "made from a checkout with uncommitted changes", "SCALESTUDY_FOREIGN_CPU_MAX=off"."""
    return text.rsplit(": ", 1)[-1].split(" (")[0]


CAVEAT_PREFIX = "caveat: "  # a prediction's note on a measured input with a known artefact (perfmodel.rank_shares)
