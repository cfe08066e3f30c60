"""The attack, exactly as the rules say (docs/linkage-rules.md).

text → tokens (``tokenize``) → keys → postings (``index``) → linkable n-grams (``ngrams``)
→ linkable combinations (``combinations``) → everything found in one text (``attack``).
"""
