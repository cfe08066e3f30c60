"""spacy-llm plug-ins of the rewriter: the ``spacy_delink.Rewrite.v1`` task and three models.

They are registered through the ``thinc_llm_tasks`` / ``thinc_llm_models`` entry points, so
a config naming them loads without importing this package by hand.
"""
