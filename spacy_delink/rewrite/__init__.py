"""Rewriting until protected: what to mask (``masking``), the loop (``loop``), the batch job (``protect``)."""
