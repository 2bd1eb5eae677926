"""An error no tier explains that the engine's own code raised by a slip, not on purpose."""

from __future__ import annotations

import pytest

from diagnose.core.models import Confidence
from tests.conftest import primary, run_text

SITE = "/usr/local/lib/python3.12/dist-packages"


def _traceback(frames: list[tuple[str, str, str]], error: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, function, code in frames:
        lines += [f'  File "{SITE}/{path}", line 100, in {function}', f"    {code}"]
    return "\n".join([*lines, error]) + "\n"


LORA = [
    ("sglang/srt/model_executor/cuda_graph_runner.py", "capture", "self.capture_one_batch_size()"),
    ("sglang/srt/lora/backend/chunked_backend.py", "_get_permutation", "torch.tensor("),
    ("torch/utils/_device.py", "__torch_function__", "return func(*args, **kwargs)"),
]


def test_a_slip_in_the_engines_code_names_its_module_and_the_upgrade() -> None:
    log = _traceback(LORA, "TypeError: 'NoneType' object cannot be interpreted as an integer")
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert (cause.category, cause.tier, cause.confidence) == (
        "kernel_build",
        "generic",
        Confidence.LOW,
    )
    assert "`sglang.srt.lora.backend.chunked_backend` (`_get_permutation`)" in cause.explanation
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "sglang",
        "upgrade",
    )
    assert cause.patch is None


@pytest.mark.parametrize(
    ("frames", "error", "category"),
    [
        (
            [("vllm/model_executor/models/minimax_m2.py", "forward", "a, b, c = hidden_states")],
            "ValueError: not enough values to unpack (expected 3, got 2)",
            "model_unsupported",
        ),
        (
            [("vllm/v1/spec_decode/eagle.py", "propose", "ids = self.input_ids[:n]")],
            "AttributeError: 'NoneType' object has no attribute 'shape'",
            "spec_decode_config",
        ),
        (
            [("sglang/srt/model_executor/cuda_graph_runner.py", "capture", "n = sizes[i]")],
            "IndexError: list index out of range",
            "kernel_build",
        ),
        (  # an internal check of the engine's that failed, in words no mined release writes
            # (one it writes is the engine-source tier's: test_knowledge_source)
            [("vllm/v1/worker/gpu_worker.py", "profile", "assert free > 0, msg")],
            "AssertionError: free memory went negative after the profile run",
            "kernel_build",
        ),
    ],
)
def test_the_module_says_which_path_failed(
    frames: list[tuple[str, str, str]], error: str, category: str
) -> None:
    cause = primary(run_text(_traceback(frames, error)))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.category == category


@pytest.mark.parametrize(
    ("frames", "error"),
    [
        # the engine's own refusal, raised on purpose
        (
            [("vllm/config/model.py", "verify", 'raise ValueError("no such task")')],
            "ValueError: no such task",
        ),
        # an assert whose code line the traceback does not show may be anyone's
        (
            [("vllm/v1/worker/gpu_worker.py", "profile", "check(free)")],
            "AssertionError: Error in memory profiling. Initial free memory 30.3 GiB",
        ),
        # raised in another package's code, never through the engine's
        (
            [("transformers/configuration_utils.py", "get_config_dict", "d = cfg['x']")],
            "KeyError: 'x'",
        ),
        # an error of the environment, not of the code
        (
            [("vllm/entrypoints/openai/api_server.py", "run", "sock.bind(addr)")],
            "OSError: [Errno 98] Address already in use",
        ),
    ],
)
def test_no_slip_where_the_error_is_a_refusal_another_package_or_the_host(
    frames: list[tuple[str, str, str]], error: str
) -> None:
    cause = primary(run_text(_traceback(frames, error)))
    assert cause is None or cause.signature != "engine-code-fault"


def test_a_slip_in_cuda_graph_capture_offers_the_eager_start_as_its_test() -> None:
    frames = [("vllm/v1/worker/gpu_model_runner.py", "capture_model", "n = sizes[i]")]
    cause = primary(run_text(_traceback(frames, "IndexError: list index out of range")))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert any("--enforce-eager" in a for a in cause.alternatives)


def test_a_slip_in_a_shared_module_called_from_speculative_decoding_is_on_that_path() -> None:
    """The scheduler's batch raised, but the speculative verify step called it: the path (and
    the options to start without) is speculative decoding's; the upgrade stays the fix."""
    frames = [
        ("sglang/srt/speculative/eagle_info_v2.py", "prepare_for_v2_verify", "set_idx(batch)"),
        ("sglang/srt/managers/schedule_batch.py", "set_idx", "torch.tensor("),
    ]
    error = "TypeError: 'NoneType' object cannot be interpreted as an integer"
    cause = primary(run_text(_traceback(frames, error)))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.category == "spec_decode_config"
    assert "`sglang.srt.speculative.eagle_info_v2`, `prepare_for_v2_verify`" in cause.explanation
    assert any("without the speculative options" in a for a in cause.alternatives)
    assert cause.package is not None and cause.package.action == "upgrade"
    own = primary(run_text(_traceback(frames[:1], error)))
    assert own is not None and own.category == "spec_decode_config"
    assert any("without the speculative options" in a for a in own.alternatives)
    plain = primary(run_text(_traceback(frames[1:], error)))
    assert plain is not None and plain.category == "kernel_build"
    assert "speculative" not in plain.explanation


CUSTOM_ALL_REDUCE = [
    ("sglang/srt/distributed/parallel_state.py", "__init__", "self.ca_comm = CustomAllreduce("),
    (
        "sglang/srt/distributed/device_communicators/custom_all_reduce.py",
        "wrapper",
        "pynvml.nvmlInit()",
    ),
]


def test_ranks_that_print_one_error_at_once_lend_it_their_frames() -> None:
    """Two ranks' tracebacks interleaved (sglang#3135 on ROCm): the first rank's exception
    line comes under the other's first frame, alone; the frames are those the same words end
    elsewhere, and the custom all-reduce path offers its off switch as the test."""
    frames = _traceback(CUSTOM_ALL_REDUCE, "NameError: name 'pynvml' is not defined").splitlines()
    log = "\n".join([*frames[:3], "NameError: name 'pynvml' is not defined", *frames[3:]]) + "\n"
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.evidence[0].line == 4  # the first error, read with the frames of its twin
    assert "custom_all_reduce` (`wrapper`), at `pynvml.nvmlInit()`" in cause.explanation
    assert any("--disable-custom-all-reduce" in a for a in cause.alternatives)


def test_a_source_checkout_worker_traceback_reads_as_the_engines_own_assert() -> None:
    """A vLLM worker's traceback from a source checkout: relative frame paths, code lines
    written without the process prefix their frame line has, and the engine's relay of the
    error logged below it (which completes first)."""
    log = (
        '(Worker_PP0_TP3 pid=948)   File "vllm/v1/worker/gpu/cudagraph_utils.py", line 347,'
        " in capture\n"
        "    forward_fn = create_forward_fn(desc, warmup=True)\n"
        '(Worker_PP0_TP3 pid=948)   File "vllm/v1/worker/mamba_utils.py", line 1001,'
        " in _populate_metadata\n"
        "    assert len(block_tables) == self.num_groups, (\n"
        "(Worker_PP0_TP3 pid=948) AssertionError: expected 3 block tables, got 4\n"
        "(EngineCore pid=680) RuntimeError: Worker failed with error 'expected 3 block tables,"
        " got 4', please check the stack trace above for the root cause\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert "`vllm.v1.worker.mamba_utils` (`_populate_metadata`)" in cause.explanation
    assert "assert len(block_tables) == self.num_groups" in cause.explanation


def test_a_library_name_left_none_by_an_optional_import_asks_for_that_library() -> None:
    """vLLM imports FlashInfer where it is optional and leaves its names None without it: the
    call of FlashInfer's wrapper class fails, and the fix is the library, not an upgrade."""
    frames = [
        ("vllm/worker/model_runner.py", "execute_model", "self.attn_state.begin_forward(x)"),
        (
            "vllm/attention/backends/flashinfer.py",
            "_get_prefill_wrapper",
            "self._prefill_wrapper = BatchPrefillWithPagedKVCacheWrapper(",
        ),
    ]
    cause = primary(run_text(_traceback(frames, "TypeError: 'NoneType' object is not callable")))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.title.startswith("`BatchPrefillWithPagedKVCacheWrapper` is None: flashinfer")
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "flashinfer-python",
        "install",
    )


def test_a_none_call_of_a_name_no_library_binds_stays_a_code_fault() -> None:
    frames = [("vllm/v1/worker/gpu_worker.py", "load_model", "self.runner = make_runner(cfg)")]
    cause = primary(run_text(_traceback(frames, "TypeError: 'NoneType' object is not callable")))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.package is not None and cause.package.action == "upgrade"


ASCEND_CHECKOUT = "/vllm-workspace/vllm-ascend/vllm_ascend"


def test_a_slip_in_a_platform_plugins_code_names_the_plugins_release() -> None:
    """Reduced from a vllm-ascend start (vllm-project/vllm-ascend PR 1803): the plugin reads a
    field the model's composite config keeps elsewhere; transformers' frame raised it."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/vllm-workspace/vllm/vllm/config.py", line 4624, in __post_init__\n'
        "    current_platform.check_and_update_config(self)\n"
        f'  File "{ASCEND_CHECKOUT}/utils.py", line 307, in update_aclgraph_sizes\n'
        "    num_hidden_layers = vllm_config.model_config.hf_config.num_hidden_layers\n"
        f'  File "{SITE}/transformers/configuration_utils.py", line 211, in __getattribute__\n'
        "    return super().__getattribute__(key)\n"
        "AttributeError: 'Qwen2AudioConfig' object has no attribute 'num_hidden_layers'\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-platform-plugin-code-fault"
    assert (cause.category, cause.tier) == ("model_unsupported", "engine_source")
    assert "`vllm_ascend.utils` (`update_aclgraph_sizes`)" in cause.explanation
    assert "`num_hidden_layers`" in cause.explanation
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "vllm-ascend",
        "upgrade",
    )


def test_a_plugin_slip_followed_by_the_runtimes_own_error_line_is_still_the_plugins() -> None:
    """The Ascend runtime prints its own error line after Python's: the traceback's frame
    stays with the line that names the exception."""
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{ASCEND_CHECKOUT}/platform.py", line 80, in pre_register_and_update\n'
        "    if ASCEND_QUATIZATION_METHOD not in quant_action.choices:\n"
        "TypeError: argument of type 'NoneType' is not iterable\n"
        "[ERROR] 2025-06-03-02:53:42 (PID:6005, Device:-1, RankID:-1) ERR99999 UNKNOWN "
        "applicaiton exception\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-platform-plugin-code-fault"
    assert cause.category == "kernel_build"
    assert cause.package is not None and cause.package.name == "vllm-ascend"


def test_a_slip_in_the_launchers_own_code_is_the_launchers() -> None:
    """Reduced from THUDM/slime issue 1896: the launcher indexed past the GPUs it was given,
    before any engine code ran; its source checkout is what to update."""
    log = (
        'File "slime/ray/rollout.py", line 1241, in start_rollout_servers\n'
        "    handles, port_cursors = group.start_engines(port_cursors)\n"
        'File "slime/ray/rollout.py", line 104, in start_engines\n'
        "    base_gpu_id = int(reordered_gpu_ids[gpu_index])\n"
        "IndexError: list index out of range\n"
    )
    cause = primary(run_text("Traceback (most recent call last):\n" + log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.category == "launch_args"  # the code maps settings onto GPUs
    assert cause.package is None and any("git pull" in a for a in cause.system_actions)
    assert "`slime`'s own code" in cause.explanation


def test_an_installed_programs_slip_upgrades_that_program() -> None:
    frames = [("xinference/model/llm/core.py", "load", "spec = specs[name]")]
    cause = primary(run_text(_traceback(frames, "KeyError: 'qwen3'")))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.category == "kernel_build"
    assert cause.package is not None and cause.package.name == "xinference"


@pytest.mark.parametrize(
    "frames",
    [
        [("torch/nn/modules/module.py", "forward", "x = inputs[0]")],  # a library's own code
        [("slime/ray/rollout.py", "start", "raise IndexError('no engines')")],  # on purpose
        # the engine's code under the program's: the engine's fault, not the program's
        [
            ("slime/ray/rollout.py", "start", "engine = LLM(**kwargs)"),
            ("vllm/v1/worker/gpu_worker.py", "init", "x = ranks[i]"),
        ],
    ],
)
def test_no_program_fault_for_a_library_a_deliberate_raise_or_the_engines_code(
    frames: list[tuple[str, str, str]],
) -> None:
    cause = primary(run_text(_traceback(frames, "IndexError: list index out of range")))
    assert cause is None or cause.signature != "program-code-fault"


VERL = "/home/user/resources/verl"


def test_a_programs_own_refusal_of_what_it_does_not_know_upgrades_that_program() -> None:
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{VERL}/trainer/main_ppo.py", line 155, in run\n'
        "    trainer.init_workers()\n"
        f'  File "{VERL}/workers/rollout/sglang_rollout/sglang_rollout.py", line 113, in parser\n'
        '    raise ValueError(f"No tool call parser found for tokenizer {tokenizer}")\n'
        "ValueError: No tool call parser found for tokenizer Qwen2TokenizerFast(name='x',\n"
        "    vocab_size=151643,\n"
        ")\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.category == "kernel_build"
    # the program is the directory its frames share, not the folder the raising file repeats
    assert "`verl`'s own check" in cause.title
    assert any("git pull" in action and "verl" in action for action in cause.system_actions)


def test_a_programs_refusal_of_a_setting_asks_for_the_setting_not_an_upgrade() -> None:
    frames = [("slime/utils/arguments.py", "validate", "raise ValueError(msg)")]
    log = _traceback(frames, "ValueError: rollout_batch_size must be a multiple of n_samples")
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.category == "launch_args"
    assert cause.package is None and "Change the setting the message names" in cause.explanation


def test_a_programs_call_into_a_library_that_refuses_it_is_the_programs() -> None:
    log = (
        "Error executing job with overrides: ['actor_rollout_ref.rollout.name=vllm']\n"
        "Traceback (most recent call last):\n"
        '  File "/scratch/code/src/verl/workers/fsdp_workers.py", line 634, in _build_rollout\n'
        "    loop = asyncio.get_event_loop()\n"
        f'  File "{SITE}/uvloop/__init__.py", line 206, in get_event_loop\n'
        "    raise RuntimeError(\n"
        "RuntimeError: There is no current event loop in thread 'MainThread'.\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.title.startswith("`verl`'s call into `uvloop` failed")  # Hydra's line skipped


def test_a_failed_assert_in_a_ray_jobs_uploaded_program_names_the_program() -> None:
    upload = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_765c8a21e6"
    log = (
        f'File "{upload}/verl/workers/rollout/vllm_async_server.py", line 344, in launch_server\n'
        "    assert len(self.workers) == dp_size_local * tp_size, (\n"
        "AssertionError: num workers (4) should be equal to dp_size_local\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.category == "launch_args"  # workers against parallel sizes
    assert cause.raised_in == "verl (launch_server)"


def test_an_assert_in_a_kernel_librarys_own_code_upgrades_that_library() -> None:
    log = (
        f'  File "{SITE}/flashinfer/utils.py", line 758, in get_shuffle_matrix_sf_a_row_indices\n'
        "    assert input_tensor.dtype == torch.uint8\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "AssertionError\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "library-code-fault"
    assert cause.package is not None and cause.package.name == "flashinfer-python"
    # a shape's divisibility there has its own reading: the same upgrade, and the parallel
    # size that splits the weight as the way around it
    aligned = primary(run_text(log.replace("input_tensor.dtype == torch.uint8", "K % 4 == 0")))
    assert aligned is not None and aligned.signature == "kernel-library-asserts-aligned-shape"
    assert aligned.package is not None
    assert (aligned.package.name, aligned.package.action) == ("flashinfer-python", "upgrade")
    assert "tensor-parallel size" in aligned.explanation
    # the same assert under the engine's frame stays the engine's reading
    engine = _traceback(
        [
            ("vllm/model_executor/layers/fused_moe/layer.py", "process", "shuffle(w)"),
            ("flashinfer/utils.py", "get_shuffle_matrix_sf_a_row_indices", "assert K % 4 == 0"),
        ],
        "AssertionError",
    )
    under = primary(run_text(engine))
    assert under is None or under.signature != "library-code-fault"


def test_an_engine_call_a_programs_plugged_class_does_not_take_is_the_programs() -> None:
    log = (
        "TypeError: ExternalZeroMQDistributedExecutor.collective_rpc() got an unexpected "
        "keyword argument 'non_block'\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "plugged-class-written-for-another-release"
    assert "`ExternalZeroMQDistributedExecutor`" in cause.system_actions[0]
    # the engine's own executor class is the engine's (its release), not a program's
    own = primary(
        run_text(log.replace("ExternalZeroMQDistributedExecutor", "RayDistributedExecutor"))
    )
    assert own is None or own.signature != "plugged-class-written-for-another-release"


def test_a_programs_module_named_after_the_engine_is_still_the_programs() -> None:
    """`site-packages/maxtext/integration/vllm/...` is MaxText's adapter, not vLLM's code."""
    log = (
        "[rank0]: Traceback (most recent call last):\n"
        f'[rank0]:   File "{SITE}/maxtext/integration/vllm/adapter.py", line 266, in __call__\n'
        "[rank0]:     hidden, kv_caches = self.model(\n"
        f'[rank0]:   File "{SITE}/maxtext/layers/nnx_decoders.py", line 1854, in __call__\n'
        '[rank0]:     kv_caches["key_cache"][lyr],\n'
        "[rank0]: TypeError: list indices must be integers or slices, not str\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "program-code-fault"
    assert cause.package is not None and cause.package.name == "maxtext"


def test_a_name_never_bound_pasted_alone_from_an_engines_log_is_a_lead_to_upgrade() -> None:
    """A NameError with no traceback in an SGLang log (sglang#5443 quoted only the line): the
    engine's code at low confidence; the same words inside another line are no such error."""
    banner = "[2025-04-18 09:12:40] INFO server_args.py: sglang version 0.4.5\n"
    cause = primary(run_text(banner + "NameError: name 'VLLM_AVAILABLE' is not defined\n"))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.confidence is Confidence.LOW
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "sglang",
        "upgrade",
    )
    mention = "Ignore import error when loading sglang.srt.models.foo: NameError: name 'X' is not defined\n"
    quoted = primary(run_text(banner + mention))
    assert quoted is None or quoted.signature != "engine-code-fault"


def test_a_name_never_bound_pasted_alone_takes_the_one_engine_whose_modules_bind_it() -> None:
    """With no banner or frame naming the engine, the unbound name does: only SGLang's modules
    bind ``get_global_server_args``; a name both engines bind (``pynvml``) names neither."""
    cause = primary(run_text("NameError: name 'get_global_server_args' is not defined\n"))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.confidence is Confidence.LOW
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "sglang",
        "upgrade",
    )
    shared = primary(run_text("NameError: name 'pynvml' is not defined\n"))
    assert shared is None or shared.signature != "engine-code-fault"


def test_a_paste_that_elides_the_paths_start_names_no_program_called_dots() -> None:
    """``.../flashinfer/fused_moe/core.py``: the dots are what the paste left out, not a
    directory; the file under them is a kernel library's, no program's."""
    log = (
        '  File ".../fused_moe_triton/layer.py", line 1273, in forward_impl\n'
        "      result = trtllm_fp4_block_scale_moe(...)\n"
        '  File ".../flashinfer/fused_moe/core.py", line 1085, in forward\n'
        "      assert hidden_states_scale is None or (\n"
        "  AssertionError: hidden_states_scale's first dimension must be batch size\n"
    )
    cause = primary(run_text(log))
    assert cause is None or cause.signature != "program-code-fault"
    assert cause is None or "`...`" not in cause.title


def test_a_slip_in_the_accelerator_stack_the_engine_called_is_the_pair_out_of_step() -> None:
    frames = [
        ("vllm/worker/hpu_model_runner.py", "warmup_model", "with compile_only_mode_context():"),
        ("habana_frameworks/torch/internal/bridge_config.py", "env_setting", "get = globals()[k]"),
    ]
    cause = primary(run_text(_traceback(frames, "KeyError: 'get_pt_compile_only_mode'")))
    assert cause is not None and cause.signature == "vllm-accelerator-stack-mismatch"
    assert cause.title.startswith("The vLLM build and the installed Intel Gaudi's software")
    assert "`vllm.worker.hpu_model_runner` (`warmup_model`)" in cause.explanation
    assert cause.package is None  # vLLM's public releases are no builds for the stack
    assert cause.system_actions[0].startswith("Install the vLLM build made for the installed")


def test_a_message_cut_after_pythons_did_you_mean_is_still_the_error() -> None:
    """A paste that stops at ``Did you mean:`` ends with a colon, as a wrapper's line does;
    it is the error itself, and the slip in the engine's loader is read from it."""
    frames = [
        (
            "vllm/model_executor/model_loader/bitsandbytes_loader.py",
            "dequantize_dq",
            "if quant_state.nested:",
        )
    ]
    log = _traceback(
        frames, "AttributeError: 'Tensor' object has no attribute 'nested'. Did you mean:"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert "`vllm.model_executor.model_loader.bitsandbytes_loader`" in cause.explanation


def test_a_tensor_read_as_a_truth_value_in_prefix_code_offers_prefix_caching_off() -> None:
    """torch's words for `if tensor:` on a tensor of many values are a slip; where the code is
    about cached prefixes, the start without prefix caching is its test."""
    frames = [("vllm/worker/model_runner.py", "_prepare_prompt", "if prefix_block_list_tensor:")]
    error = "RuntimeError: Boolean value of Tensor with more than one value is ambiguous"
    cause = primary(run_text(_traceback(frames, error)))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert any("--no-enable-prefix-caching" in a for a in cause.alternatives)
    sglang = [("sglang/srt/mem_cache/radix_cache.py", "match_prefix", "if key:")]
    cause = primary(run_text(_traceback(sglang, error)))
    assert cause is not None and any("--disable-radix-cache" in a for a in cause.alternatives)


def test_on_the_gaudi_build_the_upgrade_is_the_forks_not_the_package_index() -> None:
    """HabanaAI's vLLM fork (its HPU worker in the frames): `pip install -U vllm` would put the
    CUDA build in its place, so the upgrade is the Gaudi build's."""
    frames = [("vllm/worker/hpu_model_runner.py", "_prepare_prompt", "if prefix_tensor:")]
    error = "RuntimeError: Boolean value of Tensor with more than one value is ambiguous"
    cause = primary(run_text(_traceback(frames, error)))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert cause.package is None
    assert any("HabanaAI's vllm-fork" in action for action in cause.system_actions)
    on_cuda = [("vllm/worker/model_runner.py", "_prepare_prompt", "if prefix_tensor:")]
    cause = primary(run_text(_traceback(on_cuda, error)))
    assert cause is not None and cause.package is not None and cause.package.name == "vllm"


def test_a_name_the_engines_module_binds_on_one_branch_reads_as_an_optional_import() -> None:
    frames = [
        (
            "sglang/srt/managers/cache_controller.py",
            "prefetch_thread_func",
            "if not isinstance(self.storage_backend, MooncakeStore):",
        )
    ]
    cause = primary(run_text(_traceback(frames, "NameError: name 'MooncakeStore' is not defined")))
    assert cause is not None and cause.signature == "engine-code-fault"
    assert "`MooncakeStore` is a name the module binds on one branch only" in cause.explanation
    other = primary(run_text(_traceback(frames, "IndexError: list index out of range")))
    assert other is not None and "binds on one branch" not in other.explanation
