"""This machine: the checks before and after a sweep (:mod:`.preflight`), what is recorded
about it (:mod:`.environment`, :mod:`.machines`, :mod:`.gpustate`, :mod:`.nvml`), library
environments (:mod:`.libenv`), child processes and their lifetime (:mod:`.processes`,
:mod:`.lifeline`), scratch folders and masked secrets (:mod:`.scratch`, :mod:`.masking`)."""
