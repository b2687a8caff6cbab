"""Two runs or two environments in, a verdict out: the paired intervals (:mod:`.interval`),
the comparison (:mod:`.compare`), its verdict as data (:mod:`.verdict`), its warnings and its
output (:mod:`.compare_warnings`, :mod:`.compare_output`)."""
