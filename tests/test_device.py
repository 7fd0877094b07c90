"""The device module's choices: bf16 only where the device computes it natively (sm80+ GPUs, CPUs with AVX512-BF16 or
AMX), else fp16 with a gradient scaler on a GPU, else float32; and the places that load and train models follow that
choice."""
import pytest
import torch

from helpers import device as D
from helpers import models, profiles


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA device whose native bf16 support the test sets; records how it was asked."""
    asked = []

    def set_native_bf16(value: bool):
        def is_bf16_supported(including_emulation: bool = True):
            asked.append(including_emulation)
            return value if not including_emulation else True  # emulation makes every GPU "support" bf16
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
        return asked

    return set_native_bf16


def test_native_bf16_gpu_trains_in_bf16(gpu):
    asked = gpu(True)
    chosen = D.precision("cuda")
    assert (chosen.dtype, chosen.mixed_precision) == (torch.bfloat16, "bf16")
    assert asked == [False]  # emulated bf16 must not count


def test_t4_class_gpu_trains_in_fp16_with_a_scaler(gpu):
    asked = gpu(False)
    chosen = D.precision(torch.device("cuda", 0))
    assert (chosen.dtype, chosen.mixed_precision) == (torch.float16, "fp16")
    assert "scaler" in chosen.reason and asked == [False]


@pytest.fixture
def cpu_bf16(monkeypatch):
    """A CPU whose native bf16 the test sets (through the flags it reports, so the check itself runs)."""

    def set_flags(*flags: str):
        monkeypatch.setattr(D, "cpu_flags", lambda cpuinfo=None: frozenset(flags))

    return set_flags


@pytest.mark.parametrize("where", ["cpu", "mps", "meta"])
def test_off_cuda_without_native_bf16_is_float32_without_mixed_precision(where, gpu, cpu_bf16):
    gpu(True)
    cpu_bf16("avx2", "avx512f", "fma")  # AVX512 alone emulates bf16: slower than float32
    assert (D.precision(where).dtype, D.precision(where).mixed_precision) == (torch.float32, "no")


@pytest.mark.parametrize("flag", D.NATIVE_BF16_CPU_FLAGS)
def test_a_cpu_with_native_bf16_computes_in_bf16(flag, cpu_bf16):
    cpu_bf16("avx2", flag)
    chosen = D.precision("cpu")
    assert (chosen.dtype, chosen.mixed_precision) == (torch.bfloat16, "bf16") and "CPU" in chosen.reason
    assert (D.precision("mps").dtype, D.precision("meta").dtype) == (torch.float32, torch.float32)  # only the CPU


def test_cpu_flags_are_read_from_the_flags_line_of_cpuinfo():
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\nbugs\t\t: sysret_ss_attrs\n"
    assert D.cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    assert D.cpu_flags("processor\t: 0\n") == frozenset()  # no flags line (an ARM or emulated CPU): never native
    assert D.cpu_computes_bf16(D.cpu_flags(cpuinfo)) is torch.backends.mkldnn.is_available()
    assert not D.cpu_computes_bf16(frozenset({"avx512f", "avx512bw"}))


def test_cpu_gpu_and_paper_profiles_load_in_the_device_choice(gpu, monkeypatch):
    for name in ("cpu", "gpu", "paper"):
        assert profiles.get(name).dtype == models.AUTO_DTYPE
    gpu(False)
    assert models.resolve_dtype("auto", torch.device("cuda")) == torch.float16
    gpu(True)
    assert models.resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(D, "cpu_flags", lambda cpuinfo=None: frozenset({"avx2"}))
    assert models.resolve_dtype("auto", torch.device("cpu")) == torch.float32
    monkeypatch.setattr(D, "cpu_flags", lambda cpuinfo=None: frozenset({"avx512_bf16"}))
    assert models.resolve_dtype("auto", torch.device("cpu")) == torch.bfloat16
    assert profiles.get("smoke").dtype == "float32"  # CI's tiny random model: the same digits on every CPU
    with pytest.raises(ValueError, match="dtype='half-ish'"):
        models.resolve_dtype("half-ish")


def test_training_hands_accelerate_the_device_choice(monkeypatch, tmp_path):
    import accelerate

    from helpers import training as T

    seen = []

    class Recording(accelerate.Accelerator):
        def __init__(self, *args, mixed_precision=None, **kwargs):
            seen.append(mixed_precision)
            super().__init__(*args, mixed_precision=mixed_precision, **kwargs)

    monkeypatch.setattr(accelerate, "Accelerator", Recording)
    for flags, dtype, expected in [({"avx2"}, torch.float32, "no"),
                                   ({"avx512_bf16"}, torch.float32, "no"),  # float32 weights train in float32
                                   ({"avx512_bf16"}, torch.bfloat16, "bf16")]:  # bf16 weights: autocast their LoRA
        monkeypatch.setattr(D, "cpu_flags", lambda cpuinfo=None, flags=flags: frozenset(flags))
        seen.clear()
        model = torch.nn.Linear(3, 1).to(dtype)
        T.train(model, batch_for=lambda step, micro: torch.ones(2, 3, dtype=dtype),
                loss_fn=lambda m, b: {"loss": m(b).float().pow(2).mean()},
                config=T.TrainConfig(steps=1, batch_size=2, eval_every=0), run_dir=tmp_path / f"{dtype}-{sorted(flags)}",
                progress=False)
        assert seen == [expected], (flags, dtype)
        assert D.training_mixed_precision(model) == expected


def test_model_device_is_where_the_weights_are():
    assert D.model_device(torch.nn.Linear(2, 2).to("meta")).type == "meta"
    with pytest.raises(ValueError, match="no parameters"):
        D.model_device(torch.nn.ReLU())


def test_workbook_device_mps_without_mps_names_the_variable_and_the_way_out(monkeypatch):
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    monkeypatch.setenv("WORKBOOK_DEVICE", "mps")
    with pytest.raises(ValueError, match="WORKBOOK_DEVICE='mps'.*no MPS.*unset WORKBOOK_DEVICE"):
        D.get_device()


def test_a_bf16_gpu_takes_the_t4_path_when_asked_and_only_then(gpu, cpu_bf16, monkeypatch):
    gpu(True)
    cpu_bf16("avx2", "amx_bf16")
    assert D.precision("cuda").mixed_precision == "bf16"
    monkeypatch.setenv(D.GPU_PRECISION_VAR, "fp16")
    chosen = D.precision("cuda")
    assert (chosen.dtype, chosen.mixed_precision) == (torch.float16, "fp16") and D.GPU_PRECISION_VAR in chosen.reason
    assert D.precision("cpu").dtype == torch.bfloat16  # CPUs keep their own choice
    monkeypatch.setenv(D.GPU_PRECISION_VAR, "bf17")
    with pytest.raises(ValueError, match=D.GPU_PRECISION_VAR):
        D.precision("cuda")
