"""The words both views say: names shortened so that the names of one list stay told apart."""

from __future__ import annotations

from workbench.trace_analysis.wording import counted, ranks_in_several_files, short_name, short_names


def test_a_long_name_keeps_its_head_and_its_end():
    name = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_" + "x" * 200 + "_nn_align1::Params)"
    short = short_name(name, 60)
    assert len(short) == 60 and short.startswith("void cutlass::Kernel<") and short.endswith("_nn_align1::Params)")
    assert short_name("short", 60) == "short" and short_name("abcdef", 1) == "…f"


def test_names_that_would_read_alike_show_where_they_differ():
    """Two cuDNN kernels differ only in a template argument in their middle: head-and-end forms read the same."""
    template = "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, {}, true, 1>(float, float, float, float, " \
               "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, float const*, float)"
    wide, narrow = template.format(128), template.format(32)
    assert short_name(wide, 60) == short_name(narrow, 60)
    first, second, third = short_names([wide, narrow, "aten::mm"], 60)
    assert first != second and "128" in first and "32," in second and third == "aten::mm"
    assert len(first) <= 60 and len(second) <= 60
    assert first.startswith("void cudnn::bn_bw_1C") and "…" in first


def test_a_reason_written_for_many_events_is_said_of_one_where_there_is_one():
    assert counted(2, "events that are not JSON objects") == "2 events that are not JSON objects"
    assert counted(1, "events that are not JSON objects") == "1 event that is not a JSON object"
    assert counted(1, "events whose args is not an object: read without their correlation") == (
        "1 event whose args is not an object: read without its correlation")
    assert counted(1_000, "events") == "1,000 events" and counted(1, "events") == "1 event"


def test_three_alike_names_stay_three():
    """One differs from the second early and from the third late: each is shown where it differs."""
    head = "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, "
    tail = ">(float, float, float, float, cudnnTensorStruct, float const*, float const*, float)"
    first, second, third = (head + width + ", true, 1, " + "A" * 53 + end + tail
                            for width, end in (("128", ", X1"), ("32", ", X1"), ("128", ", X2")))
    shown = short_names([first, second, third], 60)
    assert len(set(shown)) == 3 and all(len(name) <= 60 for name in shown)


def test_ranks_in_several_files_lists_the_first_eight_and_counts_the_rest():
    assert ranks_in_several_files([0]) == "rank 0 appears in more than one file"
    assert ranks_in_several_files([0, 1]) == "ranks 0, 1 appear in more than one file"
    assert ranks_in_several_files(list(range(1000))) == ("ranks 0, 1, 2, 3, 4, 5, 6, 7 and 992 more appear in more "
                                                         "than one file")
