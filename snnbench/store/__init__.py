"""The run folder: its records and tables (:mod:`.rundir`, :mod:`.storage`), its manifest
(:mod:`.manifest`), where a sweep's wall time went (:mod:`.overhead`) and the statistics its
summary rows carry (:mod:`.stats`). One reader for every command."""
