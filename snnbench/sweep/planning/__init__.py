"""What a sweep or ``verify`` will run, decided before any process starts or any run folder
is opened: the ``--adapters`` grammar (:mod:`.selection`), cases × adapters and the library
environments they need (:mod:`.tasks`), jobs and the rows decided without a process
(:mod:`.jobs`), and the lines its caller is told (:mod:`.messages`).

:mod:`snnbench.sweep` runs what is planned here; ``verify`` checks it against the reference.
"""
