"""The Runs tab's write actions: Rename, Note, Tags and Delete, each written off the GUI thread (runs_writes).

A write can hang on a network home: it runs on Qt's thread pool, and the runs it writes keep their write buttons
off (and a second write of them is refused, as the Delete key reaches past a disabled button) until the table
shows it; its outcome is said then, a write that fails in red.

RunsWriteActions is a mixin of RunsView, which provides what it uses: ``store``, the rename, note, tags and delete
buttons, ``_writing`` (the ids of the runs being written), ``selected_records``, ``refresh``, ``_show_status`` and
the dialogs ``_ask_text`` and ``_confirm`` (looked up on each use: tests replace them).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from workbench.gui.background import call_in_background
from workbench.gui.runs_writes import delete_runs, rename_run, set_run_note, set_run_tags
from workbench.history.records import RunRecord, clean_tags, records_noun
from workbench.history.store import HistoryError


class RunsWriteActions:
    """Rename, Note, Tags and Delete of the selected runs, written off the GUI thread (a mixin of RunsView)."""

    _writing: set[int]  # runs being written (off the GUI thread) until the table shows it

    # -- the buttons -----------------------------------------------------------------------------
    def _update_write_buttons(self, records: Sequence[RunRecord]) -> None:
        one = len(records) == 1
        being_written = [record.label for record in records if record.id in self._writing]
        for button in (self.rename_button, self.note_button, self.tags_button):
            button.setEnabled(one and not being_written)
        running = [record.label for record in records if record.status == "running"]
        self.delete_button.setEnabled(bool(records) and not running and not being_written)
        self.delete_button.setToolTip(
            f"{running[0]} is still running" if running
            else f"{being_written[0]} is still being written" if being_written
            else "Delete the selected runs and their metrics"
        )

    # -- actions -------------------------------------------------------------------------------
    def _rename_selected(self) -> None:
        records = self.selected_records()
        if len(records) != 1 or self._refused_while_writing(records):
            return
        noun, run_id = records[0].noun, records[0].id
        name = self._ask_text(f"Rename {noun}", f"New name for {noun} #{run_id}:", records[0].name)
        if name is None or not name.strip() or name.strip() == records[0].name:
            return
        self._write([run_id], partial(rename_run, self.store.path, run_id, name),
                    partial(self._show_written, f"Renamed {noun} #{run_id}."))

    def _edit_note(self) -> None:
        records = self.selected_records()
        if len(records) != 1 or self._refused_while_writing(records):
            return
        note = self._ask_text("Note", f"Note on {records[0].label}:", records[0].note, multiline=True)
        if note is None or note == records[0].note:
            return
        run_id = records[0].id
        self._write([run_id], partial(set_run_note, self.store.path, run_id, note.strip()),
                    partial(self._show_written, f"Saved the note on {records[0].noun} #{run_id}."))

    def _edit_tags(self) -> None:
        records = self.selected_records()
        if len(records) != 1 or self._refused_while_writing(records):
            return
        text = self._ask_text("Tags", f"Tags of {records[0].label} (comma-separated):", ", ".join(records[0].tags))
        if text is None:
            return
        try:
            tags = clean_tags(text.split(","))  # refused here, before any write: it touches no file
        except ValueError as error:
            self._show_status(str(error), error=True)
            return
        run_id = records[0].id
        self._write([run_id], partial(set_run_tags, self.store.path, run_id, tags),
                    partial(self._show_written, f"Saved the tags of {records[0].noun} #{run_id}."))

    def _delete_selected(self) -> None:
        records = self.selected_records()
        if not records or self._refused_while_writing(records):  # the Delete key gets here past the disabled button
            return
        noun = records_noun(records)
        what = records[0].label if len(records) == 1 else f"these {len(records)} {noun}"
        metrics = "" if noun == "traces" else " and their step metrics"  # a trace's figures are its record
        if not self._confirm(f"Delete {what}{metrics}?\n\nThis cannot be undone."):
            return
        run_ids = [record.id for record in records]
        deleted = f"Deleted {len(records)} {noun if len(records) != 1 else records[0].noun}."
        self._write(run_ids, partial(delete_runs, self.store.path, run_ids), partial(self._show_deleted, deleted))

    def _show_written(self, done: str, _: None) -> None:
        self._show_status(done)

    def _show_deleted(self, deleted: str, refused: list[str]) -> None:
        if refused:
            self._show_status("; ".join(refused), error=True)
        else:
            self._show_status(deleted)

    # -- writes, off the GUI thread --------------------------------------------------------------
    def is_writing(self) -> bool:
        """A write is in flight, or the table does not show it yet (tests wait for this to end)."""
        return bool(self._writing)

    def _refused_while_writing(self, records: Sequence[RunRecord]) -> bool:
        """Say so and refuse when a write to one of ``records`` is still in flight (a second delete of the same
        rows, a rename of a run being deleted): its outcome would be about a run already changed."""
        busy = [record.label for record in records if record.id in self._writing]
        if busy:
            self._show_status(f"{busy[0]} is still being written: try again once the table shows it.")
        return bool(busy)

    def _write(self, run_ids: Sequence[int], write: Callable[[], Any], show: Callable[[Any], None]) -> None:
        """``write`` off the GUI thread (a hung disk froze the window), the runs' write buttons disabled until the
        table shows it; then ``show(what write returned)``. A HistoryError is said in red."""
        self._writing.update(run_ids)
        self._update_write_buttons(self.selected_records())
        call_in_background(self, write, partial(self._written, run_ids, show), partial(self._write_failed, run_ids))

    def _written(self, run_ids: Sequence[int], show: Callable[[Any], None], result: Any) -> None:
        # Said once the table shows the write: a message is about the runs selected when it is shown, and a
        # deleted row stays (its buttons off) until then.
        self.refresh(then=partial(self._write_shown, run_ids, partial(show, result)))

    def _write_shown(self, run_ids: Sequence[int], show: Callable[[], None]) -> None:
        self._writing.difference_update(run_ids)
        self._update_write_buttons(self.selected_records())
        show()

    def _write_failed(self, run_ids: Sequence[int], error: Exception) -> None:
        self._writing.difference_update(run_ids)
        self._update_write_buttons(self.selected_records())
        if not isinstance(error, HistoryError):
            raise error  # a bug, not the disk: as loud as it was on the GUI thread
        self._show_status(str(error), error=True)
