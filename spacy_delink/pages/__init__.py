"""HTML pages: the markup, templates and assets the reports and ``delink serve``'s page share."""
