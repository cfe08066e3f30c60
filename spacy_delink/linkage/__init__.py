"""The attack, exactly as the rules say (docs/linkage-rules.md).

text → tokens (``tokenize``: ``characters``, ``token_scan``) → keys → postings (``index``)
→ linkable n-grams (``ngrams``) and bridges (``gap``: ``bridges``, ``gap_lookup``) → linkable
combinations (``combinations``: ``candidate_matrix``, ``combination_search``) → everything
found in one text (``attack``) → its ``delink assess`` record (``records``) and what to
rewrite (``cover``).
"""
