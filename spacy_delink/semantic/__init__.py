"""Semantic linkage: document embeddings of the original collection and nearest-source search."""
from .encoder import DocumentEncoder, embeddings_unavailable
from .index import EmbeddingIndex, build_embedding_index, embeddings_path

__all__ = ["DocumentEncoder", "EmbeddingIndex", "build_embedding_index", "embeddings_path", "embeddings_unavailable"]
