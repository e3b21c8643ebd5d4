"""Reading documents: source files and folders, their formats (PDF, DOCX, HTML, Markdown, JSONL)."""
