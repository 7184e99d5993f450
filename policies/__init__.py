"""Pure decision logic for simultaneous translation: no model, only numpy/torch operations.

`alignatt` gates a draft by its attention, `units` defines what may be committed, `frontier` which source words are
accessible, `waitk` the fixed read/write schedule, `integrate_fire` STAR/CIF segmentation, `latency` AL/LAAL/DAL.
"""
