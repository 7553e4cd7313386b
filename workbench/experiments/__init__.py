"""Sequences of runs: sweeps, the search for faster settings, the largest batch that fits.

Plain Python over ``engine.run``, shared by the CLI and the GUI; never Qt. Each sequence is one
generator (``run_sweep``, ``run_tune``, ``run_max_batch``) driven by one stop flag: it yields the
engine's own events for every member run plus the small frozen events of ``experiments.events``, and
records every member as an ordinary run through a recorder factory (``experiments.recording``). A GUI
can iterate one of them on its training thread exactly as it iterates ``engine.run``.
"""
