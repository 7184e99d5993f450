"""Pure decision logic for simultaneous translation: no model, only numpy.

`alignatt` gates a draft by its attention, `units` defines what may be committed, `frontier` which source words are
accessible, `waitk` the fixed read/write schedule.
"""
