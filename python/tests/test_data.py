"""ember.data over ember-datagen's files: partitions, the cursor, bad input."""

import numpy as np
import pytest

import ember
import ember.data
from ember import errors


def labels_of(dataset):
    return np.concatenate([b.labels.numpy() for b in dataset])


def test_two_ranks_read_every_example_once(quickstart_data):
    config = ember.load_config(quickstart_data[0])
    whole = ember.data.Dataset(config, "train", batch_size=4096)
    parts = [ember.data.Dataset(config, "train", rank=r, world_size=2, batch_size=4096)
             for r in range(2)]
    counts = [sum(b.size for b in p) for p in parts]
    assert sum(counts) == sum(b.size for b in whole) == 60000
    assert min(counts) > 0


def test_a_cursor_resumes_with_identical_batches(quickstart_data):
    config = ember.load_config(quickstart_data[0])
    a = ember.data.Dataset(config, "train", batch_size=1000, epochs=2)
    it = iter(a)
    for _ in range(37):  # into the second file
        next(it)
    cursor = a.state()
    rest = [b for b in it]
    b = ember.data.Dataset(config, "train", batch_size=1000, epochs=2)
    b.load_state(cursor)
    again = list(b)
    assert len(again) == len(rest) > 60
    for x, y in zip(rest, again):
        assert np.array_equal(x.labels.numpy(), y.labels.numpy())
        assert np.array_equal(x.ids["item_id"].numpy(), y.ids["item_id"].numpy())
        assert np.array_equal(x.dense.numpy(), y.dense.numpy())
    batch = rest[0]
    assert batch.dense.shape == (1000, len(config.dense_columns))
    offsets = batch.offsets["recent_items"].numpy()
    assert offsets[0] == 0 and offsets[-1] == batch.ids["recent_items"].numel()


def _count(dataset):
    """Examples left in the dataset's current epoch."""
    n = 0
    while (batch := dataset.pop()) is not None:
        n += batch.size
    return n


def test_a_rank_out_of_data_resumes_by_the_epoch_end_rule(quickstart_data):
    # training.epoch_end LAST_OUT cuts checkpoints while a rank has read its share of the
    # epoch: its cursor is then the next epoch's start. At the same world size that rank
    # resumes in the next epoch and the other continues; at another world size the
    # epoch continues with only the unread lines (LAST_OUT), or is over (FIRST_OUT).
    config = ember.load_config(quickstart_data[0])
    last_out = ember._ember.parse_model_config(
        config.text.replace("training {", "training {\n  epoch_end: LAST_OUT", 1))
    opts = dict(batch_size=1000, epochs=2)
    ranks = [ember.data.Dataset(last_out, "train", rank=r, world_size=2, **opts) for r in (0, 1)]
    share0 = _count(ranks[0])
    assert ranks[0].state() == {"epoch": 1, "file_index": 0, "line": 0}
    read1 = sum(ranks[1].pop().size for _ in range(5))
    share1 = _count(ember.data.Dataset(last_out, "train", rank=1, world_size=2, **opts))
    state = {"epoch": 0, "world_size": 2, "data": None,
             "cursors": [ranks[0].state(), ranks[1].state()]}
    assert share0 + share1 == 60000 and read1 == 5000

    same = [ember.data.Dataset(last_out, "train", rank=r, world_size=2, **opts) for r in (0, 1)]
    for d in same:
        d.resume(state)
    assert [d.epoch for d in same] == [1, 0]
    assert _count(same[0]) == share0  # the whole of its share, in epoch 1
    assert _count(same[1]) == share1 - read1

    one = ember.data.Dataset(last_out, "train", rank=0, world_size=1, **opts)
    one.resume(state)
    assert one.epoch == 0 and _count(one) == share1 - read1  # rank 0's share is not read again
    first_out = ember.data.Dataset(config, "train", rank=0, world_size=1, **opts)
    first_out.resume(state)
    assert first_out.epoch == 1 and _count(first_out) == 60000


def test_test_data_carries_its_eval_columns(quickstart_data):
    config = ember.load_config(quickstart_data[0])
    batch = next(iter(ember.data.Dataset(config, "test")))
    p = batch.eval["true_prob"].numpy()
    assert p.min() >= 0 and p.max() <= 1 and p.std() > 0


def test_bad_input(quickstart_data, tmp_path):
    config = ember.load_config(quickstart_data[0])
    with pytest.raises(errors.NotFoundError):
        ember.data.Dataset(config, str(tmp_path / "missing"))
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        ember.data.Dataset(config, "train", batch_size=0)
    with pytest.raises(errors.InvalidArgumentError, match="rank"):
        ember.data.Dataset(config, "train", rank=2, world_size=2)
    bad = tmp_path / "bad"
    bad.mkdir()
    header = open(quickstart_data[1] + "/test/part-00000.tsv").readline()
    (bad / "part-0.tsv").write_text(header + "not\ta\tline\n" * 2000)
    with pytest.raises(errors.InvalidArgumentError, match="malformed"):
        list(ember.data.Dataset(config, str(bad)))
    with pytest.raises(errors.InvalidArgumentError, match="features\\[0\\].*table 'nope'"):
        ember.parse_config('name: "x" data { columns { name: "label" kind: LABEL } '
                           'columns { name: "u" kind: CATEGORICAL } } '
                           'tables { name: "t" dim: 4 } features { column: "u" table: "nope" }',
                           origin="x.pbtxt")
    with pytest.raises(errors.NotFoundError):
        ember.load_config(str(tmp_path / "none.pbtxt"))


def test_transforms_take_their_statistics_from_the_data(quickstart_data):
    # docs/OPERATIONS.md "Feature transforms": a config that standardizes a column without
    # a mean and std cannot read data until its statistics are computed, as ember-worker
    # does before training.
    with open(quickstart_data[0]) as f:
        text = f.read()
    old = 'columns { name: "price" kind: DENSE transform: LOG1P }'
    assert old in text
    text = text.replace(old, 'columns { name: "price" kind: DENSE transform: LOG1P '
                             'clip_max: 6 standardize: true }')
    config = ember.parse_config(text, origin="t.pbtxt")
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"data.columns\[9\] \(price\): standardize needs mean and std"):
        list(ember.data.Dataset(config, "train"))
    filled = config.with_statistics()
    assert filled.with_statistics() is not None  # nothing left to compute: no error
    price = config.dense_columns.index("price")
    values = np.concatenate([b.dense.numpy()[:, price]
                             for b in ember.data.Dataset(filled, "train", batch_size=8192)])
    assert values.size == 60000
    assert abs(values.mean()) < 1e-3 and abs(values.std() - 1) < 1e-3
