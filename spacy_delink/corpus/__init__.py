"""Reading documents: the id and text rules (``rules``), rows of JSONL and tables (``rows``), folders and DocBins (``folders``), and ``InputSource`` over them all (``source``)."""
