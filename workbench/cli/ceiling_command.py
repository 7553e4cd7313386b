"""`workbench ceiling`: the compute ceiling for a run's settings (the model alone, on on-device batches).

Takes the same flags as `workbench run`. A ceiling measured before for the same device, model,
precision, batch, memory format, compile setting and torch version is read from the cache unless
--refresh; a new measurement is cached, and every later run with those settings reports its pipeline
efficiency against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from workbench.cli.bad_images import refuse_bad_images
from workbench.cli.interrupts import take_stop_signals
from workbench.cli.parsing import UsageError
from workbench.cli.progress_line import ProgressLine


def register(subparsers: Any) -> None:
    from workbench.cli.setting_flags import add_setting_flags
    from workbench.engine.ceiling_cache import STEADY_CHUNKS, STEADY_MIN_SECONDS, STEADY_TOLERANCE

    parser = subparsers.add_parser(
        "ceiling",
        help="measure the compute ceiling for run settings",
        description="Images/sec the chosen model reaches on a batch already on the device (no loader, no "
        "augmentation, no host round trip): the most any pipeline can feed it. The rate is steady when at least "
        f"{STEADY_CHUNKS} timed chunks in a row agree within {STEADY_TOLERANCE:.0%} of each other over at least "
        f"{STEADY_MIN_SECONDS:g} s; otherwise the median chunk is reported, marked not steady. Takes `workbench "
        "run`'s flags.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on the last line")
    parser.add_argument("--refresh", action="store_true", help="measure again even when a ceiling is cached")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="most seconds to spend timing before reporting an unsteady rate (default: 30)")
    add_setting_flags(parser)
    parser.set_defaults(handler=ceiling_command)


def ceiling_command(args: argparse.Namespace) -> int:
    from workbench.cli.setting_flags import config_from_args

    config = config_from_args(args, "workbench ceiling")
    from workbench.data_check import data_problems
    from workbench.engine import probe_device
    from workbench.engine.ceiling_cache import (
        CeilingNotKept,
        cache_path,
        cached_ceiling,
        num_classes_of,
        store_ceiling,
    )

    device = probe_device(config.device)
    problems = config.validate(device) or data_problems(config)
    if problems:
        raise UsageError("workbench ceiling: " + "; ".join(problems))
    refuse_bad_images(config, "workbench ceiling")
    budget = getattr(args, "budget", None)
    if budget is not None and budget <= 0:
        raise UsageError("workbench ceiling: --budget must be more than 0 seconds")
    num_classes = num_classes_of(config)
    if num_classes is None:
        from workbench.engine.data import DataError
        from workbench.engine.datasets import load_data

        try:
            num_classes = load_data(config).num_classes
        except DataError as error:
            raise UsageError(f"workbench ceiling: {error}") from None

    ceiling = None if getattr(args, "refresh", False) else cached_ceiling(config, device, num_classes)
    if ceiling is None:
        import torch

        from workbench.engine.ceiling import DEFAULT_BUDGET_SECONDS, measure_ceiling
        from workbench.engine.ceiling_cache import ProbeStopped
        from workbench.engine.failures import ModelError
        from workbench.engine.requests import StopRequest, stopped_by

        def say(message: str) -> None:
            print(f"workbench ceiling: {message}", file=sys.stderr, flush=True)

        # As for `workbench run`: Ctrl-C, SIGTERM and SIGHUP stop the probe within a poll (a second Ctrl-C aborts).
        # Left to their default, SIGTERM and SIGHUP killed the process mid-step, saying nothing.
        stop = StopRequest()
        progress = ProgressLine(sys.stderr)
        give_back_signals = take_stop_signals(stop, progress)
        try:
            ceiling = measure_ceiling(config, device, num_classes, budget_seconds=budget or DEFAULT_BUDGET_SECONDS,
                                      stop=stop, progress=say)
        except ProbeStopped as stopped:  # a stopped probe gives no figure, and the cache keeps none
            say(f"{str(stopped).replace('stopped', f'stopped by {stopped_by(stop)}', 1)}: no ceiling measured, "
                "nothing cached")
            return 1
        except ModelError as error:  # a spec that gives no model, or logits of the wrong shape: bad input
            raise UsageError(f"workbench ceiling: {error}") from None
        except torch.cuda.OutOfMemoryError:
            print(f"workbench ceiling: CUDA out of memory with {config.model} at batch_size={config.batch_size}, "
                  f"{config.precision}", file=sys.stderr)
            return 1
        finally:
            give_back_signals()
            progress.close()
        try:
            store_ceiling(ceiling)
        except CeilingNotKept as error:  # the figure stands: printed, with why later runs will not find it
            print(f"workbench ceiling: note: the ceiling was measured but {error}; runs will not show their pipeline "
                  "efficiency against it", file=sys.stderr)
    where = "cached" if ceiling.cached else "measured now"
    steady = "steady" if ceiling.steady else "not steady within the time budget (median of the timed chunks)"
    if getattr(args, "json", False):
        print(json.dumps(ceiling_json(ceiling, cache_path())))
    else:
        key = ceiling.key
        layout = ", channels_last" if key["channels_last"] else ""
        compiled = "" if key["compile"] == "off" else f", compile={key['compile']}"
        print(f"ceiling  {ceiling.images_per_sec:,.0f} images/s: {key['model']}, batch {key['batch_size']}, "
              f"{key['precision']}{layout}{compiled} on "
              f"{key['device_name']} ({steady}; {where}, {ceiling.timed_steps} steps in {ceiling.timed_seconds:.1f} s)")
    return 0


def ceiling_json(ceiling: Any, cache_file: Any) -> dict[str, Any]:
    """The --json object: the ceiling (an engine.ceiling_cache.Ceiling), how it was timed, and its cache key."""
    return {
        "ceiling_images_per_sec": ceiling.images_per_sec,
        "steady": ceiling.steady,
        "cached": ceiling.cached,
        "timed_steps": ceiling.timed_steps,
        "timed_seconds": ceiling.timed_seconds,
        "measured_at": ceiling.measured_at,
        "key": ceiling.key,
        "cache_path": str(cache_file),
    }
