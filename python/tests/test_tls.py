"""The Python package against a mutual-TLS cluster (test CA from tools/gen-certs.sh): a
client and a whole job (JoinJob, the Gloo rendezvous through the coordinator, pulls,
pushes, a checkpoint) with a worker certificate; a plaintext client is refused with a
TLS hint within its timeout."""

import os
import subprocess
import time

import numpy as np
import pytest

import ember
import ember.data
import ember.local
from conftest import REPO, write_config
from ember import errors


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    certs = tmp_path_factory.mktemp("certs")
    subprocess.run([os.path.join(REPO, "tools", "gen-certs.sh"), str(certs)], check=True,
                   capture_output=True)
    server = (f"--tls_ca={certs}/ca.pem", f"--tls_cert={certs}/server.pem",
              f"--tls_key={certs}/server.key")
    with ember.local.LocalCluster(shards=2, coordinator_flags=server, ps_flags=server) as c:
        yield c, (f"{certs}/ca.pem", f"{certs}/client.pem", f"{certs}/client.key")


def test_a_client_with_a_worker_certificate_pulls_and_pushes(tls_cluster):
    cluster, tls = tls_cluster
    c = ember.Client(cluster.coordinator, tls=tls)
    c.create_table(ember.Table("t", dim=4, optimizer="sgd", learning_rate=1.0))
    ids = np.arange(100, dtype=np.int64)
    before = c.pull("t", ids)
    c.push("t", ids, np.ones((100, 4), np.float32))
    np.testing.assert_allclose(c.pull("t", ids), before - 1.0, rtol=1e-6)


def test_a_plaintext_client_is_refused_with_a_tls_hint(tls_cluster):
    cluster, _ = tls_cluster
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError, match="(?i)tls"):
        ember.Client(cluster.coordinator, connect_timeout_s=1.0, deadline_s=1.0)
    assert time.monotonic() - t0 < 20


def test_a_python_job_runs_over_mutual_tls(tls_cluster, quickstart_data, tmp_path):
    cluster, tls = tls_cluster
    config = ember.load_config(write_config(
        tmp_path / "c.pbtxt", quickstart_data[0],
        replace=[('name: "quickstart"', 'name: "tls"'), ("epochs: 1", "epochs: 1\n  max_steps: 5")]))
    job = ember.Job(config, cluster.coordinator, tls=tls, log=None)

    def train(attempt):
        import torch
        import ember.torch as et
        emb = et.EmbeddingCollection.from_config(attempt.client, config,
                                                 collective=attempt.collective)
        model = torch.nn.Linear(sum(emb.dim(f) for f in emb.feature_names), 1)
        opt = et.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                      attempt.collective)
        data = ember.data.Dataset(config, "train")
        attempt.track(model, opt, data)
        for batch in attempt.steps(data, emb):
            pooled = emb(batch)
            loss = model(torch.cat([pooled[f] for f in emb.feature_names], 1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return attempt.finish()

    result = job.run(train)
    assert result["steps"] == 5 and result["checkpoints"] >= 1
    assert result["sparse_rows"] > 0
