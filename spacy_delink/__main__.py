"""`python -m spacy_delink ...` runs the same command line as `delink ...`."""
from .cli import main

if __name__ == "__main__":
    main()
