"""Text analysis: normalisation and hashing, tokenizers (English, Sudachi), entity and phrase extraction."""
