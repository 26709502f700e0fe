"""A literal snapshot of lowprec's public API: every documented name and import path.

Restructuring must not change what users import. Removing or renaming a public name
fails here; adding one means adding it to this snapshot on purpose (and documenting it).
"""

from __future__ import annotations

import importlib

import pytest

import lowprec

TOP_LEVEL = [
    "Explanation", "FORMATS", "FloatFormat", "MODES", "RangeStats", "add", "custom_format",
    "decode", "div", "dot", "encode", "explain", "fma", "get_format", "identify_gemm", "list_formats",
    "list_models", "matmul", "mul", "mx", "nvfp4", "pack", "quant_error", "range_stats",
    "recipes", "round_to", "scaling", "hadamard", "sqrt", "sub", "unpack", "vecdot",
]

SUBMODULES = {
    "formats": ["ALIASES", "FORMATS", "FloatFormat", "custom_format", "get_format",
                "list_formats"],
    "amd": ["AMD_MODELS", "MFMA", "MFMA_MODELS", "get_mfma", "mfma_dot", "mfma_matmul"],
    "rounding": ["MODES", "check_mode", "decode", "encode", "round_to"],
    "arith": ["add", "div", "fma", "mul", "sqrt", "sub"],
    "matmul": ["AccumulationModel", "Architecture", "Blocked", "Exact", "Pairwise", "Promote",
               "Sequential", "TensorCore", "blocked", "dot", "get_model", "list_models",
               "matmul", "promote", "tensor_core", "vecdot"],
    "tensorcores": ["ARCHITECTURES", "AccumulationModel", "Architecture", "TensorCore",
                    "get_architecture", "input_family"],
    "identify": ["Identification", "TensorCoreCase", "conversion_probe", "identify_conversion",
                 "identify_dot", "iter_tensorcore_files", "read_array"],
    "gemm_identify": ["GemmCandidate", "GemmIdentification", "identify_gemm", "run_candidate"],
    "scaling": ["DelayedScaling", "ScaledTensor", "current_scale", "fake_quantize_per_tensor",
                "quantize_per_tensor", "quantize_tiles"],
    "mx": ["MXFormat", "MXTensor", "MX_FORMATS", "SCALE_RULES", "e8m0_scale_codes",
           "get_mx_format", "quantize"],
    "nvfp4": ["BLOCK_SCALE", "ELEMENT", "NVFP4Tensor", "SCALE_FORMATS", "global_encode_scale",
              "quantize"],
    "hadamard": ["SIGN_VECTOR", "hadamard_matrix", "rht", "rht_matrix"],
    "recipes": ["fp8", "lab", "measure", "nvfp4"],
    "recipes.measure": ["flushed_share", "rel_error", "wgrad"],
    "recipes.lab": ["BlockStats", "NoiseRow", "QUANTIZERS", "SQRT3", "block_stats",
                    "noise_threshold"],
    "recipes.nvfp4": ["KEEP_BF16", "ROLES", "RecipeNVFP4Tensor", "fake_quantize",
                      "four_over_six_candidates", "quantize", "quantize_along",
                      "quantize_operand", "random_bytes", "unrotate"],
    "recipes.fp8": ["GEMM_AXES", "deepseek_gemm", "deepseek_operands", "mxfp8_operands"],
    "quant_error": ["Scheme", "SchemeError", "compare_schemes", "format_table", "parse_scheme",
                    "plot_schemes", "to_columns"],
    "explain": ["Explanation", "RangeStats", "explain", "range_stats"],
    "packing": ["pack", "packed_size", "unpack"],
    "plot": ["inspect_heatmap", "inspect_histograms", "OKABE_ITO", "REGION_COLORS",
             "REGION_LABELS", "accumulation_error", "final_ranking", "format_comparison",
             "gradient_samples", "loss_scale_trace", "lost_updates", "memory_stack",
             "noise_threshold", "number_line", "outlier_scaling", "quantizer_lab", "region_edges", "relative_error", "rounding_edges",
             "running_sum", "scheme_errors", "spacing", "stochastic_rounding",
             "training_curves", "ulp_steps", "underflow_histogram", "underflow_per_layer",
             "underflow_shares"],
    "figures": ["FIGURES", "demo_figures", "generate", "main"],
    "autograd": ["Tensor", "cross_entropy", "gelu", "mse", "round_grad", "round_value"],
    "train": ["Adam", "GradScaler", "MemoryTable", "POLICIES", "Policy", "Quant", "RunResult",
              "SGD", "StaticScaler", "TASKS", "Task", "get_policy", "get_task", "list_policies",
              "load_run", "memory", "save_run", "train", "transformer_layer"],
    "gpu": ["ARITH_FORMATS", "ARITH_OPS", "BACK_CONVERSIONS", "BackConversion", "CONVERSIONS",
            "Conversion", "GPUUnavailableError", "KERNEL_DIR", "SOURCES", "SOURCES_SM90A",
            "arith", "available", "convert", "device_info", "matmul", "require",
            "unavailable_reason", "widen"],
    "validate": ["Identification", "conversion_behaviour", "difference_summary",
                 "explain_code", "gemm_behaviour", "identify_conversion", "identify_dot",
                 "nan_expectations", "run", "sample_accounting", "to_markdown",
                 "ulp_distance", "write_report"],
    "exercises": ["ExerciseError", "check_accumulator_spacing", "check_bits_per_value",
                  "check_block_flush_share", "check_underflow_count", "check_bytes_per_param",
                  "check_rht_amax", "check_sr8_probability",
                  "check_current_scale", "check_decode", "check_delayed_scale",
                  "check_device_mode", "check_double_rounding", "check_fp16_max",
                  "check_grad_scaler_scale", "check_largest_flushed",
                  "check_largest_lost_increment", "check_max", "check_mx_scale",
                  "check_num_finite", "check_rounding", "check_sequential_sum",
                  "check_smallest_loss_scale", "check_smallest_normal",
                  "check_smallest_subnormal", "check_spacing", "check_steps_until_visible",
                  "check_stochastic_probability", "check_ulp_distance",
                  "check_underflow_fraction", "check_unit_roundoff"],
    "tutorials": ["Cell", "EXERCISE_TAG", "SOLUTION_TAG", "hardware_reports", "join_cells",
                  "list_tutorials", "output_dir", "parse_cells", "render_notebooks", "show",
                  "student_version", "tutorials_dir", "write_student_versions"],
    "cli": ["build_parser", "main"],
    "inspect": ["BlockStats", "COLUMNS", "Choice", "DEFAULT_RECIPES", "RECIPES", "Recipe",
                "Recommendation", "Report", "exponent_histogram", "get_recipe", "list_recipes",
                "parse_name", "recommend", "report", "settled_loss_scale"],
    "torch": ["Capture", "Emulation", "capture", "emulate", "round_to"],
    "schemes": ["BLOCK_VARIANT_KINDS", "GEMM_DIRECTIONS", "GEMM_OPERANDS", "KINDS",
                "NVFP4_RECIPE_KINDS", "SCHEMES", "Scheme", "get_scheme", "list_schemes",
                "parse_gemms"],
    "grading": ["Check", "Exercise", "ExerciseResult", "SubmissionResult", "exercise_spec",
                "grade_submission", "open_tutorial", "read_submission"],
    "grading.handouts": ["assignment_text", "write_assignments"],
    "grading.report": ["PartialCSV", "feedback_text", "summary", "write_csv", "write_feedback"],
    "grading.variants": ["VARIANTS", "Variant", "read_roster", "variant_rng", "variant_text"],
    "explorer": ["MX_EXAMPLE", "build_page", "explorer_data", "parse_format_spec",
                 "write_page"],
}


#: Modules that need an optional dependency, and that dependency.
OPTIONAL = {"torch": "torch"}


def test_top_level_names():
    assert sorted(lowprec.__all__) == sorted(TOP_LEVEL)
    missing = [n for n in TOP_LEVEL if not hasattr(lowprec, n)]
    assert missing == [], f"lowprec.__all__ names that do not exist: {missing}"


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_submodule_names(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name], reason=f"lowprec.{name} needs {OPTIONAL[name]}")
    module = importlib.import_module(f"lowprec.{name}")
    assert sorted(module.__all__) == sorted(SUBMODULES[name])
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == [], f"lowprec.{name}.__all__ names that do not exist: {missing}"


def test_documented_import_paths():
    """The ``from lowprec.X import Y`` lines the README and docs use."""
    from lowprec.arith import add  # noqa: F401
    from lowprec.autograd import Tensor  # noqa: F401
    from lowprec.formats import get_format  # noqa: F401
    from lowprec.matmul import promote, tensor_core, vecdot  # noqa: F401
    from lowprec.mx import quantize  # noqa: F401
    from lowprec.rounding import round_to  # noqa: F401
    from lowprec.train import train  # noqa: F401
    from lowprec.validate import identify_conversion, identify_dot  # noqa: F401
