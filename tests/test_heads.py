"""Head sets: the published defaults match the authors' files, shipped calibrations load, files round-trip."""
import json

import pytest

from backends.heads import PUBLISHED_HEADS, HeadFileError, HeadSet, default_heads, load_heads, save_heads


def test_published_defaults_are_the_authors_top_8(shared_data):
    for (model, direction), heads in PUBLISHED_HEADS.items():
        name = model.replace("/", "_").replace(".", "_")
        path = shared_data / "alignatt_heads" / f"translation_heads_{name}_{direction}.json"
        assert load_heads(path, top_k=8).heads == heads, path.name


def test_shipped_calibrations_are_defaults_for_the_embedded_model():
    for source, target in (("en", "de"), ("en", "it"), ("en", "zh"), ("cs", "en")):
        head_set = default_heads("embedded", source, target, top_k=8)
        assert len(head_set.heads) == 8 and head_set.direction == f"{source}-{target}"
        assert list(head_set.scores) == sorted(head_set.scores, reverse=True)
        # en-X: MCIF's calibration talks; cs-en: Europarl word-aligned lines, disjoint from the lines it is evaluated on
        assert head_set.metadata["split"] == ("calibration" if source == "en" else "all")


def test_every_shipped_file_is_the_calibration_of_the_model_and_direction_it_is_the_default_for():
    from backends.heads import DIRECTORY, SHIPPED_HEAD_FILES

    for (model, direction), name in SHIPPED_HEAD_FILES.items():
        data = json.loads((DIRECTORY / name).read_text())
        assert (data["model"], data["direction"]) == (model, direction), name
        heads = load_heads(DIRECTORY / name).heads  # every head of the model ranked, each inside the model
        assert len(set(heads)) == data["num_layers"] * data["num_heads"], name
        assert all(0 <= layer < data["num_layers"] and 0 <= head < data["num_heads"] for layer, head in heads), name
    larger = default_heads("embedded:qwen2.5-coder-1.5b-instruct", "en", "de", top_k=8)
    assert larger.metadata["num_layers"] == 28 and larger.heads != default_heads("embedded", "en", "de", 8).heads


def test_a_local_copy_of_a_known_model_gets_its_heads():
    assert default_heads("/models/gemma-4-E4B-it", "en", "de").heads == PUBLISHED_HEADS[("google/gemma-4-E4B-it",
                                                                                          "en-de")]


def test_round_trip_and_errors(tmp_path):
    head_set = HeadSet(((3, 1), (0, 2)), (0.9, 0.5), "m", "en-de")
    save_heads(head_set, tmp_path / "h.json", ts_matrix=[[0.1]])
    loaded = load_heads(tmp_path / "h.json")
    assert loaded.heads == head_set.heads and loaded.scores == head_set.scores
    assert json.loads((tmp_path / "h.json").read_text())["ts_matrix"] == [[0.1]]
    with pytest.raises(HeadFileError, match="does not exist"):
        load_heads(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(HeadFileError, match="not a heads file"):
        load_heads(tmp_path / "bad.json")
    with pytest.raises(HeadFileError, match="no default head set"):
        default_heads("embedded", "en", "fr")


def test_every_direction_heads_is_the_union_of_the_directions_default_sets():
    from backends.heads import every_direction_heads

    directions = [("en", "de"), ("en", "it"), ("en", "zh"), ("cs", "en")]
    union = {head for s, t in directions for head in default_heads("embedded", s, t, 8).heads}
    assert every_direction_heads("embedded", 8) == tuple(sorted(union))
    assert len(union) > len(default_heads("embedded", "en", "de", 8).heads)  # the directions differ
    gemma = every_direction_heads("/models/gemma-4-E4B-it", 4)  # a local copy, matched by its name
    assert set(default_heads("google/gemma-4-E4B-it", "en", "zh", 4).heads) <= set(gemma)
    assert every_direction_heads("/models/my-own-model") == ()
