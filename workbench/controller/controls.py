"""Which of the window's actions are open now, and in words why not (no Qt).

One function of the window's state, so the policy is read in one place and tested without a window.
A disabled action always carries its reason: the window shows it beside the control (a disabled
button may never show its tooltip) and in the tooltip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo


@dataclass(frozen=True)
class Action:
    enabled: bool
    note: str = ""  # short, shown beside the control: why it is disabled, or what it last did
    tooltip: str = ""  # the whole story


@dataclass(frozen=True)
class Controls:
    start: Action
    stop: Action
    form_editable: bool
    release: Action
    sample_now: Action
    ceiling: Action
    sweep: Action
    tune: Action
    max_batch: Action


@dataclass(frozen=True)
class WindowState:
    job: Optional[str]  # the running job's kind ("run", "sweep", …); None when idle
    stopping: bool = False
    closing: bool = False
    problems: tuple[str, ...] = ()  # what blocks the form's settings
    device: Optional[DeviceInfo] = None  # the device the probe found (None: not known yet)
    config: Optional[RunConfig] = None  # the form's settings
    releasing: bool = False
    release_outcome: str = ""  # what the last release did
    run_training: bool = False  # the job's current run has started training (RunStarted seen)
    run_world_size: int = 1
    sample_pending: bool = False


# Why the release button is disabled, in words shown beside it (short) and in its tooltip (whole).
RELEASE_CHECKING = Action(False, "Checking the device…", "Checking the device…")
RELEASE_ON_CPU = Action(False, "No CUDA cache on a CPU",
                        "CPU mode: there is no CUDA cache to release (torch's caching allocator is only used on a GPU)")
RELEASE_DURING_RUN = Action(False, "Disabled while training",
                            "Disabled while a run trains: a release synchronises the GPU and stalls that log window, "
                            "so its images/sec and data-wait figures would not mean what they say, and the running "
                            "training takes the memory straight back. Release it after the run.")
RELEASE_TOOLTIP = ("Give the blocks torch's CUDA allocator keeps cached back to the driver (torch.cuda.empty_cache). "
                   "Frees memory for other processes; a new run fills the cache again.")
# Two measurements of speed on one device time each other's work: neither would mean what it says.
SHARED_DEVICE = ("the probe and the run would share the device, and each would time the other's work: "
                 "measure it between runs")
JOB_NAMES = {"run": "a run", "sweep": "a sweep", "tune": "the search for faster settings",
             "max_batch": "the largest-batch search", "ceiling": "the ceiling probe", "verify": "a verification"}


def controls_for(state: WindowState) -> Controls:
    busy = state.job is not None
    doing = JOB_NAMES.get(state.job or "", "a job")
    problems = list(state.problems)
    blocked = ("Cannot start:\n• " + "\n• ".join(problems)) if problems else ""

    if busy:
        start = Action(False, "", f"{doing[0].upper()}{doing[1:]} is in progress")
    elif problems:
        start = Action(False, "", blocked)
    else:
        start = Action(True, "", "Train with these settings (Ctrl+Return)")
    if busy and not state.closing and not state.stopping:
        what = "run" if state.job == "run" else "whole " + doing.removeprefix("the ").removeprefix("a ")
        stop = Action(True, "", f"Stop the {what} after the current step (Ctrl+.): what ran is kept as stopped")
    else:
        stop = Action(False, "", "Stopping…" if busy else "Nothing is running")

    return Controls(
        start=start,
        stop=stop,
        form_editable=not busy,
        release=_release(state),
        sample_now=_sample_now(state),
        ceiling=_idle_action(state, blocked,
                             "Measure the compute ceiling for these settings: the model alone on batches already on "
                             "the device (no loader, no augmentation). A run's pipeline efficiency is its images/sec "
                             "÷ this ceiling.", SHARED_DEVICE),
        sweep=_idle_action(state, blocked,
                           "Run one setting over a list of values (or two, as a grid), one run per value, "
                           "and compare their speed, data wait, memory and accuracy"),
        tune=_idle_action(state, blocked,
                          "Try the settings that change speed but not what is learned, one at a time, each measured "
                          "3 times interleaved with the best so far, and keep what is faster beyond the noise"),
        max_batch=_max_batch(state, blocked),
    )


def _idle_action(state: WindowState, blocked: str, tooltip: str, busy_reason: str = "") -> Action:
    if state.job is not None:
        reason = busy_reason or f"wait for {JOB_NAMES.get(state.job, 'the job')} to end, or stop it"
        return Action(False, "Not while training", f"Refused while {JOB_NAMES.get(state.job, 'a job')} goes: {reason}")
    if blocked:
        return Action(False, "Settings have problems", blocked)
    return Action(True, "", tooltip)


def _release(state: WindowState) -> Action:
    if state.device is None:
        return RELEASE_CHECKING
    if not state.device.cuda_available:
        return RELEASE_ON_CPU
    if state.job is not None:
        return RELEASE_DURING_RUN
    if state.releasing:
        return Action(False, "Releasing…", RELEASE_TOOLTIP)
    return Action(True, state.release_outcome, RELEASE_TOOLTIP)


def _sample_now(state: WindowState) -> Action:
    tooltip = ("Take a profiler sample of the running training now (a few steps): where the GPU's time went, "
               "the top kernels and host ops")
    if state.job is None or state.job == "ceiling":
        return Action(False, "No run is training", tooltip)
    if not state.run_training:
        return Action(False, "Waiting for training to start", tooltip)
    if state.run_world_size > 1:
        return Action(False, "Not on a multi-process run",
                      "A multi-process run's ranks cannot be sampled on request: turn on “Profile GPU time” "
                      "before Start to sample them every profile_every steps")
    if state.sample_pending:
        return Action(False, "Sample asked for", "A sample was asked for: it comes within a few steps")
    return Action(True, "", tooltip)


def max_batch_refusal(config: Optional[RunConfig], device: Optional[DeviceInfo]) -> Optional[str]:
    """Why the largest-batch search cannot run with these settings here (None when it can)."""
    if device is None:
        return "checking the device…"
    if not device.cuda_available:
        why = f" ({device.cpu_fallback_reason})" if device.cpu_fallback_reason else ""
        return (f"it needs a CUDA GPU, and this machine trains on the CPU{why}: a CPU does not run out of "
                "memory at a batch size, it swaps")
    if config is not None and config.device == "cpu":
        return ("it needs a CUDA GPU, and the settings say device=cpu: a CPU does not run out of memory at a "
                "batch size, it swaps")
    return None


def _max_batch(state: WindowState, blocked: str) -> Action:
    refusal = max_batch_refusal(state.config, state.device)
    if refusal is not None:
        return Action(False, "Needs a CUDA GPU" if state.device is not None else "Checking the device…",
                      f"Largest batch: {refusal}")
    return _idle_action(state, blocked,
                        "Double the batch until CUDA runs out of memory, then binary-search the largest that fits "
                        "(a few real training steps per size)")
