"""The window's logic without a window: what Start, Stop, a sweep, Apply, Measure ceiling and closing do.

Qt-free, tested against a fake view and a synchronous runner (as ndv tests its controllers): the
window (``workbench.gui``) only draws what the controller tells it and forwards what the user does.

- ``jobs``: what runs on the training thread: one recorded run, a sweep, the search for faster
  settings, the max-batch search, the ceiling probe; each ONE generator over a stop flag.
- ``driving``: iterating a job: steps batched, a crash turned into a failed run, the job closed.
- ``lifecycle``: ``RunController``, one job at a time, and everything the window says about it.
- ``controls``: which actions are open now, and why not (the release policy among them).
- ``view``: what the controller asks of a window (``WindowView``) and of a runner (``Runner``).
"""
