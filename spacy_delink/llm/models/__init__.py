"""spacy-llm models of spacy-delink: an OpenAI-compatible client, a GGUF model in process (llama.cpp) and the offline mask."""
