#!/usr/bin/env python3
# The baseline for tools/criteo_like/gen.py's data: logistic regression in PyTorch, one
# weight per distinct value of C1..C26 plus log1p(I1..I13), Adagrad (lr 0.05), batch 2048;
# prints the test AUC after each epoch. Needs python3-torch (tools/install-deps.sh installs it).
#
#   /usr/bin/python3 tools/criteo_like/logistic_baseline.py TRAIN_FILE TEST_FILE EPOCHS
import sys, math, torch
torch.manual_seed(0)
def load(path):
    ys, cats, ints = [], [], []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        ys.append(float(f[0]))
        ints.append([math.log1p(float(v)) if v else 0.0 for v in f[1:14]])
        cats.append(f[14:40])
    return ys, cats, ints
ytr, ctr, itr = load(sys.argv[1]); yte, cte, ite = load(sys.argv[2])
vocab = [dict() for _ in range(26)]
def ids(cats, grow):
    out = []
    for row in cats:
        r = []
        for j, v in enumerate(row):
            d = vocab[j]
            if v not in d and grow: d[v] = len(d) + 1
            r.append(d.get(v, 0))
        out.append(r)
    return torch.tensor(out)
Xtr, Xte = ids(ctr, True), ids(cte, False)
offs = torch.tensor([0] + [len(d) + 1 for d in vocab]).cumsum(0)[:-1]
Xtr, Xte = Xtr + offs, Xte + offs
Itr, Ite = torch.tensor(itr), torch.tensor(ite)
Ytr, Yte = torch.tensor(ytr), torch.tensor(yte)
n = int(offs[-1]) + len(vocab[-1]) + 1
emb = torch.nn.EmbeddingBag(n, 1, mode="sum"); torch.nn.init.zeros_(emb.weight)
lin = torch.nn.Linear(13, 1)
opt = torch.optim.Adagrad(list(emb.parameters()) + list(lin.parameters()), lr=0.05)
def auc(p, y):
    order = torch.argsort(p); y = y[order]; pos = y.sum(); neg = len(y) - pos
    ranks = torch.arange(1, len(y) + 1, dtype=torch.float64)
    return float(((ranks * y).sum() - pos * (pos + 1) / 2) / (pos * neg))
for epoch in range(int(sys.argv[3])):
    perm = torch.randperm(len(Ytr))
    for i in range(0, len(perm), 2048):
        b = perm[i:i + 2048]
        logit = emb(Xtr[b]).squeeze(1) + lin(Itr[b]).squeeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, Ytr[b])
        opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        p = emb(Xte).squeeze(1) + lin(Ite).squeeze(1)
    print("epoch", epoch + 1, "test AUC %.4f" % auc(p.double(), Yte.double()))
