"""Inside one worker process: build the adapter's model, check it against the reference
(:mod:`.verify`), time it (:mod:`.timing`, :mod:`.measurement`), measure memory and energy
(:mod:`.memory`, :mod:`.energy`), count instructions (:mod:`.callgrind`); :mod:`.worker` is the
process's entry point."""
