"""A sweep in small steps, one job per module: ``plan = prepare(config, run_id, entries)``,
then ``execute(plan, folder, executor)``; a resumed run rebuilds its plan from the manifest.
The selection, tasks, jobs and messages it plans with are :mod:`snnbench.sweep.planning`.

* :mod:`.threads`: each case's CPU threads;
* :mod:`.plan`: the plan, new or rebuilt from a manifest;
* :mod:`.execute`: the loop that runs what a run folder lacks;
* :mod:`.checks`: the check of this machine before and after the cases;
* :mod:`.run`: a run's life, new or resumed, and its manifest.
"""
