"""What a run says once, at its start, about its settings (RunStarted.notes) rather than silently ignore: the CPU
fallback, each setting that does nothing in this run, and how a run whose length is not a multiple of
accumulation_steps ends. (The data's and the pipeline's own notes are made where they are.)"""

from __future__ import annotations

from workbench.config import CUDA_GRAPH_MODES, RunConfig, inactive_settings
from workbench.device_info import DeviceInfo


def accumulation_notes(config: RunConfig, total_steps: int) -> list[str]:
    """Say how a run whose length is not a multiple of accumulation_steps ends."""
    k = config.accumulation_steps
    left = total_steps % k
    if k == 1 or left == 0:
        return []
    return [f"{total_steps:,} steps are not a multiple of accumulation_steps={k}: the last {left} "
            f"micro-batch{'es' if left > 1 else ''} make{'' if left > 1 else 's'} a smaller final optimizer "
            f"step (the mean gradient of {'those' if left > 1 else 'that one'}), so none is computed in vain"]


def inactive_setting_notes(config: RunConfig, device: DeviceInfo) -> list[str]:
    """The run's notes on its settings, said once instead of silently ignored: the CPU fallback, and each setting
    the user turned on or changed that does nothing in this run (config.inactive_settings: the form's greying-out)."""
    notes = []
    if device.type == "cpu":
        notes.append(f"CPU mode: {device.cpu_fallback_reason}")
        if config.compile in CUDA_GRAPH_MODES:
            notes.append(f"compile={config.compile} compiles, but its CUDA graphs need a CUDA GPU")
    defaults = RunConfig()
    names_by_reason: dict[str, list[str]] = {}
    for name, reason in inactive_settings(config, on_cpu=device.type != "cuda").items():
        value = getattr(config, name)
        if value is False or (not isinstance(value, bool) and value == getattr(defaults, name)):
            continue  # off, or left at its default: nothing asked for goes unheeded
        names_by_reason.setdefault(reason, []).append(name)
    for reason, names in names_by_reason.items():
        listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        notes.append(f"{listed} {'do' if len(names) > 1 else 'does'} nothing in this run: {reason}")
    return notes
