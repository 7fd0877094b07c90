"""The device module's choices: bf16 only where the GPU computes it natively, else fp16
with a gradient scaler, float32 off CUDA; and the places that load and train models follow that choice."""
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


@pytest.mark.parametrize("where", ["cpu", "mps", "meta"])
def test_off_cuda_is_float32_without_mixed_precision(where, gpu):
    gpu(True)
    assert (D.precision(where).dtype, D.precision(where).mixed_precision) == (torch.float32, "no")


def test_gpu_and_paper_profiles_load_in_the_device_choice(gpu):
    for name in ("gpu", "paper"):
        assert profiles.get(name).dtype == models.AUTO_DTYPE
    gpu(False)
    assert models.resolve_dtype("auto", torch.device("cuda")) == torch.float16
    gpu(True)
    assert models.resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert models.resolve_dtype("auto", torch.device("cpu")) == torch.float32
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
    model = torch.nn.Linear(3, 1)
    T.train(model, batch_for=lambda step, micro: torch.ones(2, 3), loss_fn=lambda m, b: {"loss": m(b).pow(2).mean()},
            config=T.TrainConfig(steps=1, batch_size=2, eval_every=0), run_dir=tmp_path, progress=False)
    assert seen == [D.precision("cpu").mixed_precision] == ["no"]


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
