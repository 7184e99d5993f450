"""Everything that runs a model: where weights come from (`models`, `tiny`), head sets (`heads`), and the
transformers decoder-only backend with q/k capture (`hf`)."""
