"""STAR (streaming transduction with anchor representations) and its CIF baseline: a strictly causal speech
encoder, a learned segmenter, anchors as decoder memory, training and streaming inference on CPU."""
