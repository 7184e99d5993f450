"""Everything that runs a model: where weights come from (`models`, `tiny`), head sets (`heads`), and the
transformers decoder-only backend with q/k capture (`hf`)."""

from backends.openmp import load_ctranslate2_first

load_ctranslate2_first()  # before torch and llama.cpp load a libgomp into the global scope (backends/openmp.py)
