"""ember.torch against a real cluster: the gradients its backward pushes equal those
of torch.nn.EmbeddingBag with the same optimizer formula (SUM, MEAN, a table shared by
two features), and its bad input raises named errors with nothing applied."""

import numpy as np
import pytest
import torch

import ember
import ember.torch as et
from ember import errors
from ember.data import Batch

FEATURES = [("f_sum", "a", "sum"), ("f_mean", "a", "mean"), ("g_mean", "b", "mean")]


def batches(seed, n=3, b=6):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids, offsets = {}, {}
        for name, _, _ in FEATURES:
            lengths = rng.integers(0, 4, size=b)
            offsets[name] = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
            ids[name] = torch.from_numpy(rng.integers(0, 12, size=int(lengths.sum())).astype(np.int64))
        out.append(Batch.from_tensors(torch.zeros(b), ids, offsets))
    return out


def loss_of(pooled, weights):
    return sum((pooled[name] * weights[name]).sum() for name, _, _ in FEATURES)


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_gradients_equal_embedding_bag(cluster, optimizer):
    client = ember.Client(cluster.coordinator)
    kw = {"learning_rate": 0.3} if optimizer == "sgd" else {"learning_rate": 0.2,
                                                            "initial_accumulator": 0.1}
    emb = et.EmbeddingCollection(client, [ember.Table("a", 4, optimizer, **kw),
                                          ember.Table("b", 3, optimizer, **kw)], FEATURES)
    # The reference: one EmbeddingBag weight per table, starting from the PS's init rows.
    ids = np.arange(12, dtype=np.int64)
    ref = {t: torch.nn.Parameter(torch.from_numpy(client.pull(t, ids).copy())) for t in "ab"}
    if optimizer == "sgd":
        ref_opt = torch.optim.SGD(ref.values(), lr=0.3)
    else:
        ref_opt = torch.optim.Adagrad(ref.values(), lr=0.2, initial_accumulator_value=0.1,
                                      eps=1e-8)
    rng = torch.Generator().manual_seed(3)
    weights = {name: torch.randn(6, emb.dims[t], generator=rng) for name, t, _ in FEATURES}
    for step, batch in enumerate(batches(1)):
        emb.step = step
        loss_of(emb(batch), weights).backward()
        ref_pooled = {name: torch.nn.functional.embedding_bag(
            batch.ids[name], ref[t], batch.offsets[name], mode=mode, include_last_offset=True)
            for name, t, mode in FEATURES}
        ref_opt.zero_grad()
        loss_of(ref_pooled, weights).backward()
        ref_opt.step()
    for t in "ab":
        np.testing.assert_allclose(client.pull(t, ids), ref[t].detach().numpy(), rtol=2e-5,
                                   atol=2e-6, err_msg=f"table {t}")


def test_bad_input_names_the_problem_and_applies_nothing(cluster):
    client = ember.Client(cluster.coordinator)
    emb = et.EmbeddingCollection(client, [ember.Table("a", 4, "sgd", learning_rate=1.0),
                                          ember.Table("b", 3, "sgd", learning_rate=1.0)],
                                 FEATURES)
    before = client.checksum()
    batch = batches(2, n=1)[0]
    # Offsets that do not match the IDs.
    bad = batches(2, n=1)[0]
    bad._raw["offsets"][0] = bad._raw["offsets"][0].copy()
    bad._raw["offsets"][0][-1] += 1
    with pytest.raises(errors.InvalidArgumentError, match="f_sum.*offsets must .* end at"):
        emb(bad)
    # IDs that are not int64.
    bad = batches(2, n=1)[0]
    bad._raw["ids"][1] = bad._raw["ids"][1].astype(np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="f_mean.*int64"):
        emb(bad)
    # A feature the batch lacks.
    only = Batch.from_tensors(torch.zeros(2), {"f_sum": torch.tensor([1, 2])},
                              {"f_sum": torch.tensor([0, 1, 2])})
    with pytest.raises(errors.InvalidArgumentError, match="no feature 'f_mean'"):
        emb(only)
    # Non-finite gradients.
    pooled = emb(batch)
    with pytest.raises(errors.InvalidArgumentError, match="not finite.*nothing was pushed"):
        (pooled["f_sum"].sum() * float("nan")).backward()
    # Backward twice on one forward.
    pooled = emb(batch)
    loss = pooled["f_sum"].sum()
    loss.backward(retain_graph=True)
    after_one = client.checksum()
    with pytest.raises(errors.FailedPreconditionError, match="backward ran twice"):
        loss.backward()
    assert client.checksum() == after_one
    assert before != after_one


def test_config_mistakes_are_named(cluster):
    client = ember.Client(cluster.coordinator)
    tables = [ember.Table("a", 4)]
    with pytest.raises(errors.InvalidArgumentError, match="table 'x' is not one of"):
        et.EmbeddingCollection(client, tables, [("f", "x")])
    with pytest.raises(errors.InvalidArgumentError, match="dim 8 differs from table 'a''s dim 4"):
        et.EmbeddingCollection(client, tables, [{"name": "f", "table": "a", "dim": 8}])
    with pytest.raises(errors.InvalidArgumentError, match="pooling 'max'"):
        et.EmbeddingCollection(client, tables, [("f", "a", "max")])
    with pytest.raises(errors.EmberError, match="dim"):
        et.EmbeddingCollection(client, [ember.Table("a", 8)], [("f", "a")])  # the PS has dim 4


def test_unpooled_features_and_pad(cluster):
    client = ember.Client(cluster.coordinator)
    emb = et.EmbeddingCollection(client, [ember.Table("a", 4, "sgd", learning_rate=1.0)],
                                 [("hist", "a", "none"), ("one", "a", "sum")])
    batch = Batch.from_tensors(torch.zeros(3), {"hist": torch.tensor([5, 6, 7, 5]),
                                                 "one": torch.tensor([5, 6, 9])},
                               {"hist": torch.tensor([0, 3, 3, 4]),
                                "one": torch.tensor([0, 1, 2, 3])})
    out = emb(batch)
    rows = client.pull("a", np.array([5, 6, 7, 9]))
    np.testing.assert_array_equal(out["hist"].values.detach().numpy(), rows[[0, 1, 2, 0]])
    padded, mask = et.pad(out["hist"], max_len=2)
    assert padded.shape == (3, 2, 4)
    assert mask.tolist() == [[True, True], [False, False], [True, False]]
    np.testing.assert_array_equal(padded[0].detach().numpy(), rows[[1, 2]])  # the last 2
    # The gradient of a history row reaches its (shared) table row.
    padded.sum().backward()
    after = client.pull("a", np.array([5, 6, 7, 9]))
    np.testing.assert_allclose(after, rows - np.array([[1], [1], [1], [0]], np.float32))
