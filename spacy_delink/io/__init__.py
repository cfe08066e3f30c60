"""Loss-free I/O shared by every command: writing files (``files``), opening inputs (``streams``) and JSONL (``jsonl``)."""
