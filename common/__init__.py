"""Neutral leaf modules every layer speaks: stream vocabulary, config knobs, languages, audio files and data sets.
Nothing here imports agents, policies or backends (tests/test_import_direction.py)."""
