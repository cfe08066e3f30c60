"""spacy-llm tasks of spacy-delink."""
