"""spacy-llm models of spacy-delink: an OpenAI-compatible client and the offline mask."""
