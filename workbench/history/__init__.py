"""Run history: every run in one SQLite database, compared and exported to CSV. Never imports Qt.

- ``store``: HistoryStore, the history as the workbench uses it: opened for writing or for reading only, the runs
  and sequences it starts and edits, interrupted-run recovery
- ``database``: the SQLite file: opening it, checking it is a usable history, migrations, transactions;
  ``upgraded_copies``: an older file opened for reading, read from one copy upgraded in memory
- ``errors``: what can go wrong, told apart (damaged, newer, cannot be written here) with the advice for each
- ``reads``: every read (runs as RunRecords, their metrics); ``run_writes``: one run's writes for its recorder
- ``records``: RunRecord, a run as the history gives it back, read tolerantly from a row
- ``recorder``: RunRecorder, which writes a run's engine events as they come
- ``traces``: a deleted run's profiler traces go with it
- ``export``: runs CSV and long step-metrics CSV, written atomically
- ``metrics``: the summary figures and how they read, shared by the CLI and the GUI
"""
