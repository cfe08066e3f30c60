"""The spaCy components ``delink_risk``, ``delink_combinations``, ``delink_rewriter``, ``delink_semantic_risk``.

Their factories are registered in ``spacy_delink.plugin``, which spaCy imports for every
pipeline; it imports these modules only when a component is built. ``settings`` holds the
components' settings (light: the plugin imports it), ``base`` what the index-backed
components share (lazy index, serialization) and ``extensions`` the ``._.delink_*``
attributes they write.
"""
