"""A sweep in small steps, one job per module: ``plan = prepare(config, run_id, entries)``,
then ``execute(plan, folder, executor)``; a resumed run rebuilds its plan from the manifest.

* :mod:`.selection`: the ``--adapters`` grammar;
* :mod:`.tasks`: cases × adapters, and the library environments they need;
* :mod:`.threads`: each case's CPU threads;
* :mod:`.jobs`: jobs in sweep order, and the rows decided without a process;
* :mod:`.plan`: the plan, new or rebuilt from a manifest;
* :mod:`.execute`: the loop that runs what a run folder lacks;
* :mod:`.checks`: the check of this machine before and after the cases;
* :mod:`.messages`: what the caller is told as it goes;
* :mod:`.run`: a run's life, new or resumed, and its manifest.
"""
