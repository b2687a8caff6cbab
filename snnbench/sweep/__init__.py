"""A sweep in small steps, one job per module.

* :mod:`.selection`: the ``--adapters`` grammar;
* :mod:`.tasks`: cases × adapters, and the library environments they need;
* :mod:`.threads`: each case's CPU threads;
* :mod:`.jobs`: jobs in sweep order, and the rows decided without a process;
* :mod:`.execute`: the loop that runs what a run folder lacks;
* :mod:`.messages`: what the caller is told as it goes;
* :mod:`.run`: a run's life, new or resumed, and its manifest.
"""
