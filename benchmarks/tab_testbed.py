"""The TAB test bed for tests and benchmarks; the loader lives in the package (``spacy_delink.evaluate.tab``)."""
from spacy_delink.evaluate.tab import (  # noqa: F401  (re-exported for the tests and benchmarks)
    DEFAULT_MASK,
    TAB_DISTRACTORS,
    TAB_MANUAL_SUPPRESSION,
    TAB_ORIGINALS,
    TAB_PRESIDIO,
    TabBenchmark,
    load_tab,
    redact_spans,
)
