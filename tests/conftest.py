"""Make `tests/` importable so test modules can `import corpus` under any pytest import mode,
verify the IR after every pass in every test (the user-facing switch is ZYMO_VERIFY=1), and
leave the slow tests to a run of their own.

`python -m pytest -q` deselects the tests marked `slow` (those of SLOW below, and any marked
`@pytest.mark.slow` where they are written); `python -m pytest -q -m slow` runs them, and any
other `-m` expression decides for itself (`-m "slow or not slow"`: everything). A test named
on the command line (`path::name`) runs whatever its marks. CI runs both halves (README.md,
"Two commands").
"""
import os
import re
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
os.environ.setdefault("ZYMO_VERIFY", "1")

# The slow tests: whole evolution searches, the fuzzer's batches and the longest derivative
# checks, with their seconds in `--durations` on 2 busy cores. Listed here, not marked where
# they are written, so that the default run's budget (9 minutes on 2 cores, 2 processes) is kept in one
# place. A test that uses a module fixture running a search is slow with it, or the default
# run would pay for the search anyway.
SLOW = {
    "tests/evolve/test_dask.py::test_evolution_over_a_dask_cluster": 68,
    "tests/evolve/test_cluster.py::test_evolve_takes_a_client_directly": 30,
    "tests/evolve/test_derivatives.py::test_evolving_a_gradient_keeps_it_the_gradient": 58,
    "tests/evolve/test_derivatives.py::test_a_gradient_guided_by_its_profile_and_race_checked": 37,
    "tests/evolve/test_derivatives.py::test_evolving_a_jvp_keeps_it_the_jvp": 28,
    # these two share the fixture `run`, a seeded CLI search
    "tests/evolve/test_cli_evolve.py::test_a_seeded_cli_run_finds_the_speedup": 49,
    "tests/evolve/test_cli_evolve.py::test_the_checkpoint_is_kept_unless_resumed": 7,
    "tests/evolve/test_evolve_api.py::test_gradient_with_an_active_scalar": 23,
    "tests/evolve/test_evolve_api.py::test_generations_zero_and_tiny_budget": 22,
    "tests/evolve/test_evolve_api.py::"
    "test_race_check_uses_the_search_launch_with_a_holdout_launch": 18,
    "tests/evolve/test_evolve_api.py::test_holdout_with_its_own_launch": 15,
    "tests/evolve/test_evolve_api.py::"
    "test_default_pool_one_worker_then_minimize_and_report": 14,
    "tests/evolve/test_evolve_api.py::test_interrupted_run_resumes_from_its_checkpoint": 13,
    "tests/evolve/test_evolve_api.py::test_cli_run_from_a_spec": 13,
    # these two share the fixture `waste_run`
    "tests/evolve/test_evolve_api.py::test_found_variant_is_right_on_new_sizes": 13,
    "tests/evolve/test_evolve_api.py::test_save_load_and_reapply_on_every_backend": 2,
    "tests/evolve/test_evolve_api.py::test_process_pool_executor": 12,
    "tests/evolve/test_evolve_api.py::test_unknown_checkpoint_kernel": 12,
    "tests/evolve/test_evolve_api.py::test_custom_check_and_tolerance": 12,
    "tests/evolve/test_evolve_api.py::test_two_dimensional_launch_fixed_and_as_a_function": 10,
    "tests/evolve/test_evolve_api.py::test_load_variant_of_a_derivative": 9,
    "tests/evolve/test_evolve_api.py::test_jvp_with_a_constant_scalar": 8,
    "tests/evolve/test_evolve_api.py::test_scalar_arguments_and_python_scalar_inputs": 8,
    # these share the fixture `run`, a seeded search
    "tests/evolve/test_search.py::test_seeded_evolution_removes_the_redundant_clearing": 19,
    "tests/evolve/test_search.py::test_history_and_checkpoint": 0,
    "tests/evolve/test_search.py::test_resume_continues_from_the_checkpoint": 2,
    "tests/evolve/test_search.py::test_report_and_minimize": 6,
    "tests/evolve/test_search.py::test_a_variant_slower_side_by_side_is_not_reported": 1,
    "tests/evolve/test_search.py::test_candidates_are_checked_past_the_first_batch": 1,
    "tests/evolve/test_search.py::test_the_report_counts_add_up": 0,
    "tests/evolve/test_guided.py::test_evolve_guided_by_a_profile_finds_the_hoist": 9,
    "tests/genome/test_genome.py::"
    "test_random_mutations_of_the_corpus_verify_and_replay_identically": 14,
    "tests/ad/test_preaccumulation.py::test_a_long_chain_of_unary_ops_is_one_tree": 22,
    "tests/ad/test_straight_line.py::test_random_programs": 10,
    "tests/fuzz/test_fuzz_batch.py::test_primal_batch_interp_cpu": 12,
    "tests/fuzz/test_fuzz_batch.py::test_derivative_batch_interp_cpu": 12,
    "tests/workloads/test_simcov.py::test_short_evolution_on_cpu": 40,
    "tests/workloads/test_smith_waterman.py::"
    "test_v0_variant_reading_uncleared_shared_memory_fails_the_race_check": 14,
    "tests/workloads/test_smith_waterman.py::test_kernel_is_race_free_on_interpreter": 14,
    "tests/workloads/test_smith_waterman.py::"
    "test_v0_clearings_hoisted_out_of_the_diagonal_loop_pass_the_race_check": 8,
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a long test (seconds to minutes on 2 cores); deselected unless `-m` "
                   "selects it: `python -m pytest -m slow` runs these")
    stale = [name for name in SLOW if not _defined(name)]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py: SLOW names tests that do not exist (moved "
                                f"or renamed?): {', '.join(stale)}")


def _defined(name: str) -> bool:
    path, _, test = name.partition("::")
    file = TESTS.parent / path
    return file.exists() and re.search(rf"^\s*def {test}\(", file.read_text(), re.M) is not None


@pytest.hookimpl(tryfirst=True)     # the marks must be on before `-m` filters by them
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("[")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
    if config.option.markexpr:     # `-m ...`: the expression decides
        return
    keep, slow = [], []
    for item in items:
        deselect = item.get_closest_marker("slow") is not None and not _named(item, config)
        (slow if deselect else keep).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep


def _named(item, config) -> bool:
    """Is `item` named on the command line (`path::test`, `path::test[case]`, ...)?"""
    for arg in config.args:
        path, _, name = arg.partition("::")
        if name and Path(config.invocation_params.dir, path).resolve() == item.path.resolve() \
                and item.nodeid.partition("::")[2].startswith(name):
            return True
    return False
