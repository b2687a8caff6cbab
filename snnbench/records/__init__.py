"""What crosses a process or a file: a case's job and record (:mod:`.contract`), the run
folder's columns (:mod:`.schema`), the metric registry (:mod:`.metrics`), the sampling settings
(:mod:`.sampling`), checked values (:mod:`.validation`), atomic writes (:mod:`.fileio`) and the
roofline's operation counts and peaks (:mod:`.roofline`). Built in one place, typed, versioned."""
