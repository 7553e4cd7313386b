"""Run history: every run in one SQLite database, compared and exported to CSV. Never imports Qt.

- ``store``: HistoryStore (the database: schema, writes, reads, interrupted-run recovery)
- ``records``: RunRecord, a run as the history gives it back, read tolerantly from a row
- ``recorder``: RunRecorder, which writes a run's engine events as they come
- ``export``: runs CSV and long step-metrics CSV, written atomically
- ``metrics``: the summary figures and how they read, shared by the CLI and the GUI
"""
