"""spaCy factories only: ``delink_risk``, ``delink_combinations``, ``delink_rewriter``.

``base`` holds what the index-backed components share (lazy index, serialization) and
``extensions`` the ``._.delink_*`` attributes they write.
"""
