"""What a run folder shows: the terminal views (:mod:`.views`, :mod:`.tables`,
:mod:`.ranking`), the report pages and plots (:mod:`.pages`, :mod:`.plots`, :mod:`.speedups`,
:mod:`.targets`) and the history site (:mod:`.history`)."""
