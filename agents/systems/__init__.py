"""Streaming translators: a source front end, a policy and a backend assembled into one `StreamingTranslator`."""
